/**
 * OpenTelemetry for a hub or an agent, through `@effect/opentelemetry`: Effect's spans (the serving path's request
 * spans, agent calls, model calls, ledger operations) become OpenTelemetry spans, and `Tracing` is turned on so the
 * serving path makes them. `layerFromEnv` follows the standard `OTEL_*` variables: tracing is on when
 * `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER` is set (and
 * `OTEL_SDK_DISABLED` is not `true`); the exporter reads its endpoint, headers and timeout from them itself. Not
 * exported by `agent-mesh/http`, so that importing the serving path never loads OpenTelemetry; import
 * `agent-mesh/Telemetry`. docs/operations.md, "Traces".
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { VERSION } from "../core/Version.js"
import { Tracing } from "./Tracing.js"

/** How to trace. */
export interface TelemetryOptions {
  /** `service.name` of the spans (`OTEL_SERVICE_NAME` overrides it). */
  readonly serviceName: string
  /** Where spans go: a processor over an exporter (`BatchSpanProcessor` for OTLP, `SimpleSpanProcessor` in tests). */
  readonly spanProcessor: SpanProcessor | ReadonlyArray<SpanProcessor>
}

/** Tracing on, spans handed to `spanProcessor`. */
export const layer = (options: TelemetryOptions): Layer.Layer<never> =>
  Layer.merge(
    Layer.discard(NodeSdk.layer(() => ({ resource: { serviceName: options.serviceName, serviceVersion: VERSION }, spanProcessor: options.spanProcessor }))),
    Layer.succeed(Tracing, true)
  )

/** The settings of `layerFromEnv`, as read from the environment. */
export interface EnvSettings {
  readonly exporters: ReadonlyArray<string>
  readonly endpoint: boolean
  readonly disabled: boolean
}

const settings = Config.all({
  exporters: Config.option(Config.string("OTEL_TRACES_EXPORTER")),
  endpoint: Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")),
  tracesEndpoint: Config.option(Config.string("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  disabled: Config.withDefault(Config.string("OTEL_SDK_DISABLED"), "false")
}).pipe(
  Config.map(({ disabled, endpoint, exporters, tracesEndpoint }): EnvSettings => ({
    exporters: Option.match(exporters, { onNone: () => [], onSome: (s) => s.split(",").map((e) => e.trim().toLowerCase()).filter((e) => e.length > 0) }),
    endpoint: Option.isSome(endpoint) || Option.isSome(tracesEndpoint),
    disabled: disabled.trim().toLowerCase() === "true"
  }))
)

/** The exporters the settings ask for: `otlp` (the default once an endpoint is set) and `console`; `none` for none. */
export const exportersOf = (s: EnvSettings): ReadonlyArray<"otlp" | "console"> => {
  if (s.disabled) return []
  const named = s.exporters.length === 0 ? (s.endpoint ? ["otlp"] : []) : s.exporters
  if (named.includes("none")) return []
  return named.filter((e): e is "otlp" | "console" => e === "otlp" || e === "console")
}

const exporterOf = (name: "otlp" | "console"): SpanExporter => (name === "otlp" ? new OTLPTraceExporter() : new ConsoleSpanExporter())

/** Tracing as the `OTEL_*` variables say, spans batched to each exporter; nothing at all when they ask for none. */
export const layerFromEnv = (serviceName: string): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.map(Effect.orDie(settings), (s) => {
      const exporters = exportersOf(s)
      return exporters.length === 0 ? Layer.empty : layer({ serviceName, spanProcessor: exporters.map((e) => new BatchSpanProcessor(exporterOf(e))) })
    })
  )
