/**
 * What `/metrics` shows, in the Prometheus text format (version 0.0.4): the requests a server answered, by route,
 * method and status, with a latency histogram and the requests in flight, kept by the serving path in plain
 * counters (a few additions per request, no allocation once a route has seen a status); then every metric of
 * Effect's registry in this process (ledger allocations, replays refused, runs in flight: `core/MeshMetrics.ts`).
 * docs/operations.md, "Metrics".
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"

/** Upper bounds (seconds) of the latency histogram's buckets. */
export const LATENCY_BUCKETS: ReadonlyArray<number> = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** The route label of a request that matched no route (refused before one was found). */
export const UNMATCHED = "unmatched"

/** The counters of one route and method. */
export class RouteStats {
  /** Count per status code. */
  readonly statuses = new Map<number, number>()
  /** Count per bucket (not cumulative), the last one +Inf. */
  readonly buckets = new Float64Array(LATENCY_BUCKETS.length + 1)
  sum = 0
  count = 0

  constructor(readonly method: string, readonly route: string) {}

  /** Counts one answered request. */
  record(status: number, seconds: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1)
    let i = 0
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++
    this.buckets[i]!++
    this.sum += seconds
    this.count++
  }
}

/** One server's request counters. */
export class RequestMetrics {
  private readonly routes = new Map<string, RouteStats>()

  /** `inFlight` reads the handlers running now. */
  constructor(private readonly inFlight: () => number) {}

  /** The counters of a route (made once, at start, by the serving path). */
  route(method: string, route: string): RouteStats {
    const key = `${method} ${route}`
    let stats = this.routes.get(key)
    if (stats === undefined) {
      stats = new RouteStats(method, route)
      this.routes.set(key, stats)
    }
    return stats
  }

  /** The request metrics in the text format. */
  render(): string {
    const out: Array<string> = []
    out.push("# HELP mesh_http_requests_total Requests answered, by route, method and status.")
    out.push("# TYPE mesh_http_requests_total counter")
    for (const s of this.routes.values()) {
      for (const [status, n] of s.statuses) out.push(`mesh_http_requests_total{method="${esc(s.method)}",route="${esc(s.route)}",status="${status}"} ${n}`)
    }
    out.push("# HELP mesh_http_request_duration_seconds Time from a request's arrival to its response head, by route and method.")
    out.push("# TYPE mesh_http_request_duration_seconds histogram")
    for (const s of this.routes.values()) {
      if (s.count === 0) continue
      const labels = `method="${esc(s.method)}",route="${esc(s.route)}"`
      let cumulative = 0
      LATENCY_BUCKETS.forEach((le, i) => {
        cumulative += s.buckets[i]!
        out.push(`mesh_http_request_duration_seconds_bucket{${labels},le="${le}"} ${cumulative}`)
      })
      out.push(`mesh_http_request_duration_seconds_bucket{${labels},le="+Inf"} ${s.count}`)
      out.push(`mesh_http_request_duration_seconds_sum{${labels}} ${s.sum}`)
      out.push(`mesh_http_request_duration_seconds_count{${labels}} ${s.count}`)
    }
    out.push("# HELP mesh_http_requests_in_flight Requests whose handler is running.")
    out.push("# TYPE mesh_http_requests_in_flight gauge")
    out.push(`mesh_http_requests_in_flight ${this.inFlight()}`)
    return out.join("\n") + "\n"
  }
}

/** The request counters of the server answering: provided by the serving path to the handlers it serves. */
export class ServedMetrics extends Context.Tag("agent-mesh/http/ServedMetrics")<ServedMetrics, RequestMetrics>() {}

/** The content type of the text format. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

// Label values escape backslash, double quote and line feed; HELP text backslash and line feed.
const esc = (s: string): string => s.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")
const escHelp = (s: string): string => s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")
const NAME = /[^a-zA-Z0-9_:]/g

const labelsOf = (pair: MetricPair.MetricPair.Untyped, extra?: string): string => {
  const parts = pair.metricKey.tags.map((t) => `${t.key.replace(NAME, "_")}="${esc(t.value)}"`)
  if (extra !== undefined) parts.push(extra)
  return parts.length === 0 ? "" : `{${parts.join(",")}}`
}

/** Every metric of Effect's registry in this process, counters, gauges and histograms, in the text format. */
export const renderRegistry = (): string => {
  const byName = new Map<string, Array<MetricPair.MetricPair.Untyped>>()
  for (const pair of Metric.unsafeSnapshot()) {
    const name = pair.metricKey.name.replace(NAME, "_")
    const list = byName.get(name) ?? []
    list.push(pair)
    byName.set(name, list)
  }
  const out: Array<string> = []
  for (const [name, pairs] of [...byName].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const first = pairs[0]!
    const state = first.metricState
    const type = MetricState.isCounterState(state) ? "counter" : MetricState.isGaugeState(state) ? "gauge" : MetricState.isHistogramState(state) ? "histogram" : undefined
    if (type === undefined) continue
    const help = first.metricKey.description
    if (help._tag === "Some") out.push(`# HELP ${name} ${escHelp(help.value)}`)
    out.push(`# TYPE ${name} ${type}`)
    for (const pair of pairs) {
      const s = pair.metricState
      if (MetricState.isCounterState(s)) out.push(`${name}${labelsOf(pair)} ${String(s.count)}`)
      else if (MetricState.isGaugeState(s)) out.push(`${name}${labelsOf(pair)} ${String(s.value)}`)
      else if (MetricState.isHistogramState(s)) {
        // Effect's histogram buckets are already cumulative counts per upper bound.
        for (const [le, n] of s.buckets) out.push(`${name}_bucket${labelsOf(pair, `le="${le === Infinity ? "+Inf" : le}"`)} ${n}`)
        if (!s.buckets.some(([le]) => le === Infinity)) out.push(`${name}_bucket${labelsOf(pair, "le=\"+Inf\"")} ${s.count}`)
        out.push(`${name}_sum${labelsOf(pair)} ${s.sum}`)
        out.push(`${name}_count${labelsOf(pair)} ${s.count}`)
      }
    }
  }
  return out.length === 0 ? "" : out.join("\n") + "\n"
}

/** The whole `/metrics` body: the server's requests, then the process's registry. */
export const render = (requests: RequestMetrics): string => requests.render() + renderRegistry()

/** The success schema of a `/metrics` endpoint. */
export const MetricsText = HttpApiSchema.Text({ contentType: CONTENT_TYPE })

/** The `/metrics` body of the server answering. */
export const served: Effect.Effect<string, never, ServedMetrics> = Effect.map(ServedMetrics, render)
