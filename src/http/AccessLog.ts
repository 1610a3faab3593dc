/**
 * The access log: one line per answered request (method, path, status, duration, correlation id, the caller's DID
 * when the auth found one, the trace id while tracing), written through the loggers of the server's runtime, so
 * `--log-format` shapes it like every other line. Off by default (`AccessLog`); `mesh hub` and `mesh agent` turn it
 * on. The line is handed to the loggers directly, without a fiber; a logger that can write it from the entry itself
 * (`Direct`: the pretty one) is given the entry, so the record's annotations are not built for it, and a logger that
 * would drop the line (the tracer's, with no span in the runtime) is not called. docs/operations.md, "Logs".
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as Runtime from "effect/Runtime"
import * as Tracer from "effect/Tracer"

/** Whether servers write an access log line per request; read once when a server starts. Default false. */
export class AccessLog extends Context.Reference<AccessLog>()("agent-mesh/http/AccessLog", { defaultValue: () => false }) {}

/** One access log line's fields. */
export interface Entry {
  readonly method: string
  readonly path: string
  readonly status: number
  readonly durationMs: number
  readonly correlationId: string
  readonly caller: string | undefined
  readonly traceId: string | undefined
}

/** The message of an access line; its fields are annotations too, for the formats that are read by programs. */
export const message = (method: string, path: string, status: number, durationMs: number): string => `${method} ${path} ${status} ${durationMs}ms`

/** The annotations an access line's message already says (`message`): the pretty format leaves them out. */
export const IN_MESSAGE = ["method", "path", "status", "durationMs"] as const

/** The annotations of an access line's record: the runtime's (`base`) and the entry's fields. */
export const annotationsOf = (base: HashMap.HashMap<string, unknown>, e: Entry): HashMap.HashMap<string, unknown> =>
  HashMap.mutate(base, (m) => {
    HashMap.set(m, "method", e.method)
    HashMap.set(m, "path", e.path)
    HashMap.set(m, "status", e.status)
    HashMap.set(m, "durationMs", e.durationMs)
    HashMap.set(m, "correlationId", e.correlationId)
    if (e.caller !== undefined) HashMap.set(m, "caller", e.caller)
    if (e.traceId !== undefined) HashMap.set(m, "traceId", e.traceId)
  })

/** Marks a logger that writes access lines from their entries (`Direct`). */
export const DirectTypeId: unique symbol = Symbol.for("agent-mesh/http/AccessLog/Direct")

/**
 * A logger that writes an access line from its entry, exactly as it would write the record `writer` makes of it:
 * given the runtime's log annotations once, it answers the function that writes one entry at a date.
 */
export interface Direct {
  readonly [DirectTypeId]: (base: HashMap.HashMap<string, unknown>) => (entry: Entry, date: Date) => void
}

const isDirect = <A>(u: A): u is A & Direct => typeof u === "object" && u !== null && DirectTypeId in u

/**
 * A writer of access lines through `runtime`'s loggers, at Info whatever the status (the Error line of a failure is
 * its cause's, written once elsewhere: FailureLog.ts), honouring its minimum log level and log annotations;
 * undefined when Info is below that level, so the serving path skips the work entirely.
 */
export const writer = (runtime: Runtime.Runtime<never>, now: () => number): ((entry: Entry) => void) | undefined => {
  const refs = runtime.fiberRefs
  const minimum = FiberRefs.getOrDefault(refs, FiberRef.currentMinimumLogLevel)
  if (LogLevel.lessThan(LogLevel.Info, minimum)) return undefined
  const base = FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations)
  // The tracer's logger adds a record to the current span: with none in the runtime, an access line is dropped there.
  const spanless = Option.isNone(Context.getOption(FiberRefs.getOrDefault(refs, FiberRef.currentContext), Tracer.ParentSpan))
  const loggers = HashSet.toValues(FiberRefs.getOrDefault(refs, FiberRef.currentLoggers)).filter((l) => !(spanless && l === Logger.tracerLogger))
  const direct = loggers.filter(isDirect).map((l) => l[DirectTypeId](base))
  const others = loggers.filter((l) => !isDirect(l))
  return (e) => {
    const date = new Date(now())
    for (const write of direct) write(e, date)
    if (others.length === 0) return
    const annotations = annotationsOf(base, e)
    const options = {
      fiberId: FiberId.none,
      logLevel: LogLevel.Info,
      message: message(e.method, e.path, e.status, e.durationMs),
      cause: Cause.empty,
      context: refs,
      spans: List.empty(),
      annotations,
      date
    }
    for (const logger of others) logger.log(options)
  }
}
