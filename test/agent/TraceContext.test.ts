/**
 * One user request followed across agents: agent A's handler calls agent B (mesh-sig) through `AgentClient`; the
 * correlation id and a W3C traceparent travel on the call, signed, and with tracing on the exported spans form one
 * trace whose B server span descends from A's. With tracing off the caller's traceparent is passed on unchanged.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Http from "node:http"
import type * as Net from "node:net"
import { parseDictionary } from "structured-headers"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid, type MeshIdentity } from "../../src/core/Did.js"
import * as Telemetry from "../../src/http/Telemetry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as AgentPromise from "../../src/promise/AgentPromise.js"
import { post } from "./support.js"

const keyring = (ids: ReadonlyArray<MeshIdentity>) => (did: string) => ids.find((i) => i.did === did)?.publicKey ?? null

/** A handler that calls `target` as `as` and answers with the reply. */
const relay = (target: () => string, as: MeshIdentity): AgentServer.Handler => () =>
  AgentClient.callAgent(target(), "ping", { signAs: { did: as.did, privateKey: as.privateKey } }).pipe(
    Effect.map((r) => ("message" in r ? `relayed: ${r.message}` : "paused")),
    Effect.provide(AgentClient.layer().pipe(Layer.provide(Layer.merge(FetchHttpClient.layer, KeysNative.layer))))
  )

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
const CALLER_TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`

const serverSpans = (spans: ReadonlyArray<ReadableSpan>, name: string) => spans.filter((s) => s.name === name && s.kind === 1)

describe("trace context across agents", () => {
  it.live("with tracing on, one request through A and B is one trace: B's server span descends from A's, both carry the correlation id", () => {
    const exporter = new InMemorySpanExporter()
    const telemetry = Telemetry.layer({ serviceName: "trace-test", spanProcessor: new SimpleSpanProcessor(exporter) })
    return Effect.gen(function* () {
      const a = yield* generateDid("tracer-a")
      const b = yield* generateDid("tracer-b")
      const agentB = yield* AgentServer.make({
        name: "tracer-b", did: b.did, privateKey: b.privateKey, database: ":memory:", auth: "mesh-sig", resolveCallerKey: keyring([a]),
        handler: ({ message }) => `pong to ${message}`
      })
      const agentA = yield* AgentServer.make({
        name: "tracer-a", did: a.did, privateKey: a.privateKey, database: ":memory:", handler: relay(() => agentB.url, a)
      })
      const res = yield* post(`${agentA.url}/v1/run`, { message: "hello" }, { "x-correlation-id": "trace-cid-1", traceparent: CALLER_TRACEPARENT })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.strictEqual(res.body.message, "relayed: pong to ping")

      const spans = exporter.getFinishedSpans()
      const [serverA, serverB] = serverSpans(spans, "POST /v1/run").sort((x, y) => (x.startTime[0] - y.startTime[0]) || (x.startTime[1] - y.startTime[1]))
      assert.isDefined(serverA)
      assert.isDefined(serverB)
      // One trace, the caller's: A continued the traceparent it was sent, B the one A sent.
      assert.strictEqual(serverA!.spanContext().traceId, TRACE_ID)
      assert.strictEqual(serverB!.spanContext().traceId, TRACE_ID)
      assert.strictEqual(serverA!.parentSpanContext?.spanId, "00f067aa0ba902b7")
      // B's parent is A's agent.call span, itself under A's server span.
      const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
      const call = byId.get(serverB!.parentSpanContext!.spanId)
      assert.strictEqual(call?.name, "agent.call")
      let up: ReadableSpan | undefined = call
      while (up !== undefined && up !== serverA) up = up.parentSpanContext === undefined ? undefined : byId.get(up.parentSpanContext.spanId)
      assert.strictEqual(up, serverA, "B's server span does not descend from A's")
      assert.strictEqual(serverA!.attributes["mesh.correlation_id"], "trace-cid-1")
      assert.strictEqual(serverB!.attributes["mesh.correlation_id"], "trace-cid-1")
      assert.strictEqual(serverB!.attributes["http.response.status_code"], 200)
      assert.isTrue(spans.some((s) => s.name === "agent.handler"))
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(telemetry, KeysNative.layer)))
  })

  it.live("with tracing off, an agent passes the caller's correlation id and traceparent on unchanged, covered by its mesh-sig signature", () =>
    Effect.gen(function* () {
      const a = yield* generateDid("relay-a")
      // A stand-in for agent B that records what it received.
      const seen: Array<Http.IncomingHttpHeaders> = []
      const fake = Http.createServer((req, res) => {
        seen.push(req.headers)
        req.resume()
        req.on("end", () => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ message: "ok", sessionId: "s" }))
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void fake.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.async<void>((resume) => void fake.close(() => resume(Effect.void)))
      )
      const fakeUrl = `http://127.0.0.1:${(fake.address() as Net.AddressInfo).port}`
      const agentA = yield* AgentServer.make({ name: "relay-a", did: a.did, privateKey: a.privateKey, database: ":memory:", handler: relay(() => fakeUrl, a) })
      const res = yield* post(`${agentA.url}/v1/run`, { message: "hello" }, { "x-correlation-id": "relay-cid-7", traceparent: CALLER_TRACEPARENT })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.strictEqual(seen.length, 1)
      const headers = seen[0]!
      assert.strictEqual(headers["x-correlation-id"], "relay-cid-7")
      assert.strictEqual(headers["traceparent"], CALLER_TRACEPARENT)
      const input = parseDictionary(String(headers["signature-input"]))
      const covered = (input.get("sig1") as [Array<[string, unknown]>, unknown])[0].map(([name]) => name)
      assert.deepStrictEqual(covered, ["@method", "@target-uri", "content-digest", "x-correlation-id", "traceparent"])
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer))
  )

  it.live("a request without a correlation id gets one, and the call to the next agent carries that same id", () =>
    Effect.gen(function* () {
      const a = yield* generateDid("fresh-a")
      const seen: Array<Http.IncomingHttpHeaders> = []
      const fake = Http.createServer((req, res) => {
        seen.push(req.headers)
        req.resume()
        req.on("end", () => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ message: "ok", sessionId: "s" }))
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void fake.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.async<void>((resume) => void fake.close(() => resume(Effect.void)))
      )
      const fakeUrl = `http://127.0.0.1:${(fake.address() as Net.AddressInfo).port}`
      const agentA = yield* AgentServer.make({ name: "fresh-a", did: a.did, privateKey: a.privateKey, database: ":memory:", handler: relay(() => fakeUrl, a) })
      const res = yield* post(`${agentA.url}/v1/run`, { message: "hello" })
      assert.strictEqual(res.status, 200)
      const cid = res.headers.get("x-correlation-id")
      assert.isString(cid)
      assert.strictEqual(seen[0]!["x-correlation-id"], cid)
      // No traceparent came in and none is made while tracing is off.
      assert.isUndefined(seen[0]!["traceparent"])
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer))
  )

  it.live("a Promise handler passes the trace context on with `input.trace` in its call options", () =>
    Effect.gen(function* () {
      const seen: Array<Http.IncomingHttpHeaders> = []
      const fake = Http.createServer((req, res) => {
        seen.push(req.headers)
        req.resume()
        req.on("end", () => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ message: "ok", sessionId: "s" }))
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void fake.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.async<void>((resume) => void fake.close(() => resume(Effect.void)))
      )
      const fakeUrl = `http://127.0.0.1:${(fake.address() as Net.AddressInfo).port}`
      const agentA = yield* AgentServer.make({
        name: "promise-a", database: ":memory:",
        handler: async (input) => {
          const reply = await AgentPromise.callAgent(fakeUrl, "ping", { ...input.trace })
          return "message" in reply ? reply.message : "paused"
        }
      })
      const res = yield* post(`${agentA.url}/v1/run`, { message: "hello" }, { "x-correlation-id": "promise-cid-3", traceparent: CALLER_TRACEPARENT })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.strictEqual(seen[0]!["x-correlation-id"], "promise-cid-3")
      assert.strictEqual(seen[0]!["traceparent"], CALLER_TRACEPARENT)
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer))
  )
})
