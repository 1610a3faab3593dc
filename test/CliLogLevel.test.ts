/**
 * `--log-level` as a process sees it: one flag for every command, which silences the access log of `mesh hub` and
 * `mesh agent` as their variables (`MESH_HUB_LOG_LEVEL`, `MESH_AGENT_LOG_LEVEL`) do, and wins over them; every other
 * command takes it without a usage error. `--log-format` of both servers likewise, against `MESH_HUB_LOG_FORMAT` and
 * `MESH_AGENT_LOG_FORMAT`, each format one line per access; and the access lines of requests answered as SIGTERM
 * arrives are all in the output when the process has exited.
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

/** Waits for the process to exit and its output to be read, without signalling it again. */
const closed = (proc: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resume(Effect.void)
    proc.once("close", () => resume(Effect.void))
  })

const request = (url: string, correlationId: string) =>
  Effect.promise(() => fetch(`${url}/health`, { headers: { "x-correlation-id": correlationId } }).then((r) => r.text()))

const servers = {
  hub: {
    args: () => ["hub", "--db", path.join(tempDir(), "hub.db"), "--port", "0"],
    env: "MESH_HUB_LOG_LEVEL",
    formatEnv: "MESH_HUB_LOG_FORMAT",
    ready: /\n {2}database [^\n]*\n/
  },
  agent: {
    args: () => ["agent", "examples/echo-agent.ts", "--port", "0", "--db", ":memory:"],
    env: "MESH_AGENT_LOG_LEVEL",
    formatEnv: "MESH_AGENT_LOG_FORMAT",
    ready: /\n {2}discovery [^\n]*\n/
  }
} as const

/** The lines of the server's output, started with `flags` and `env`, that hold the correlation id of one request to it. */
const linesOf = (which: keyof typeof servers, flags: ReadonlyArray<string>, env: Readonly<Record<string, string>>, id: string) =>
  Effect.gen(function* () {
    const s = servers[which]
    const served = yield* serve([...s.args(), ...flags], env, s.ready)
    yield* request(served.url, id)
    yield* stop(served.proc)
    return served.output().split("\n").filter((l) => l.includes(id))
  }).pipe(Effect.scoped)

/** Whether a request to the server started with `flags` and `env` shows in its log. */
const logged = (which: keyof typeof servers, flags: ReadonlyArray<string>, env: Readonly<Record<string, string>>, id: string) =>
  Effect.map(linesOf(which, flags, env, id), (lines) => lines.length > 0)

/** The one access line of a request, checked to be in `format`. */
const accessLine = (format: "pretty" | "json" | "logfmt", lines: ReadonlyArray<string>, id: string) => {
  assert.strictEqual(lines.length, 1, lines.join("\n"))
  const line = lines[0]!
  if (format === "json") {
    const json = JSON.parse(line) as { logLevel: string; annotations: Record<string, unknown> }
    assert.strictEqual(json.logLevel, "INFO")
    assert.deepInclude(json.annotations, { method: "GET", path: "/health", status: 200, correlationId: id })
  } else if (format === "logfmt") {
    assert.match(line, /^timestamp=\S+ level=INFO /)
    for (const field of ["message=\"GET /health 200 ", "method=GET", "path=/health", "status=200", `correlationId=${id}`]) assert.include(line, field)
  } else {
    assert.match(line, new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO  GET /health 200 [\\d.]+ms correlationId=${id}$`))
  }
}

describe("mesh --log-level and --log-format", () => {
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

    const formatEnv = servers[which].formatEnv
    it.live(`${which}: the access line is one pretty line by default`, () =>
      Effect.map(linesOf(which, [], {}, `${which}-pretty`), (lines) => accessLine("pretty", lines, `${which}-pretty`)))
    it.live(`${which} --log-format logfmt prints it as one logfmt line`, () =>
      Effect.map(linesOf(which, ["--log-format", "logfmt"], {}, `${which}-logfmt`), (lines) => accessLine("logfmt", lines, `${which}-logfmt`)))
    it.live(`${which}: ${formatEnv}=json prints it as one JSON object`, () =>
      Effect.map(linesOf(which, [], { [formatEnv]: "json" }, `${which}-json`), (lines) => accessLine("json", lines, `${which}-json`)))
    it.live(`${which}: --log-format logfmt wins over ${formatEnv}=json`, () =>
      Effect.map(linesOf(which, ["--log-format", "logfmt"], { [formatEnv]: "json" }, `${which}-fmt-both`), (lines) => accessLine("logfmt", lines, `${which}-fmt-both`)))

    it.live(`${which}: every request answered as SIGTERM arrives has its access line in the output`, () =>
      Effect.gen(function* () {
        const s = servers[which]
        const served = yield* serve([...s.args(), "--log-format", "logfmt"], {}, s.ready)
        const ids = Array.from({ length: 40 }, (_, i) => `${which}-term-${i}`)
        const answered = yield* Effect.promise(() => {
          const calls = ids.map((id) => fetch(`${served.url}/health`, { headers: { "x-correlation-id": id } }).then((r) => r.text()).then(() => id))
          // SIGTERM as soon as the first answer is in: the rest are answered (or refused) while the server stops.
          void Promise.race(calls).then(() => served.proc.kill("SIGTERM"), () => served.proc.kill("SIGTERM"))
          return Promise.allSettled(calls)
        })
        yield* closed(served.proc)
        const done = answered.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []))
        assert.isAtLeast(done.length, 1)
        const out = served.output()
        for (const id of done) assert.include(out, `correlationId=${id}`, out)
        // The last line, written as the process exits.
        assert.isTrue(out.endsWith(`${which} stopped\n`), out)
      }).pipe(Effect.scoped))
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
