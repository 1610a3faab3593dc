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

/** The uncoloured pretty logger `mesh` prints through when its output is plain (NO_COLOR, or not a terminal). */
export const plainPrettyLogger = Logger.prettyLogger({ colors: false })

/**
 * The logger of a format, in place of the default one and of the pretty one `NodeRuntime.runMain` (or plain output) installs (other
 * loggers, such as the one recording log events on spans, stay); `pretty` is coloured only on a terminal and when
 * `NO_COLOR` is unset.
 */
export const loggerOf = (format: LogFormat, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> => {
  const chosen =
    format === "json"
      ? Logger.withConsoleLog(Logger.jsonLogger)
      : format === "logfmt"
        ? Logger.withConsoleLog(Logger.logfmtLogger)
        : Logger.prettyLogger({ colors: process.stdout.isTTY === true && (env.NO_COLOR ?? "") === "" })
  return Layer.scopedDiscard(
    Effect.locallyScopedWith(FiberRef.currentLoggers, (loggers) =>
      HashSet.add(HashSet.remove(HashSet.remove(HashSet.remove(loggers, Logger.defaultLogger), Logger.prettyLoggerDefault), plainPrettyLogger), chosen)
    )
  )
}

/** The loggers, the access log and, when the environment asks for it, tracing, for a serving command named `service`. */
export const layer = (service: string, format: LogFormat, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> =>
  Layer.mergeAll(
    loggerOf(format, env),
    Layer.succeed(AccessLog, true),
    requestedByEnv(env) ? Layer.unwrapEffect(Effect.map(Effect.promise(() => import("../http/Telemetry.js")), (t) => t.layerFromEnv(service))) : Layer.empty
  )
