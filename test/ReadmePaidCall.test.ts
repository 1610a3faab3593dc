/**
 * README.md, "Your first paid call", run as written: its two shell blocks are read out of the README (so the test
 * fails when they drift) and run by bash against a real `mesh hub` and the `mesh agent` processes the first block
 * starts, with `mesh` on PATH being the built binary.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "./support/bin.js"
import { spawnHub } from "./support/meshHub.js"
import * as KeysNative from "../src/node/KeysNative.js"

/** The fenced `sh` blocks of a README section, in order. */
const shellBlocks = (readme: string, heading: string): ReadonlyArray<string> => {
  const start = readme.indexOf(`\n## ${heading}\n`)
  assert.isAtLeast(start, 0, `README has no section "${heading}"`)
  const rest = readme.slice(start + 1)
  const end = rest.indexOf("\n## ", 3)
  const section = end < 0 ? rest : rest.slice(0, end)
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!)
}

interface Ran {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a bash script in `cwd`; its background jobs are in its own process group, killed when the scope closes. */
const bash = (script: string, cwd: string, env: NodeJS.ProcessEnv) =>
  Effect.acquireRelease(
    Effect.async<Ran & { readonly pid: number }>((resume) => {
      const p = spawn("bash", ["-e", "-c", script], { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      p.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
      p.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
      // "exit", not "close": background jobs keep the pipes open after the script itself ended.
      p.on("exit", (status) => resume(Effect.succeed({ status, stdout, stderr, pid: p.pid! })))
    }),
    ({ pid }) =>
      Effect.sync(() => {
        try {
          process.kill(-pid, "SIGKILL")
        } catch {
          // The group is gone already.
        }
      })
  )

describe("README: Your first paid call", () => {
  it.scopedLive("runs as written: the shop charges 0.25 USD under alice's payment mandate, the pool shows it and reconciles", () =>
    Effect.gen(function* () {
      const [setup, paidCall] = shellBlocks(fs.readFileSync("README.md", "utf8"), "Your first paid call")
      assert.isString(setup)
      assert.isString(paidCall)
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-readme-paid-"))
      const binDir = path.join(dir, "bin")
      fs.mkdirSync(binDir)
      fs.writeFileSync(path.join(binDir, "mesh"), `#!/bin/sh\nexec "${process.execPath}" "${ensureBin()}" "$@"\n`, { mode: 0o755 })
      // The README runs from a checkout: its examples are where it names them.
      fs.symlinkSync(path.resolve("examples"), path.join(dir, "examples"))
      const hub = yield* spawnHub(path.join(dir, "hub.db"))
      const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", PATH: `${binDir}:${process.env.PATH ?? ""}` }
      for (const k of Object.keys(env)) if (k.startsWith("MESH_")) delete env[k]
      env.MESH_HUB = hub.url
      env.ADMIN_KEY = hub.adminKey

      // One shell in the README: the variables the first block sets are there for the second.
      const names = [...setup!.matchAll(/^([A-Z_]+)=/gm)].map((m) => m[1]!)
      const started = yield* bash(`${setup!}\ndeclare -p ${names.join(" ")} > .readme-vars\n`, dir, env)
      assert.strictEqual(started.status, 0, started.stderr)
      // Alice and the shop registered: the block's background job is up once the hub resolves both.
      const shop = JSON.parse(fs.readFileSync(path.join(dir, "shop.identity.json"), "utf8")) as { didHash: string }
      const alice = JSON.parse(fs.readFileSync(path.join(dir, "alice.identity.json"), "utf8")) as { didHash: string }
      for (const h of [alice.didHash, shop.didHash]) {
        yield* Effect.tryPromise(() => fetch(`${hub.url}/v1/agents/${h}`).then((r) => (r.status === 200 ? undefined : Promise.reject(new Error(String(r.status)))))).pipe(
          Effect.retry(Schedule.intersect(Schedule.spaced("200 millis"), Schedule.recurs(600))),
          Effect.orElse(() => Effect.dieMessage(`${h} did not register: ${started.stdout}\n${started.stderr}`))
        )
      }
      assert.include(paidCall!, shop.didHash, "the README names the shop by its didHash")

      const ran = yield* bash(`. ./.readme-vars\n${paidCall!}`, dir, env)
      assert.strictEqual(ran.status, 0, `${ran.stdout}\n${ran.stderr}`)
      assert.match(ran.stdout, /^shop: two widgets \(charged 0\.25 USD under payment mandate \S+\)$/m)
      assert.match(ran.stderr, /^authorized up to 1 USD under payment mandate \S+ \(did:mesh:alice → did:mesh:shop\); allocated from pool pool_\w+ as alloc_\S+$/m)
      assert.match(ran.stderr, /^charged 0\.25 USD by did:mesh:shop \(commit token for call_\w+:call, answer\)$/m)
      assert.match(ran.stderr, /^pool pool_\w+: 0\.25 of 5 USD spent or held, 4\.75 USD left/m)
      assert.match(ran.stdout, /^pool_\w+ {2}did:mesh:alice → did:mesh:alice {2}limit 5 USD, allocated 0\.25, remaining 4\.75/m)
      assert.match(ran.stdout, /^used 0\.25 USD in 1 allocation$/m)
      assert.match(ran.stdout, /released +1 USD to did:mesh:shop, used 0\.25 USD, key call_\w+:call\n {4}commit token: eyJ/)
      assert.match(ran.stdout, /^verified {2}alloc_\S+ {2}0\.25 USD by did:mesh:shop for call_\w+:call \(answer\)/m)
      assert.match(ran.stdout, /^pool pool_\w+ reconciles: 1 receipt, 0\.25 USD used, 0\.25 USD allocated$/m)
    }).pipe(Effect.provide(KeysNative.layer)), { timeout: 300_000 })
})
