// Bundles the `mesh` command into one file so it starts without resolving hundreds of modules.
// better-sqlite3 is native and stays an external dependency; tsx (for `mesh agent x.ts`) is the user's, if installed.
import { build } from "esbuild"
import { chmodSync } from "node:fs"

await build({
  entryPoints: ["src/bin/mesh.ts"],
  outfile: "dist/bin/mesh.js",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  external: ["better-sqlite3", "tsx", "tsx/*"],
  // Some bundled dependencies are CommonJS and call require().
  banner: { js: "import { createRequire as __meshCreateRequire } from 'node:module'; const require = __meshCreateRequire(import.meta.url);" },
  logLevel: "warning"
})
chmodSync("dist/bin/mesh.js", 0o755)
