/**
 * Which OTEL_* settings turn tracing on, and with which exporters; `requestedByEnv` is what the `mesh` command reads
 * before deciding to load OpenTelemetry at all, so the two must agree.
 */
import { assert, describe, it } from "@effect/vitest"
import { exportersOf } from "../../src/http/Telemetry.js"
import { requestedByEnv } from "../../src/http/Tracing.js"

const settings = (exporters: ReadonlyArray<string>, endpoint = false, disabled = false) => ({ exporters, endpoint, disabled })

describe("tracing from the OTEL_* variables", () => {
  it("an OTLP endpoint alone means OTLP; OTEL_TRACES_EXPORTER names the exporters; none and OTEL_SDK_DISABLED turn it off", () => {
    assert.deepStrictEqual(exportersOf(settings([], true)), ["otlp"])
    assert.deepStrictEqual(exportersOf(settings([])), [])
    assert.deepStrictEqual(exportersOf(settings(["console"])), ["console"])
    assert.deepStrictEqual(exportersOf(settings(["otlp", "console"], true)), ["otlp", "console"])
    assert.deepStrictEqual(exportersOf(settings(["none"], true)), [])
    assert.deepStrictEqual(exportersOf(settings(["otlp"], true, true)), [])
    assert.deepStrictEqual(exportersOf(settings(["zipkin"])), [])
  })

  it("the command loads OpenTelemetry only when a variable asks for tracing", () => {
    assert.isFalse(requestedByEnv({}))
    assert.isTrue(requestedByEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }))
    assert.isTrue(requestedByEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" }))
    assert.isTrue(requestedByEnv({ OTEL_TRACES_EXPORTER: "console" }))
    assert.isFalse(requestedByEnv({ OTEL_TRACES_EXPORTER: "console", OTEL_SDK_DISABLED: "true" }))
  })
})
