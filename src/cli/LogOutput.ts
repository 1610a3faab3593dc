/**
 * Where `mesh hub` and `mesh agent` print their log lines, and the one-line pretty format. Lines go to stderr through
 * a buffered, non-blocking writer (sonic-boom, pino's): a line costs a string append, and the lines of a few
 * milliseconds go out in one write, so an access line per request does not cost a write per request. Nothing written
 * is lost but by a process killed outright: the scope's end (the graceful stop after SIGTERM/SIGINT, or a failure)
 * waits for every line to be written, and an exit that skips it (`process.exit`, an uncaught exception) writes what
 * is left synchronously. docs/operations.md, "Logs".
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Inspectable from "effect/Inspectable"
import type * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import SonicBoomModule from "sonic-boom"
import * as AccessLog from "../http/AccessLog.js"

/** How long a line may wait for others to go out with it, and how much may gather before it goes at once. */
const GATHER_MS = 10
const GATHER_BYTES = 64 * 1024

/** Calls `handOver` once the lines gathered so far may go: by default `GATHER_MS` later (a timer that keeps no process alive). */
export type Gather = (handOver: () => void) => void

const gatherFor = (ms: number): Gather => (handOver) => void setTimeout(handOver, ms).unref()

/** Where a log line goes: one call per line, given without its newline. */
export type LineOut = (line: string) => void

const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`)

const LEVEL_COLOURS: Record<LogLevel.LogLevel["_tag"], string> = {
  All: "0", None: "0", Trace: "90", Debug: "34", Info: "32", Warning: "33", Error: "31", Fatal: "1;31"
}

// A value printed bare only when it cannot be misread: printable ASCII without space, quote, `=` or backslash.
const BARE = /^[!#-<>-[\]-~]+$/
// Control characters, which would break the line or drive the terminal.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/g
const escapeControl = (c: string): string =>
  c === "\n" ? "\\n" : c === "\r" ? "\\r" : c === "\t" ? "\\t" : `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`

const ACCESS_FIELDS: ReadonlyArray<string> = AccessLog.IN_MESSAGE

/** Whether `text` is the access line message of the record's own method, path, status and duration. */
const isAccessLine = (annotations: HashMap.HashMap<string, unknown>, text: string): boolean => {
  const method = HashMap.get(annotations, "method")
  const path = HashMap.get(annotations, "path")
  const status = HashMap.get(annotations, "status")
  const durationMs = HashMap.get(annotations, "durationMs")
  return Option.isSome(method) && Option.isSome(path) && Option.isSome(status) && Option.isSome(durationMs) &&
    text === AccessLog.message(String(method.value), String(path.value), Number(status.value), Number(durationMs.value))
}

// The time and level of a line, and its fields, coloured only when asked.
const painter = (colours: boolean) => {
  const paint = colours ? (code: string, s: string) => `\x1b[${code}m${s}\x1b[0m` : (_code: string, s: string) => s
  const field = (key: string, value: string) => ` ${paint("2", `${key}=`)}${BARE.test(value) ? value : JSON.stringify(value)}`
  // The time as text, its hours, minutes and seconds made once a second.
  let second = Number.NaN
  let secondText = ""
  const time = (d: Date): string => {
    const at = Math.floor(d.getTime() / 1000)
    if (at !== second) {
      second = at
      secondText = `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}.`
    }
    const ms = d.getMilliseconds()
    return paint("2", `${secondText}${ms < 10 ? `00${ms}` : ms < 100 ? `0${ms}` : ms}`)
  }
  const level = (l: LogLevel.LogLevel) => paint(LEVEL_COLOURS[l._tag], l.label.padEnd(5))
  const message = (text: string) => ` ${paint("1", text.replace(CONTROL, escapeControl))}`
  return { field, time, level, message }
}

/**
 * The pretty format: one line per record, `10:51:57.607 INFO  <message> key=value …` — the time, the level, the
 * message, the log spans and annotations as `key=value` (quoted as JSON strings when they hold spaces, quotes or
 * control characters; an access line's method, path, status and duration are in its message, so not repeated), and a
 * failure's cause last as `cause="…"`. Coloured (dim time and keys, coloured level) only
 * when `colours`.
 */
export const prettyLine = (colours: boolean) => {
  const { field, level, message, time } = painter(colours)
  return ({ annotations, cause, date, logLevel, message: parts, spans }: Logger.Logger.Options<unknown>): string => {
    let out = `${time(date)} ${level(logLevel)}`
    let text = ""
    for (const part of Array.isArray(parts) ? parts : [parts]) {
      const s = Inspectable.toStringUnknown(part, 0)
      if (s !== "") text = text === "" ? s : `${text} ${s}`
    }
    if (text !== "") out += message(text)
    const now = date.getTime()
    for (const span of spans) out += field(span.label, `${now - span.startTime}ms`)
    const access = isAccessLine(annotations, text)
    for (const [key, value] of annotations) {
      if (!access || !ACCESS_FIELDS.includes(key)) out += field(key, Inspectable.toStringUnknown(value, 0))
    }
    if (!Cause.isEmpty(cause)) out += field("cause", Cause.pretty(cause, { renderErrorCause: true }))
    return out
  }
}

/**
 * The pretty line of an access entry, made from the entry: the same text `prettyLine` makes of the record
 * `AccessLog.writer` builds for it over the runtime's annotations `base`, without building that record. The
 * annotations keep the order the record's would iterate in (worked out once for each set of keys present); the
 * runtime's are formatted once.
 */
export const prettyAccessLine = (colours: boolean, base: HashMap.HashMap<string, unknown>): ((entry: AccessLog.Entry, date: Date) => string) => {
  const { field, level, message, time } = painter(colours)
  const info = ` ${level(LogLevel.Info)}`
  const fixed = new Map<string, string>()
  for (const [key, value] of base) fixed.set(key, field(key, Inspectable.toStringUnknown(value, 0)))
  const orders: Array<ReadonlyArray<string> | undefined> = [undefined, undefined, undefined, undefined]
  const orderOf = (e: AccessLog.Entry): ReadonlyArray<string> => {
    const i = (e.caller === undefined ? 0 : 1) + (e.traceId === undefined ? 0 : 2)
    return (orders[i] ??= [...HashMap.keys(AccessLog.annotationsOf(base, e))].filter((key) => !ACCESS_FIELDS.includes(key)))
  }
  return (e, date) => {
    let out = `${time(date)}${info}${message(AccessLog.message(e.method, e.path, e.status, e.durationMs))}`
    for (const key of orderOf(e)) {
      const value = key === "correlationId" ? e.correlationId : key === "caller" ? e.caller : key === "traceId" ? e.traceId : undefined
      out += value === undefined ? fixed.get(key)! : field(key, value)
    }
    return out
  }
}

/**
 * The file descriptor `fd` through a buffered, non-blocking writer for the life of the scope. Lines are gathered for
 * up to `GATHER_MS` (or until 64 KiB have gathered) and handed to the writer together, which writes them in batches
 * while a write is under way: under load a write carries a few hundred lines, not a turn's few (a write costs the
 * thread pool a hand-off and a wake-up, on the core serving requests). Closing the scope waits until all are written.
 * A process that exits without closing it writes the rest synchronously on its way out; only a process killed
 * outright (SIGKILL) loses what gathered in its last `GATHER_MS`. An output that fails (closed) stops the log, not the
 * process. `gather` replaces the timer (tests).
 */
export const fdLines = (fd: number, gather: Gather = gatherFor(GATHER_MS)): Effect.Effect<LineOut, never, Scope.Scope> => Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => {
      // CommonJS: the default export is the constructor, which also carries itself as `SonicBoom` (typed so).
      const boom = new SonicBoomModule.SonicBoom({ fd })
      const state = { broken: false, gathered: "", scheduled: false }
      boom.on("error", () => void (state.broken = true))
      const handOver = () => {
        state.scheduled = false
        if (state.gathered !== "" && !state.broken) boom.write(state.gathered)
        state.gathered = ""
      }
      const onExit = () => {
        if (state.broken) return
        try {
          handOver()
          boom.flushSync()
        } catch {
          // On the way out with the output gone: nothing is left to tell.
        }
      }
      process.once("exit", onExit)
      const out: LineOut = (line) => {
        if (state.broken) return
        state.gathered += `${line}\n`
        if (state.gathered.length >= GATHER_BYTES) return handOver()
        if (!state.scheduled) {
          state.scheduled = true
          gather(handOver)
        }
      }
      return { boom, state, handOver, onExit, out }
    }),
    ({ boom, handOver, onExit, state }) =>
      Effect.async<void>((resume) => {
        handOver()
        if (state.broken) return resume(Effect.void)
        boom.flush(() => resume(Effect.void))
      }).pipe(Effect.ensuring(Effect.sync(() => process.removeListener("exit", onExit))))
  ),
  ({ out }) => out
)

/** Stderr, where log lines and notes go (stdout holds a command's result), through the buffered writer. */
export const stderrLines: Effect.Effect<LineOut, never, Scope.Scope> = fdLines(2)
