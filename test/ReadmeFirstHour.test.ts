/**
 * README.md, "Your first hour", run as written on a fresh database: its shell blocks are read out of the README (so
 * the test fails when they drift) and run in order by bash as one shell (each block's variables carried to the next),
 * with `mesh` on PATH being the built binary. The hub the first block starts is started by the test, from that
 * block's own `mesh hub` line, so that it can be stopped; every other line runs as written. Each block must exit 0 and
 * print what the README says it prints.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "./support/bin.js"
import { spawnHubIn } from "./support/meshHub.js"
import * as KeysNative from "../src/node/KeysNative.js"

/** The fenced `sh` blocks of a README section (its `###` subsections included), in order. */
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

/** The variables a block assigns (`NAME=…` at the start of a line). */
const assigned = (block: string): ReadonlyArray<string> => [...block.matchAll(/^([A-Z_]+)=/gm)].map((m) => m[1]!)

/** Waits until the hub resolves the didHash: a registration a block's background agent makes. */
const registered = (hubUrl: string, didHash: string, log: () => string) =>
  Effect.tryPromise(() => fetch(`${hubUrl}/v1/agents/${didHash}`).then((r) => (r.status === 200 ? undefined : Promise.reject(new Error(String(r.status)))))).pipe(
    Effect.retry(Schedule.intersect(Schedule.spaced("200 millis"), Schedule.recurs(600))),
    Effect.orElse(() => Effect.dieMessage(`${didHash} did not register: ${log()}`))
  )

const didHashOf = (dir: string, name: string): string =>
  (JSON.parse(fs.readFileSync(path.join(dir, `${name}.identity.json`), "utf8")) as { didHash: string }).didHash

describe("README: Your first hour", () => {
  it.scopedLive("runs as written: a saga hub, a paid call booked and reconciled, a saga committed, a task approved", () =>
    Effect.gen(function* () {
      const blocks = shellBlocks(fs.readFileSync("README.md", "utf8"), "Your first hour")
      assert.strictEqual(blocks.length, 6, "the hub, the paid call's two blocks, the saga, the assistant and its approval")
      const [hubBlock, setup, paidCall, saga, assistant, approval] = blocks
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-readme-hour-"))
      const binDir = path.join(dir, "bin")
      fs.mkdirSync(binDir)
      fs.writeFileSync(path.join(binDir, "mesh"), `#!/bin/sh\nexec "${process.execPath}" "${ensureBin()}" "$@"\n`, { mode: 0o755 })
      // The README runs from a checkout: its examples are where it names them.
      fs.symlinkSync(path.resolve("examples"), path.join(dir, "examples"))
      const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", PATH: `${binDir}:${process.env.PATH ?? ""}` }
      for (const k of Object.keys(env)) if (k.startsWith("MESH_")) delete env[k]

      // The hub block: every line but the hub runs as written; the hub from its own line, on a port of the test's.
      const hubLines = hubBlock!.trim().split("\n")
      const hubLine = hubLines.find((l) => l.startsWith("mesh hub"))
      assert.isString(hubLine, "the first block starts the hub")
      const before = yield* bash(hubLines.filter((l) => l !== hubLine).join("\n"), dir, env)
      assert.strictEqual(before.status, 0, before.stderr)
      const hubArgs = hubLine!.replace(/#.*$/, "").trim().split(/\s+/).slice(2)
      const hub = yield* spawnHubIn(dir, path.join(dir, "hub.db"), ...hubArgs)
      assert.include(hub.out(), "runner     this hub runs every saga")
      env.MESH_HUB = hub.url
      env.ADMIN_KEY = hub.adminKey

      // One shell: what each block assigns is there for the next ones.
      const names: Array<string> = []
      const run = (block: string) => {
        names.push(...assigned(block))
        const carry = names.length === 0 ? "" : `\ndeclare -p ${names.join(" ")} > .readme-vars`
        return bash(`if [ -f .readme-vars ]; then . ./.readme-vars; fi\n${block}${carry}\n`, dir, env)
      }

      const started = yield* run(setup!)
      assert.strictEqual(started.status, 0, started.stderr)
      const shop = didHashOf(dir, "shop")
      for (const h of [didHashOf(dir, "alice"), shop]) yield* registered(hub.url, h, () => `${started.stdout}\n${started.stderr}`)
      assert.include(paidCall!, shop, "the README names the shop by its didHash")

      const paid = yield* run(paidCall!)
      assert.strictEqual(paid.status, 0, `${paid.stdout}\n${paid.stderr}`)
      assert.match(paid.stdout, /^shop: two widgets \(charged 0\.25 USD under payment mandate \S+\)$/m)
      assert.match(paid.stderr, /^authorized up to 1 USD under payment mandate \S+ \(did:mesh:alice → did:mesh:shop\); allocated from pool pool_\w+ as alloc_\S+$/m)
      assert.match(paid.stderr, /^charged 0\.25 USD by did:mesh:shop \(commit token for call_\w+:call, answer\)$/m)
      assert.match(paid.stderr, /^pool pool_\w+: 0\.25 of 5 USD spent or held, 4\.75 USD left/m)
      assert.match(paid.stdout, /^pool_\w+ {2}did:mesh:alice → did:mesh:alice {2}limit 5 USD, allocated 0\.25, remaining 4\.75/m)
      assert.match(paid.stdout, /^used 0\.25 USD in 1 allocation$/m)
      assert.match(paid.stdout, /released +1 USD to did:mesh:shop, used 0\.25 USD, key call_\w+:call\n {4}commit token: eyJ/)
      assert.match(paid.stdout, /^verified {2}alloc_\S+ {2}0\.25 USD by did:mesh:shop for call_\w+:call \(answer\)/m)
      assert.match(paid.stdout, /^pool pool_\w+ reconciles: 1 receipt, 0\.25 USD used, 0\.25 USD allocated$/m)

      const sagaRan = yield* run(saga!)
      assert.strictEqual(sagaRan.status, 0, `${sagaRan.stdout}\n${sagaRan.stderr}`)
      // The saga's end alone on stdout; its progress on stderr.
      const ended = JSON.parse(sagaRan.stdout) as { status: string; steps: ReadonlyArray<{ name: string; usedUsd: string; commitToken: string | null }> }
      assert.strictEqual(ended.status, "committed")
      assert.deepStrictEqual(ended.steps.map((s) => [s.name, s.usedUsd]), [["widgets", "0.25"]])
      assert.match(ended.steps[0]!.commitToken ?? "", /^eyJ/)
      assert.match(sagaRan.stderr, /step_started widgets answer on did:mesh:shop, budget 0\.5 USD/)
      assert.match(sagaRan.stderr, /step_committed widgets used 0\.25 USD/)
      assert.match(sagaRan.stderr, /saga_committed/)

      const assistantStarted = yield* run(assistant!)
      assert.strictEqual(assistantStarted.status, 0, assistantStarted.stderr)
      const assistantHash = didHashOf(dir, "assistant")
      yield* registered(hub.url, assistantHash, () => `${assistantStarted.stdout}\n${assistantStarted.stderr}`)
      assert.include(approval!, assistantHash, "the README names the assistant by its didHash")
      const approved = yield* run(approval!)
      assert.strictEqual(approved.status, 0, `${approved.stdout}\n${approved.stderr}`)
      assert.strictEqual(approved.stdout.trim(), 'sent "lunch at noon?" to bob')
      // Once: the same approval again is refused, and the email is not sent twice.
      const again = yield* bash(`. ./.readme-vars\n${approval!.trim().split("\n").at(-1)!}`, dir, env)
      assert.notStrictEqual(again.status, 0)
      assert.notInclude(again.stdout, "sent")
    }).pipe(Effect.provide(KeysNative.layer)), { timeout: 300_000 })
})
