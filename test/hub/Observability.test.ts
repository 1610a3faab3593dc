/**
 * The hub's probes and metrics: `/health` (liveness), `/ready` (the database answers, else 503), and `/metrics` in
 * the Prometheus text format with requests by route and status, the latency histogram and ledger allocations.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { generateDid } from "../../src/core/Did.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import * as Hub from "../../src/hub/Hub.js"
import { HubApi } from "../../src/hub/HubApi.js"
import { HandlersLive } from "../../src/hub/HubHttp.js"
import * as Registry from "../../src/hub/Registry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, request, startHub, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** The `/metrics` text, its content type, and one sample's value (0 when absent). */
const scrape = (url: string) =>
  Effect.promise(async () => {
    const res = await fetch(`${url}/metrics`)
    const text = await res.text()
    const sample = (series: string): number => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `))
      return line === undefined ? 0 : Number(line.slice(series.length + 1))
    }
    return { status: res.status, type: res.headers.get("content-type"), text, sample }
  })

describe("hub observability", () => {
  it.live("/health and /ready answer 200; /metrics counts requests by route and status with a latency histogram", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub()
        assert.deepStrictEqual((yield* request(`${hub.url}/health`, "GET")).body, { status: "ok" })
        const ready = yield* request(`${hub.url}/ready`, "GET")
        assert.strictEqual(ready.status, 200)
        assert.deepStrictEqual(ready.body, { status: "ready" })
        yield* request(`${hub.url}/health`, "GET")
        assert.strictEqual((yield* request(`${hub.url}/nowhere`, "GET")).status, 404)
        assert.strictEqual((yield* request(`${hub.url}/v1/agents/nobody`, "GET")).status, 404)

        const m = yield* scrape(hub.url)
        assert.strictEqual(m.status, 200)
        assert.match(m.type ?? "", /^text\/plain; version=0\.0\.4/)
        assert.include(m.text, "# TYPE mesh_http_requests_total counter")
        assert.strictEqual(m.sample(`mesh_http_requests_total{method="GET",route="/health",status="200"}`), 2)
        assert.strictEqual(m.sample(`mesh_http_requests_total{method="GET",route="/ready",status="200"}`), 1)
        assert.strictEqual(m.sample(`mesh_http_requests_total{method="*",route="unmatched",status="404"}`), 1)
        assert.strictEqual(m.sample(`mesh_http_requests_total{method="GET",route="/v1/agents/:didHash",status="404"}`), 1)
        assert.strictEqual(m.sample(`mesh_http_request_duration_seconds_count{method="GET",route="/health"}`), 2)
        assert.strictEqual(m.sample(`mesh_http_request_duration_seconds_bucket{method="GET",route="/health",le="+Inf"}`), 2)
        // The scrape itself is in flight while it is answered.
        assert.strictEqual(m.sample("mesh_http_requests_in_flight"), 1)
      })
    ))

  it.live("/ready is 503 STORE_UNAVAILABLE while the database does not answer; /health still 200", () =>
    provide(
      Effect.gen(function* () {
        const services = yield* Layer.build(Hub.layerServices({ database: tempDatabase() }))
        const registry = Context.get(services, Registry.Registry)
        const down = Context.add(services, Registry.Registry, { ...registry, ping: Effect.succeed(false) })
        const hub = yield* Hub.serve(HubApi, HandlersLive, down, { database: ":unused:", serving: { maxEventLoopLagMs: Infinity } })
        const ready = yield* request(`${hub.url}/ready`, "GET", undefined, undefined, { "x-correlation-id": "ready-1" })
        assert.strictEqual(ready.status, 503)
        assert.strictEqual(ready.body.code, "STORE_UNAVAILABLE")
        assert.strictEqual(ready.body.correlationId, "ready-1")
        assert.strictEqual((yield* request(`${hub.url}/health`, "GET")).status, 200)
      })
    ))

  it.live("/metrics counts ledger allocations by outcome", () =>
    provide(
      Effect.gen(function* () {
        const { client, hub } = yield* startHub()
        const buyer = yield* registeredAgent(client, "buyer")
        const shopper = yield* registeredAgent(client, "shopper")
        const merchant = yield* generateDid("merchant")
        const intent = yield* issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd: 100 }, privateKey: buyer.identity.privateKey })
        const cart = (usd: number) => attenuateToCart({ parent: intent, granteeDid: merchant.did, narrowed: { spendLimitUsd: usd }, grantorPrivateKey: shopper.identity.privateKey })
        const as = { apiKey: shopper.apiKey }
        const before = yield* scrape(hub.url)
        const count = (m: typeof before, outcome: string) => m.sample(`mesh_ledger_allocations_total{outcome="${outcome}"}`)
        const pool = yield* client.openPool(intent.token, as)
        const c60 = yield* cart(60)
        yield* client.allocate({ poolId: pool.poolId, childMandate: c60.token, idempotencyKey: "a", ...as })
        yield* client.allocate({ poolId: pool.poolId, childMandate: c60.token, idempotencyKey: "a", ...as })
        const c50 = yield* cart(50)
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c50.token, idempotencyKey: "b", ...as }))).code, "BUDGET_EXHAUSTED")
        const after = yield* scrape(hub.url)
        assert.include(after.text, "# TYPE mesh_ledger_allocations_total counter")
        assert.strictEqual(count(after, "allocated") - count(before, "allocated"), 1)
        assert.strictEqual(count(after, "replayed") - count(before, "replayed"), 1)
        assert.strictEqual(count(after, "refused") - count(before, "refused"), 1)
        assert.strictEqual(after.sample(`mesh_http_requests_total{method="POST",route="/v1/spending/pools/:poolId/allocations",status="409"}`), 1)
      })
    ))
})
