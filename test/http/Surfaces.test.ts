/**
 * The serving guards reach every surface: the hub and the agent server pass their options through, and the agent
 * server answers for the host of its public URL.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import * as Hub from "../../src/hub/Hub.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { json, request } from "./Harness.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("serving guards on the surfaces", () => {
  it.live("the agent server answers for its public URL's host and refuses others", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "guarded",
          handler: ({ message }) => message,
          database: ":memory:",
          publicUrl: "https://agent.example.com/",
          serving: { allowedOrigins: ["https://app.example"] }
        })
        const health = (headers: Record<string, string>) => request(`${agent.url}/health`, { headers })
        assert.strictEqual((yield* health({ host: "agent.example.com" })).status, 200)
        assert.strictEqual((yield* health({ host: "127.0.0.1" })).status, 200)
        const rebound = yield* health({ host: "rebind.evil.example" })
        assert.strictEqual(rebound.status, 421)
        assert.strictEqual(json(rebound).code, "HOST_NOT_ALLOWED")
        // A cross-site form post to an `auth: none` agent never reaches the handler.
        const form = yield* request(`${agent.url}/v1/run`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://evil.example" },
          body: "message=hi"
        })
        assert.strictEqual(form.status, 403)
        assert.strictEqual(json(form).code, "ORIGIN_NOT_ALLOWED")
        const allowed = yield* health({ origin: "https://app.example" })
        assert.strictEqual(allowed.headers["access-control-allow-origin"], "https://app.example")
      })
    ))

  it.live("the hub takes the serving options and keeps its health answering", () =>
    provide(
      Effect.gen(function* () {
        const hub = yield* Hub.start({ database: ":memory:", serving: { allowedHosts: ["hub.example.com"], maxInFlight: 0 } })
        assert.strictEqual((yield* request(`${hub.url}/health`, { headers: { host: "hub.example.com" } })).status, 200)
        assert.strictEqual((yield* request(`${hub.url}/health`, { headers: { host: "other.example.com" } })).status, 421)
        // With no room in flight everything but the exempt health endpoint is shed.
        const shed = yield* request(`${hub.url}/v1/agents`)
        assert.strictEqual(shed.status, 503)
        assert.strictEqual(json(shed).code, "OVERLOADED")
      })
    ))

  it.live("the hub answers /health without shedding it while its event loop lags, and serves again once the lag is gone", () =>
    provide(
      Effect.gen(function* () {
        const loop = { lagMs: 0 }
        const hub = yield* Hub.start({ database: ":memory:", serving: { eventLoopLag: () => loop.lagMs } })
        const health = yield* request(`${hub.url}/health`)
        assert.strictEqual(health.status, 200)
        assert.deepStrictEqual(json(health), { status: "ok" })
        assert.strictEqual((yield* request(`${hub.url}/v1/agents`)).status, 200)
        // Past the default threshold (100 ms), work is shed and the probes still answer.
        loop.lagMs = 250
        const shed = yield* request(`${hub.url}/v1/agents`)
        assert.strictEqual(shed.status, 503)
        assert.strictEqual(shed.headers["retry-after"], "1")
        assert.strictEqual(json(shed).code, "OVERLOADED")
        assert.strictEqual((yield* request(`${hub.url}/health`)).status, 200)
        // /api/status reads the database: it is shed like any work, so flooding it frees the loop too.
        assert.strictEqual((yield* request(`${hub.url}/api/status`)).status, 503)
        loop.lagMs = 0
        assert.strictEqual((yield* request(`${hub.url}/v1/agents`)).status, 200)
      })
    ))

  it.live("a hub with a probe port answers its exempt paths there and nothing else", () =>
    provide(
      Effect.gen(function* () {
        const hub = yield* Hub.start({ database: ":memory:", serving: { probePort: 0, eventLoopLag: () => 1_000 } })
        const probeUrl = hub.probeUrl ?? assert.fail("no probe URL")
        assert.notStrictEqual(probeUrl, hub.url)
        const health = yield* request(`${probeUrl}/health`)
        assert.strictEqual(health.status, 200)
        assert.deepStrictEqual(json(health), { status: "ok" })
        assert.strictEqual((yield* request(`${probeUrl}/api/status`)).status, 404)
        const other = yield* request(`${probeUrl}/v1/agents`)
        assert.strictEqual(other.status, 404)
        assert.strictEqual(json(other).code, "ROUTE_NOT_FOUND")
        // The main port sheds at this lag; the probe port's exempt paths are never shed.
        assert.strictEqual((yield* request(`${hub.url}/v1/agents`)).status, 503)
      })
    ))
})
