/**
 * The floors of `src/` are checked by the build, not by a list to remember (docs/architecture.md §3): the core
 * bundles for a neutral platform, lint refuses an import that points up a floor, and the package root loads no
 * SQLite and no node:http.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { build } from "esbuild"
import { ESLint } from "eslint"

const root = path.resolve(import.meta.dirname, "..")

/** Bundles `entry` (or `contents`) for a platform that has no Node built-ins; the errors and the inputs read. */
const bundleNeutral = async (input: { readonly entry?: string; readonly contents?: string }) => {
  try {
    const result = await build({
      ...(input.entry === undefined
        ? { stdin: { contents: input.contents ?? "", resolveDir: path.join(root, "src/core"), loader: "ts" as const } }
        : { entryPoints: [path.join(root, input.entry)] }),
      bundle: true,
      write: false,
      platform: "neutral",
      format: "esm",
      mainFields: ["module", "main"],
      conditions: ["import", "default"],
      logLevel: "silent",
      metafile: true
    })
    return { errors: [] as Array<string>, inputs: Object.keys(result.metafile.inputs) }
  } catch (e) {
    return { errors: ((e as { errors?: Array<{ text: string }> }).errors ?? []).map((x) => x.text), inputs: [] as Array<string> }
  }
}

describe("floors", () => {
  it("the core bundles for a neutral platform: no Node built-in, no SQLite, no HTTP server", async () => {
    const { errors, inputs } = await bundleNeutral({ entry: "src/core/index.ts" })
    assert.deepStrictEqual(errors, [])
    assert.isAbove(inputs.length, 19)
    assert.deepStrictEqual(inputs.filter((i) => /^node:|better-sqlite3|@effect\/(sql|platform)/.test(i)), [])
  }, 60_000)

  it("the neutral bundle fails on any reach for a Node built-in", async () => {
    const { errors } = await bundleNeutral({ contents: `import "./Envelope.js"\nimport { createHash } from "node:crypto"\nexport const h = createHash` })
    assert.isAbove(errors.length, 0)
    assert.match(errors.join("\n"), /node:crypto/)
  }, 60_000)

  it("lint refuses an import that points up a floor, and Node built-ins in the core", async () => {
    const eslint = new ESLint({ cwd: root })
    const lint = async (file: string, code: string) =>
      (await eslint.lintText(code, { filePath: path.join(root, file) }))[0]!.messages.filter((m) => m.ruleId !== null).map((m) => m.ruleId)
    assert.include(await lint("src/core/Probe.ts", `import "../hub/Hub.js"\n`), "no-restricted-imports")
    assert.include(await lint("src/core/internal/probe.ts", `import "../../sql/Database.js"\n`), "no-restricted-imports")
    assert.include(await lint("src/core/Probe.ts", `import "fs"\n`), "no-restricted-imports")
    assert.include(await lint("src/core/Probe.ts", `export const m = import("node:crypto")\n`), "no-restricted-syntax")
    assert.include(await lint("src/sql/Probe.ts", `import "../agent/AgentServer.js"\n`), "no-restricted-imports")
    assert.include(await lint("src/hub/Probe.ts", `import "../promise/Promise.js"\n`), "no-restricted-imports")
    // Down a floor, or within one, is fine.
    assert.deepStrictEqual(await lint("src/agent/Probe.ts", `import "../sql/Database.js"\nimport "../core/Envelope.js"\nimport "./AgentApi.js"\n`), [])
  }, 60_000)

  it("importing the package root loads no SQLite and no node:http", () => {
    const script = [
      `await import("agent-mesh")`,
      `const { createRequire } = await import("node:module")`,
      `const cached = Object.keys(createRequire(import.meta.url).cache)`,
      `console.log(JSON.stringify({ sqlite: cached.some((k) => k.includes("better-sqlite3")), http: process.moduleLoadList.some((m) => m === "NativeModule http") }))`
    ].join("\n")
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" })
    assert.deepStrictEqual(JSON.parse(out), { sqlite: false, http: false })
  }, 60_000)
})
