/**
 * What `mesh hub` and `mesh agent` log and trace (docs/operations.md): the log format (`--log-format`), each record
 * one line on stderr, written through a buffered non-blocking writer (LogOutput.ts) with the command's own notes, so
 * they stay in order; the access log (a line per request, at Info, so `--log-level warning`
 * silences it); and, when the `OTEL_*` variables ask for it, OpenTelemetry, whose modules are loaded only then so a
 * start without it costs nothing more.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as AccessLog from "../http/AccessLog.js"
import { requestedByEnv } from "../http/Tracing.js"
import { type LineOut, prettyAccessLine, prettyLine, stderrLines } from "./LogOutput.js"

/** The log formats `--log-format` offers. */
export const LOG_FORMATS = ["pretty", "json", "logfmt"] as const

/** How log lines are printed: `pretty` (the default: for a terminal), `json` (one object a line), `logfmt` (key=value). */
export type LogFormat = (typeof LOG_FORMATS)[number]

/** The one-line pretty logger, uncoloured, on stderr: what `mesh` prints log lines through when its output is plain (NO_COLOR, or not a terminal). */
export const plainPrettyLogger = Logger.withConsoleError(Logger.make(prettyLine(false)))

/** The one-line pretty logger, coloured, on stderr: what `mesh` prints log lines through on a terminal. */
export const colourPrettyLogger = Logger.withConsoleError(Logger.make(prettyLine(true)))

/** Whether the pretty format is coloured: stderr, where log lines go, is a terminal and `NO_COLOR` is unset. */
const coloured = (env: Readonly<Record<string, string | undefined>>) => process.stderr.isTTY === true && (env.NO_COLOR ?? "") === ""

/**
 * The logger of a format writing each record as one line to `out`, in place of the default one and of the pretty
 * ones `NodeRuntime.runMain` and `mesh` install (other loggers, such as the one recording log events on spans, stay);
 * `pretty` is coloured only on a terminal and when `NO_COLOR` is unset.
 */
export const loggerOf = (format: LogFormat, out: LineOut, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> => {
  const colours = coloured(env)
  const line: (options: Logger.Logger.Options<unknown>) => string =
    format === "json" ? (o) => Logger.jsonLogger.log(o) : format === "logfmt" ? (o) => Logger.logfmtLogger.log(o) : prettyLine(colours)
  const logger = Logger.make((options) => out(line(options)))
  // The pretty logger writes access lines from their entries (AccessLog.Direct): the same text, without a record.
  const direct: AccessLog.Direct = {
    [AccessLog.DirectTypeId]: (base) => {
      const accessLine = prettyAccessLine(colours, base)
      return (entry, date) => out(accessLine(entry, date))
    }
  }
  const chosen = format === "pretty" ? Object.assign(logger, direct) : logger
  const replaced = [Logger.defaultLogger, Logger.prettyLoggerDefault, plainPrettyLogger, colourPrettyLogger]
  return Layer.scopedDiscard(
    Effect.locallyScopedWith(FiberRef.currentLoggers, (loggers) => HashSet.add(replaced.reduce((set, l) => HashSet.remove(set, l), loggers), chosen))
  )
}

/** The console with its `error` (stderr: the command's notes) writing to `out` too, so the notes keep their place among the log lines. */
const consoleTo = (out: LineOut): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Console.consoleWith((base) => {
      const error = (...args: ReadonlyArray<unknown>) => out(args.map(String).join(" "))
      return Effect.succeed(Console.setConsole({ ...base, error: (...args) => Effect.sync(() => error(...args)), unsafe: { ...base.unsafe, error } }))
    })
  )

/**
 * The loggers, the access log and, when the environment asks for it, tracing, for a serving command named `service`.
 * Log lines and the console's `error` lines (notes) go to stderr through the buffered writer, flushed when the layer
 * is released, unless `out` is given; stdout (the banner) is left as it is.
 */
export const layer = (
  service: string,
  format: LogFormat,
  env: Readonly<Record<string, string | undefined>> = process.env,
  out?: LineOut
): Layer.Layer<never> =>
  Layer.unwrapScoped(
    Effect.map(out === undefined ? stderrLines : Effect.succeed(out), (to) =>
      Layer.mergeAll(
        loggerOf(format, to, env),
        consoleTo(to),
        Layer.succeed(AccessLog.AccessLog, true),
        requestedByEnv(env) ? Layer.unwrapEffect(Effect.map(Effect.promise(() => import("../http/Telemetry.js")), (t) => t.layerFromEnv(service))) : Layer.empty
      ))
  )
