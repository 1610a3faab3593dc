/**
 * `--log-level` as a process sees it: one flag for every command, which silences the access log of `mesh hub` and
 * `mesh agent` as their variables (`MESH_HUB_LOG_LEVEL`, `MESH_AGENT_LOG_LEVEL`) do, and wins over them; every other
 * command takes it without a usage error.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "./support/bin.js"

const baseEnv = (extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
  for (const k of Object.keys(env)) if (k.startsWith("MESH_") || k.startsWith("OTEL_")) delete env[k]
  return { ...env, ...extra }
}

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "mesh-loglvl-"))

interface Served {
  readonly proc: ChildProcess
  readonly url: string
  readonly output: () => string
}

/** Starts `mesh <args>` and resolves with the URL it printed once it printed its last banner line. */
const serve = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>, ready: RegExp) =>
  Effect.acquireRelease(
    Effect.async<Served, Error>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), ...args], { stdio: ["ignore", "pipe", "pipe"], env: baseEnv(env) })
      let out = ""
      let done = false
      const finish = (e?: Error) => {
        if (done) return
        done = true
        if (e) return resume(Effect.fail(e))
        resume(Effect.succeed({ proc, url: /listening on (http:\/\/[^\s,]+)/.exec(out)![1]!, output: () => out }))
      }
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString()
        if (ready.test(out)) finish()
      })
      proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
      proc.on("exit", (code) => finish(new Error(`exited with ${code}: ${out}`)))
    }),
    ({ proc }) => Effect.sync(() => proc.kill("SIGKILL"))
  )

/** Stops the process with SIGTERM and waits for its exit, so everything it wrote has been read. */
const stop = (proc: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (proc.exitCode !== null) return resume(Effect.void)
    proc.once("close", () => resume(Effect.void))
    proc.kill("SIGTERM")
  })

const request = (url: string, correlationId: string) =>
  Effect.promise(() => fetch(`${url}/health`, { headers: { "x-correlation-id": correlationId } }).then((r) => r.text()))

const servers = {
  hub: { args: () => ["hub", "--db", path.join(tempDir(), "hub.db"), "--port", "0"], env: "MESH_HUB_LOG_LEVEL", ready: /\n {2}database [^\n]*\n/ },
  agent: { args: () => ["agent", "examples/echo-agent.ts", "--port", "0", "--db", ":memory:"], env: "MESH_AGENT_LOG_LEVEL", ready: /\n {2}discovery [^\n]*\n/ }
} as const

/** Whether a request to the server started with `flags` and `env` shows in its log. */
const logged = (which: keyof typeof servers, flags: ReadonlyArray<string>, env: Readonly<Record<string, string>>, id: string) =>
  Effect.gen(function* () {
    const s = servers[which]
    const served = yield* serve([...s.args(), ...flags], env, s.ready)
    yield* request(served.url, id)
    yield* stop(served.proc)
    return served.output().includes(id)
  }).pipe(Effect.scoped)

describe("mesh --log-level", () => {
  for (const which of ["hub", "agent"] as const) {
    const env = servers[which].env
    it.live(`${which}: the access log shows a request at the default level`, () =>
      Effect.map(logged(which, [], {}, `${which}-default`), (shown) => assert.isTrue(shown)))
    it.live(`${which} --log-level warning silences the access log`, () =>
      Effect.map(logged(which, ["--log-level", "warning"], {}, `${which}-flag`), (shown) => assert.isFalse(shown)))
    it.live(`${which}: ${env}=error silences it too`, () =>
      Effect.map(logged(which, [], { [env]: "error" }, `${which}-env`), (shown) => assert.isFalse(shown)))
    it.live(`${which}: --log-level info wins over ${env}=error`, () =>
      Effect.map(logged(which, ["--log-level", "info"], { [env]: "error" }, `${which}-both`), (shown) => assert.isTrue(shown)))
  }

  it.live("a level that is not one is refused on one line, exit 2", () =>
    Effect.async<void>((resume) => {
      const p = spawn(process.execPath, [ensureBin(), "hub", "--db", ":memory:", "--log-level", "loud"], { stdio: ["ignore", "pipe", "pipe"], env: baseEnv({}) })
      let err = ""
      p.stderr.on("data", (d: Buffer) => (err += d.toString()))
      p.on("close", (status) =>
        resume(Effect.sync(() => {
          assert.strictEqual(status, 2)
          assert.strictEqual(err, "mesh: --log-level takes one of all, trace, debug, info, warning, error, fatal, none, not \"loud\" (see mesh --help)\n")
        })))
    }))

  /** Commands that end by themselves, each with arguments it can run with here (a hub that is not there is fine). */
  const others: ReadonlyArray<ReadonlyArray<string>> = [
    ["keygen", "probe", "--out", "@DIR/probe.identity.json"],
    ["keys", "create", "--hub", "http://127.0.0.1:9", "--admin-key", "mk_x", "--owner", "alice"],
    ["agents", "ls", "--hub", "http://127.0.0.1:9"],
    ["agents", "search", "echo", "--hub", "http://127.0.0.1:9"],
    ["agents", "show", "3f2a", "--hub", "http://127.0.0.1:9"],
    ["call", "http://127.0.0.1:9", "hi"],
    ["mandate", "verify", "x.y.z", "--hub", "http://127.0.0.1:9"],
    ["saga", "status", "saga_x", "--identity", "@DIR/missing.json", "--hub", "http://127.0.0.1:9"]
  ]
  for (const args of others) {
    it.live(`mesh ${args.slice(0, 2).join(" ")} takes --log-level error`, () =>
      Effect.async<void>((resume) => {
        const dir = tempDir()
        const argv = [ensureBin(), ...args.map((a) => a.replace("@DIR", dir)), "--log-level", "error"]
        const p = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "pipe"], env: baseEnv({}) })
        let err = ""
        p.stderr.on("data", (d: Buffer) => (err += d.toString()))
        p.on("close", (status) =>
          resume(Effect.sync(() => {
            assert.notStrictEqual(status, 2, err)
            assert.notInclude(err, "--log-level", err)
          })))
      }))
  }
})
