/**
 * The Prometheus text the serving path renders: cumulative buckets, escaped label values, and Effect's own metrics
 * (counters, gauges, histograms) with their tags as labels.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import { RequestMetrics, renderRegistry } from "../../src/http/Metrics.js"

describe("the /metrics text", () => {
  it("request counters: one series per status, cumulative latency buckets, label values escaped", () => {
    const m = new RequestMetrics(() => 3)
    const s = m.route("GET", "/v1/a\"b\\c")
    s.record(200, 0.0005)
    s.record(200, 0.02)
    s.record(503, 20)
    const text = m.render()
    const labels = `method="GET",route="/v1/a\\"b\\\\c"`
    assert.include(text, `mesh_http_requests_total{${labels},status="200"} 2\n`)
    assert.include(text, `mesh_http_requests_total{${labels},status="503"} 1\n`)
    assert.include(text, `mesh_http_request_duration_seconds_bucket{${labels},le="0.001"} 1\n`)
    assert.include(text, `mesh_http_request_duration_seconds_bucket{${labels},le="0.025"} 2\n`)
    assert.include(text, `mesh_http_request_duration_seconds_bucket{${labels},le="10"} 2\n`)
    assert.include(text, `mesh_http_request_duration_seconds_bucket{${labels},le="+Inf"} 3\n`)
    assert.include(text, `mesh_http_request_duration_seconds_count{${labels}} 3\n`)
    assert.include(text, "mesh_http_requests_in_flight 3\n")
  })

  it.effect("Effect's metrics: a tagged counter, a gauge and a histogram, each with its TYPE line", () =>
    Effect.gen(function* () {
      const counter = Metric.counter("test_render_events_total", { description: "events\nseen" }).pipe(Metric.tagged("kind", "a\"b"))
      yield* Metric.incrementBy(counter, 2)
      yield* Metric.set(Metric.gauge("test_render_level"), 7)
      const histogram = Metric.histogram("test_render_seconds", MetricBoundaries.fromIterable([0.1, 1]))
      yield* Metric.update(histogram, 0.5)
      const text = renderRegistry()
      assert.include(text, "# HELP test_render_events_total events\\nseen\n# TYPE test_render_events_total counter\n")
      assert.include(text, `test_render_events_total{kind="a\\"b"} 2\n`)
      assert.include(text, "# TYPE test_render_level gauge\ntest_render_level 7\n")
      assert.include(text, "# TYPE test_render_seconds histogram\n")
      assert.include(text, `test_render_seconds_bucket{le="0.1"} 0\n`)
      assert.include(text, `test_render_seconds_bucket{le="1"} 1\n`)
      assert.include(text, `test_render_seconds_bucket{le="+Inf"} 1\n`)
      assert.include(text, "test_render_seconds_count 1\n")
    }))
})
