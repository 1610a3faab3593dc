/**
 * Where `mesh hub` and `mesh agent` print their log lines, and the one-line pretty format. Lines go to stderr through
 * a buffered, non-blocking writer (sonic-boom, pino's): a line costs a string append, and the writes are batched off
 * the event loop, so an access line per request does not stall serving. Nothing written is lost: the scope's end (the
 * graceful stop after SIGTERM/SIGINT, or a failure) waits for every line to be written, and an exit that skips it
 * (`process.exit`, an uncaught exception) writes what is left synchronously. docs/operations.md, "Logs".
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Inspectable from "effect/Inspectable"
import type * as Logger from "effect/Logger"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import SonicBoomModule from "sonic-boom"
import * as AccessLog from "../http/AccessLog.js"

/** Where a log line goes: one call per line, given without its newline. */
export type LineOut = (line: string) => void

const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`)
const clock = (d: Date): string => {
  const ms = d.getMilliseconds()
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}.${ms < 10 ? `00${ms}` : ms < 100 ? `0${ms}` : ms}`
}

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

/**
 * The pretty format: one line per record, `10:51:57.607 INFO  <message> key=value …` — the time, the level, the
 * message, the log spans and annotations as `key=value` (quoted as JSON strings when they hold spaces, quotes or
 * control characters; an access line's method, path, status and duration are in its message, so not repeated), and a
 * failure's cause last as `cause="…"`. Coloured (dim time and keys, coloured level) only
 * when `colours`.
 */
export const prettyLine = (colours: boolean) => {
  const paint = colours ? (code: string, s: string) => `\x1b[${code}m${s}\x1b[0m` : (_code: string, s: string) => s
  const field = (key: string, value: string) => ` ${paint("2", `${key}=`)}${BARE.test(value) ? value : JSON.stringify(value)}`
  return ({ annotations, cause, date, logLevel, message, spans }: Logger.Logger.Options<unknown>): string => {
    let out = `${paint("2", clock(date))} ${paint(LEVEL_COLOURS[logLevel._tag], logLevel.label.padEnd(5))}`
    const parts = Array.isArray(message) ? message : [message]
    let text = ""
    for (const part of parts) {
      const s = Inspectable.toStringUnknown(part, 0)
      if (s !== "") text = text === "" ? s : `${text} ${s}`
    }
    if (text !== "") out += ` ${paint("1", text.replace(CONTROL, escapeControl))}`
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
 * The file descriptor `fd` through a buffered, non-blocking writer for the life of the scope. Lines are handed to the writer at once
 * and written in batches while a write is under way; closing the scope waits until all are written. A process that
 * exits without closing it writes the rest synchronously on its way out. An output that fails (closed) stops the log,
 * not the process.
 */
export const fdLines = (fd: number): Effect.Effect<LineOut, never, Scope.Scope> => Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => {
      // CommonJS: the default export is the constructor, which also carries itself as `SonicBoom` (typed so).
      const boom = new SonicBoomModule.SonicBoom({ fd })
      const state = { broken: false }
      boom.on("error", () => void (state.broken = true))
      const onExit = () => {
        if (state.broken) return
        try {
          boom.flushSync()
        } catch {
          // On the way out with the output gone: nothing is left to tell.
        }
      }
      process.once("exit", onExit)
      const out: LineOut = (line) => {
        if (!state.broken) boom.write(`${line}\n`)
      }
      return { boom, state, onExit, out }
    }),
    ({ boom, onExit, state }) =>
      Effect.async<void>((resume) => {
        if (state.broken) return resume(Effect.void)
        boom.flush(() => resume(Effect.void))
      }).pipe(Effect.ensuring(Effect.sync(() => process.removeListener("exit", onExit))))
  ),
  ({ out }) => out
)

/** Stderr, where log lines and notes go (stdout holds a command's result), through the buffered writer. */
export const stderrLines: Effect.Effect<LineOut, never, Scope.Scope> = fdLines(2)
