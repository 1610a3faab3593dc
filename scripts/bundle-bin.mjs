// Bundles the `mesh` command so it starts without resolving hundreds of modules: one small entry file that answers
// `--version` itself, the command in a chunk it loads otherwise, and a chunk for each part the command imports only
// when used (the agent server and its providers, the agent client, the saga engine), so that `mesh hub` does not
// parse them.
// better-sqlite3 is native and stays an external dependency; tsx (for `mesh agent x.ts`) is the user's, if installed.
import { build } from "esbuild"
import { chmodSync, rmSync } from "node:fs"

rmSync("dist/bin/chunks", { recursive: true, force: true })
await build({
  entryPoints: { mesh: "src/bin/start.ts" },
  outdir: "dist/bin",
  entryNames: "[name]",
  chunkNames: "chunks/[name]-[hash]",
  splitting: true,
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  external: ["better-sqlite3", "tsx", "tsx/*"],
  // Less text to parse at every start (names are kept: errors and logs still say what failed).
  minifyWhitespace: true,
  minifySyntax: true,
  // Some bundled dependencies are CommonJS and call require().
  banner: { js: "import { createRequire as __meshCreateRequire } from 'node:module'; const require = __meshCreateRequire(import.meta.url);" },
  logLevel: "warning"
})
chmodSync("dist/bin/mesh.js", 0o755)
