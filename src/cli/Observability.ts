/**
 * What `mesh hub` and `mesh agent` log and trace (docs/operations.md): the log format (`--log-format`), the access
 * log (a line per request, at Info, so `--log-level warning` silences it) and, when the `OTEL_*` variables ask for
 * it, OpenTelemetry, whose modules are loaded only then so a start without it costs nothing more.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { AccessLog } from "../http/AccessLog.js"
import { requestedByEnv } from "../http/Tracing.js"

/** The log formats `--log-format` offers. */
export const LOG_FORMATS = ["logfmt", "json", "pretty"] as const

/** How log lines are printed: `logfmt` (key=value, the default), `json` (one object a line), `pretty` (for a terminal). */
export type LogFormat = (typeof LOG_FORMATS)[number]

/** The logger of a format; `pretty` is coloured only on a terminal and when `NO_COLOR` is unset. */
export const loggerOf = (format: LogFormat, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> =>
  format === "json"
    ? Logger.json
    : format === "pretty"
      ? Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ colors: process.stdout.isTTY === true && (env.NO_COLOR ?? "") === "" }))
      : Logger.logFmt

/** The loggers, the access log and, when the environment asks for it, tracing, for a serving command named `service`. */
export const layer = (service: string, format: LogFormat, env: Readonly<Record<string, string | undefined>> = process.env): Layer.Layer<never> =>
  Layer.mergeAll(
    loggerOf(format, env),
    Layer.succeed(AccessLog, true),
    requestedByEnv(env) ? Layer.unwrapEffect(Effect.map(Effect.promise(() => import("../http/Telemetry.js")), (t) => t.layerFromEnv(service))) : Layer.empty
  )
