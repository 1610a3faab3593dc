/**
 * Each log record is one line in every `--log-format`: the pretty line (time, level, message, `key=value`
 * annotations, the cause last, colour only when asked), and json and logfmt, written through the layer `mesh hub`
 * and `mesh agent` log through, on stderr; the command's own notes (stderr) go to the same writer. The writer loses no
 * line: not when its scope closes just before the process exits, nor the last ones when the process exits or
 * crashes with it open.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as FiberId from "effect/FiberId"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as List from "effect/List"
import * as LogLevel from "effect/LogLevel"
import * as fc from "fast-check"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import * as AccessLog from "../src/http/AccessLog.js"
import { fdLines, prettyAccessLine, prettyLine } from "../src/cli/LogOutput.js"
import * as Observability from "../src/cli/Observability.js"

const at = new Date(2025, 0, 2, 9, 5, 7, 42)

const recordAt = (date: Date) => ({
  fiberId: FiberId.none,
  logLevel: LogLevel.Info,
  cause: Cause.empty,
  context: FiberRefs.empty(),
  spans: List.empty(),
  date
})

const record = (fields: {
  readonly message: unknown
  readonly level?: LogLevel.LogLevel
  readonly annotations?: Readonly<Record<string, unknown>>
  readonly cause?: Cause.Cause<unknown>
}) => ({
  fiberId: FiberId.none,
  logLevel: fields.level ?? LogLevel.Info,
  message: fields.message,
  cause: fields.cause ?? Cause.empty,
  context: FiberRefs.empty(),
  spans: List.empty(),
  annotations: HashMap.fromIterable(Object.entries(fields.annotations ?? {})),
  date: at
})

describe("the pretty log line", () => {
  const plain = prettyLine(false)

  it("time, level, message and the annotations as key=value", () => {
    assert.strictEqual(plain(record({ message: "store opened", annotations: { db: "hub.db" } })), "09:05:07.042 INFO  store opened db=hub.db")
  })

  it("an access line does not repeat what its message says", () => {
    const line = plain(record({
      message: AccessLog.message("GET", "/health", 200, 1.4),
      annotations: { method: "GET", path: "/health", status: 200, durationMs: 1.4, correlationId: "c-1" }
    }))
    assert.strictEqual(line, "09:05:07.042 INFO  GET /health 200 1.4ms correlationId=c-1")
  })

  it("values with spaces, quotes, `=` or control characters are quoted as JSON strings", () => {
    const line = plain(record({ message: "m", level: LogLevel.Warning, annotations: { a: "two words", b: "k=v", c: "say \"hi\"", d: "x\ny", e: "", n: 3 } }))
    assert.notInclude(line, "\n")
    for (const part of ["WARN  m", " a=\"two words\"", " b=\"k=v\"", " c=\"say \\\"hi\\\"\"", " d=\"x\\ny\"", " e=\"\"", " n=3"]) assert.include(line, part)
  })

  it("a multi-line message and a cause with its stack stay on one line, the cause last", () => {
    const line = plain(record({ message: "handler failed\nsecond line", level: LogLevel.Error, annotations: { correlationId: "c-2" }, cause: Cause.fail(new Error("boom")) }))
    assert.notInclude(line, "\n")
    assert.match(line, /^09:05:07\.042 ERROR handler failed\\nsecond line correlationId=c-2 cause="Error: boom\\n {4}at /)
  })

  it("colour only when asked", () => {
    const coloured = prettyLine(true)(record({ message: "m" }))
    assert.include(coloured, "\x1b[32mINFO \x1b[0m")
    assert.notInclude(plain(record({ message: "m" })), "\x1b")
  })
})

describe("the pretty access line", () => {
  // Made from the entry (AccessLog.Direct) instead of from a record: it must be the line the record would have made.
  const text = fc.string({ unit: fc.constantFrom("a", "Z", "0", "/", " ", "=", "\"", "\n", "\x1b", "é", "-", ":", "#") })
  const entry = fc.record({
    method: fc.constantFrom("GET", "POST", "DELETE"),
    path: text,
    status: fc.integer({ min: 100, max: 599 }),
    durationMs: fc.double({ min: 0, max: 1e6, noNaN: true }),
    correlationId: text,
    caller: fc.option(text, { nil: undefined }),
    traceId: fc.option(text, { nil: undefined })
  })
  const base = fc.dictionary(fc.constantFrom("service", "region", "correlationId", "status", "caller", "k=v"), fc.oneof(text, fc.integer()), { maxKeys: 4 })

  it("is the line prettyLine makes of the record AccessLog.writer builds, coloured or not, whatever the runtime's annotations", () => {
    fc.assert(
      fc.property(entry, base, fc.boolean(), fc.integer({ min: 0, max: 4_000_000_000_000 }), (e, annotations, colours, ms) => {
        const runtimeAnnotations = HashMap.fromIterable(Object.entries(annotations))
        const date = new Date(ms)
        const record = { ...recordAt(date), message: AccessLog.message(e.method, e.path, e.status, e.durationMs), annotations: AccessLog.annotationsOf(runtimeAnnotations, e) }
        assert.strictEqual(prettyAccessLine(colours, runtimeAnnotations)(e, date), prettyLine(colours)(record))
      }),
      { numRuns: 2_000 }
    )
  })

  it("the pretty logger of mesh hub and mesh agent writes access lines from their entries", () => {
    const printed: Array<string> = []
    const runtime = Effect.runSync(Effect.scoped(Layer.toRuntime(Observability.layer("test", "pretty", { NO_COLOR: "1" }, (line) => void printed.push(line)))))
    const write = AccessLog.writer(runtime, () => at.getTime())!
    write({ method: "GET", path: "/health", status: 200, durationMs: 1.4, correlationId: "c-1", caller: "did:mesh:a", traceId: undefined })
    assert.deepStrictEqual(printed, ["09:05:07.042 INFO  GET /health 200 1.4ms caller=did:mesh:a correlationId=c-1"])
  })
})

describe("the log layer of mesh hub and mesh agent", () => {
  const lines = (format: Observability.LogFormat) => {
    const printed: Array<string> = []
    return Effect.gen(function* () {
      yield* Effect.logInfo("one").pipe(Effect.annotateLogs({ correlationId: "c-3" }))
      yield* Effect.logError("two").pipe(Effect.annotateLogs({ correlationId: "c-4" }), Effect.zipRight(Effect.failCause(Cause.die(new Error("gone")))), Effect.catchAllCause(Effect.logError))
      yield* Console.error("a note")
      return printed
    }).pipe(Effect.provide(Observability.layer("test", format, { NO_COLOR: "1" }, (line) => void printed.push(line))))
  }

  for (const format of Observability.LOG_FORMATS) {
    it.effect(`${format}: a line per record, none with a newline inside`, () =>
      Effect.map(lines(format), (printed) => {
        assert.strictEqual(printed.length, 4, printed.join("\n"))
        assert.strictEqual(printed[3], "a note")
        const logged = printed.slice(0, 3)
        for (const l of logged) assert.notInclude(l, "\n")
        assert.include(logged[0], "c-3")
        assert.include(logged[1], "c-4")
        assert.include(logged[2], "gone")
        if (format === "json") for (const l of logged) JSON.parse(l)
      }))
  }
})

describe("the log writer", () => {
  // Lines gather until the gather says they may go, then go out in one write: under load, a write per few hundred
  // lines rather than per line (each write costs a hand-off to the thread pool and back).
  it.live("holds the lines until the gather lets them go, then writes them in one write", () =>
    Effect.gen(function* () {
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-lines-")), "log")
      const fd = fs.openSync(file, "a")
      const nodeFs = createRequire(import.meta.url)("node:fs") as typeof fs
      const original = nodeFs.write
      let writes = 0
      nodeFs.write = ((...args: Parameters<typeof fs.write>) => {
        if (args[0] === fd) writes++
        return (original as (...a: Parameters<typeof fs.write>) => void)(...args)
      }) as typeof fs.write
      let letGo: (() => void) | undefined
      yield* Effect.scoped(
        Effect.gen(function* () {
          const out = yield* fdLines(fd, (handOver) => void (letGo = handOver))
          for (let i = 0; i < 100; i++) {
            out(`line ${i}`)
            yield* Effect.yieldNow()
          }
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          assert.strictEqual(fs.readFileSync(file, "utf8"), "", "nothing is written before the gather lets it go")
          letGo!()
        })
      ).pipe(Effect.ensuring(Effect.sync(() => (nodeFs.write = original))))
      fs.closeSync(fd)
      assert.strictEqual(fs.readFileSync(file, "utf8"), Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join(""))
      assert.strictEqual(writes, 1)
    }))

  const N = 20_000
  const line = (i: number) => `line ${i} ${"x".repeat(60)}`

  /** Runs test/support/logLinesProcess.ts ending `how`; its stdout and exit code. */
  const run = (how: "scope" | "exit" | "crash") =>
    Effect.async<{ readonly out: string; readonly code: number | null }>((resume) => {
      const p = spawn(process.execPath, ["--import", "tsx", path.resolve("test/support/logLinesProcess.ts"), how, String(N)], { stdio: ["ignore", "pipe", "ignore"] })
      let out = ""
      p.stdout.on("data", (d: Buffer) => (out += d.toString()))
      p.on("close", (code) => resume(Effect.succeed({ out, code })))
    })

  it.live("every line, in order, when the scope closes just before the process exits", () =>
    Effect.map(run("scope"), ({ code, out }) => {
      assert.strictEqual(code, 0)
      assert.strictEqual(out, Array.from({ length: N }, (_, i) => `${line(i)}\n`).join(""))
    }))

  for (const how of ["exit", "crash"] as const) {
    it.live(`the last lines when the process ${how === "exit" ? "exits" : "crashes"} with the scope open`, () =>
      Effect.map(run(how), ({ code, out }) => {
        assert.strictEqual(code, how === "exit" ? 0 : 1)
        // The lines waiting in the buffer are written on the way out, in order; the one write under way then (the
        // first line's, which the first line started) is the operating system's to finish, so it is not asserted.
        const rest = Array.from({ length: N - 1 }, (_, i) => `${line(i + 1)}\n`).join("")
        assert.strictEqual(out.replace(`${line(0)}\n`, ""), rest, out.slice(-200))
      }))
  }
})
