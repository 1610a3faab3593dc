/**
 * The access log: one line per answered request (method, path, status, duration, correlation id, the caller's DID
 * when the auth found one, the trace id while tracing), written through the loggers of the server's runtime, so
 * `--log-format` shapes it like every other line. Off by default (`AccessLog`); `mesh hub` and `mesh agent` turn it
 * on. The line is handed to the loggers directly, without a fiber. docs/operations.md, "Logs".
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
import * as LogLevel from "effect/LogLevel"
import type * as Runtime from "effect/Runtime"

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

/**
 * A writer of access lines through `runtime`'s loggers, at Info whatever the status (the Error line of a failure is
 * its cause's, written once elsewhere: FailureLog.ts), honouring its minimum log level and log annotations;
 * undefined when Info is below that level, so the serving path skips the work entirely.
 */
export const writer = (runtime: Runtime.Runtime<never>, now: () => number): ((entry: Entry) => void) | undefined => {
  const refs = runtime.fiberRefs
  const minimum = FiberRefs.getOrDefault(refs, FiberRef.currentMinimumLogLevel)
  if (LogLevel.lessThan(LogLevel.Info, minimum)) return undefined
  const loggers = HashSet.toValues(FiberRefs.getOrDefault(refs, FiberRef.currentLoggers))
  const base = FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations)
  return (e) => {
    let annotations = HashMap.set(base, "method", e.method as unknown)
    annotations = HashMap.set(annotations, "path", e.path)
    annotations = HashMap.set(annotations, "status", e.status)
    annotations = HashMap.set(annotations, "durationMs", e.durationMs)
    annotations = HashMap.set(annotations, "correlationId", e.correlationId)
    if (e.caller !== undefined) annotations = HashMap.set(annotations, "caller", e.caller)
    if (e.traceId !== undefined) annotations = HashMap.set(annotations, "traceId", e.traceId)
    const options = {
      fiberId: FiberId.none,
      logLevel: LogLevel.Info,
      message: message(e.method, e.path, e.status, e.durationMs),
      cause: Cause.empty,
      context: refs,
      spans: List.empty(),
      annotations,
      date: new Date(now())
    }
    for (const logger of loggers) logger.log(options)
  }
}
