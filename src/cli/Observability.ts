/**
 * What `mesh hub` and `mesh agent` log and trace (docs/operations.md): the log format (`--log-format`), the access
 * log (a line per request, at Info, so `--log-level warning` silences it) and, when the `OTEL_*` variables ask for
 * it, OpenTelemetry, whose modules are loaded only then so a start without it costs nothing more.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { AccessLog } from "../http/AccessLog.js"
import { requestedByEnv } from "../http/Tracing.js"

/** The log formats `--log-format` offers. */
export const LOG_FORMATS = ["pretty", "json", "logfmt"] as const

/** How log lines are printed: `pretty` (the default: for a terminal), `json` (one object a line), `logfmt` (key=value). */
export type LogFormat = (typeof LOG_FORMATS)[number]

/**
 * The pretty loggers `mesh` prints log lines through, on stderr (stdout holds a command's result): uncoloured when
 * its output is plain (NO_COLOR, or stderr not a terminal), else coloured.
 */
export const plainPrettyLogger = Logger.prettyLogger({ colors: false, stderr: true })
/** The coloured one. */
export const colourPrettyLogger = Logger.prettyLogger({ colors: true, stderr: true })

/**
 * The logger of a format, on stderr, in place of the default one and of the pretty one `NodeRuntime.runMain` (or
 * `mesh`'s output) installs (other loggers, such as the one recording log events on spans, stay); `pretty` is coloured
 * only on a terminal and when `NO_COLOR` is unset.
 */
export const loggerOf = (format: LogFormat, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> => {
  const chosen =
    format === "json"
      ? Logger.withConsoleError(Logger.jsonLogger)
      : format === "logfmt"
        ? Logger.withConsoleError(Logger.logfmtLogger)
        : process.stderr.isTTY === true && (env.NO_COLOR ?? "") === "" ? colourPrettyLogger : plainPrettyLogger
  const replaced = [Logger.defaultLogger, Logger.prettyLoggerDefault, plainPrettyLogger, colourPrettyLogger]
  return Layer.scopedDiscard(
    Effect.locallyScopedWith(FiberRef.currentLoggers, (loggers) => HashSet.add(replaced.reduce((set, l) => HashSet.remove(set, l), loggers), chosen))
  )
}

/** The loggers, the access log and, when the environment asks for it, tracing, for a serving command named `service`. */
export const layer = (service: string, format: LogFormat, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> =>
  Layer.mergeAll(
    loggerOf(format, env),
    Layer.succeed(AccessLog, true),
    requestedByEnv(env) ? Layer.unwrapEffect(Effect.map(Effect.promise(() => import("../http/Telemetry.js")), (t) => t.layerFromEnv(service))) : Layer.empty
  )
