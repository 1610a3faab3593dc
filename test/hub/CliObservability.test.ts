/**
 * `mesh hub` as a process: `--log-format json` prints the access line as JSON with the request's correlation id,
 * and OTEL_TRACES_EXPORTER turns tracing on in the bundled binary (spans printed by the console exporter, in the
 * trace of the traceparent the request came with).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { ensureBin } from "../support/bin.js"
import { tempDatabase } from "./support.js"

/** `mesh hub` on a fresh database; its output so far is read through `output()`. */
const spawnHub = (extra: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.acquireRelease(
    Effect.async<{ readonly proc: ChildProcess; readonly url: string; readonly output: () => string }, Error>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), "hub", "--db", tempDatabase(), "--port", "0", ...extra], {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, ...env }
      })
      let out = ""
      let done = false
      const timer = setTimeout(() => finish(new Error(`hub did not start: ${out}`)), 30_000)
      const finish = (e?: Error) => {
        if (done) return
        done = true
        clearTimeout(timer)
        if (e) return resume(Effect.fail(e))
        resume(Effect.succeed({ proc, url: /listening on (http:\/\/\S+)/.exec(out)![1]!, output: () => out }))
      }
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString()
        if (/\n {2}database [^\n]*\n/.test(out)) finish()
      })
      proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
      proc.on("exit", (code) => finish(new Error(`hub exited with ${code}: ${out}`)))
    }),
    ({ proc }) => Effect.sync(() => proc.kill("SIGKILL"))
  )

/** Polls `output` (bounded) until `found` holds. */
const waitFor = (output: () => string, found: (out: string) => boolean) =>
  Effect.promise(async () => {
    for (let i = 0; i < 100 && !found(output()); i++) await new Promise((r) => setTimeout(r, 50))
    return output()
  })

describe("mesh hub: log format and tracing from the environment", () => {
  it.live("--log-format json: the access line of a request is one JSON object with its correlation id and status", () =>
    Effect.gen(function* () {
      const hub = yield* spawnHub(["--log-format", "json"])
      yield* Effect.promise(() => fetch(`${hub.url}/health`, { headers: { "x-correlation-id": "cli-json-1" } }).then((r) => r.text()))
      const out = yield* waitFor(hub.output, (o) => o.includes("cli-json-1"))
      const line = out.split("\n").find((l) => l.includes("cli-json-1"))
      assert.isDefined(line, out)
      const json = JSON.parse(line!) as { logLevel: string; annotations: Record<string, unknown> }
      assert.strictEqual(json.logLevel, "INFO")
      assert.deepInclude(json.annotations, { method: "GET", path: "/health", status: 200, correlationId: "cli-json-1" })
    }).pipe(Effect.scoped))

  it.live("OTEL_TRACES_EXPORTER=console: the request's span is exported in the caller's trace", () =>
    Effect.gen(function* () {
      const traceId = "0af7651916cd43dd8448eb211c80319c"
      const hub = yield* spawnHub(["--log-level", "warning"], { OTEL_TRACES_EXPORTER: "console", OTEL_BSP_SCHEDULE_DELAY: "50" })
      yield* Effect.promise(() => fetch(`${hub.url}/ready`, { headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } }).then((r) => r.text()))
      const out = yield* waitFor(hub.output, (o) => o.includes(traceId))
      assert.include(out, traceId)
      assert.include(out, "GET /ready")
    }).pipe(Effect.scoped))
})
