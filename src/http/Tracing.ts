/**
 * Request tracing, opt-in: whether the serving path opens a span per request (`Tracing`, off by default, turned on
 * by `Telemetry.layer`), the W3C `traceparent` header read and written, and `traced`, a span that costs one context
 * read when tracing is off. docs/operations.md, "Traces".
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { CorrelationId } from "./CorrelationId.js"

/** Whether spans are made: read once by the serving path at start, and by `traced` per call. Default false. */
export class Tracing extends Context.Reference<Tracing>()("agent-mesh/http/Tracing", { defaultValue: () => false }) {}

/** The W3C Trace Context header, lower case as node:http exposes request headers. */
export const HEADER = "traceparent"

// version-traceid-parentid-flags; a later version may append fields, which this reader ignores (W3C §4.3).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const ZERO_TRACE = "00000000000000000000000000000000"
const ZERO_SPAN = "0000000000000000"

/** The remote parent a `traceparent` names, or undefined when it is absent or not valid. */
export const fromTraceparent = (value: string | ReadonlyArray<string> | undefined): Tracer.ExternalSpan | undefined => {
  if (typeof value !== "string") return undefined
  const m = TRACEPARENT.exec(value.trim())
  if (m === null) return undefined
  const [, version, traceId, spanId, flags, rest] = m
  if (version === "ff" || (version === "00" && rest !== undefined) || traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined
  return Tracer.externalSpan({ traceId: traceId!, spanId: spanId!, sampled: (parseInt(flags!, 16) & 1) === 1 })
}

/** The `traceparent` naming `span` as the parent. */
export const toTraceparent = (span: Tracer.AnySpan): string => `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/**
 * The `traceparent` an outgoing call carries: the current span's while tracing, else the incoming request's as it
 * came (a hop that does not trace passes the caller's context on unchanged), else none.
 */
export const outgoing: Effect.Effect<string | undefined> = Effect.flatMap(Tracing, (on) =>
  on
    ? Effect.map(Effect.option(Effect.currentParentSpan), (span) => (Option.isSome(span) ? toTraceparent(span.value) : undefined))
    : Effect.map(Effect.serviceOption(HttpServerRequest.HttpServerRequest), (req) => {
      if (Option.isNone(req)) return undefined
      const value = req.value.headers[HEADER]
      return fromTraceparent(value) === undefined ? undefined : value
    })
)

/**
 * `outgoing` and the correlation id, read from a captured context without running an Effect (for values a handler
 * may never ask for): the parent span's traceparent while `tracing`, else the served request's, as it came.
 */
export const traceContextOf = (context: Context.Context<never>, tracing: boolean): { readonly correlationId?: string; readonly traceparent?: string } => {
  const get = <I, S>(tag: Context.Tag<I, S>): Option.Option<S> => Context.getOption(context as Context.Context<I>, tag)
  const cid = get(CorrelationId)
  let traceparent: string | undefined
  if (tracing) {
    const span = get(Tracer.ParentSpan)
    traceparent = Option.isSome(span) ? toTraceparent(span.value) : undefined
  } else {
    const req = get(HttpServerRequest.HttpServerRequest)
    const value = Option.isSome(req) ? req.value.headers[HEADER] : undefined
    traceparent = fromTraceparent(value) === undefined ? undefined : value
  }
  return { ...(Option.isSome(cid) ? { correlationId: cid.value } : {}), ...(traceparent === undefined ? {} : { traceparent }) }
}

/** `self` in a span named `name` while tracing is on; `self` itself otherwise. */
export const traced =
  (name: string, options?: { readonly attributes?: Record<string, unknown>; readonly kind?: Tracer.SpanKind }) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Tracing, (on) => (on ? Effect.withSpan(self, name, { kind: options?.kind ?? "internal", ...(options?.attributes === undefined ? {} : { attributes: options.attributes }) }) : self))

/** `self` in a span named `name`, from its start to its end, while tracing is on; `self` itself otherwise. */
export const tracedStream =
  (name: string, options?: { readonly attributes?: Record<string, unknown>; readonly kind?: Tracer.SpanKind }) =>
  <A, E, R>(self: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> =>
    Stream.unwrap(Effect.map(Tracing, (on) => (on ? Stream.withSpan(self, name, { kind: options?.kind ?? "internal", ...(options?.attributes === undefined ? {} : { attributes: options.attributes }) }) : self)))

/** Whether the environment asks for tracing at all (read without loading OpenTelemetry, for the `mesh` command). */
export const requestedByEnv = (env: Readonly<Record<string, string | undefined>>): boolean =>
  env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== "true" &&
  (env.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined || env.OTEL_TRACES_EXPORTER !== undefined)
