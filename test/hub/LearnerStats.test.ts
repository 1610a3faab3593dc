import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as KeysNative from "../../src/node/KeysNative.js"
import { fetchStats, publishStats } from "../../src/model/LearnerRegistry.js"
import { ModelLearner } from "../../src/model/ModelLearner.js"
import { layerTest } from "../../src/model/ModelRouter.js"
import { make as makeSession } from "../../src/model/ModelSession.js"
import * as Random from "effect/Random"
import { catalogue, holderMandate } from "../support/modelSession.js"
import { request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(Layer.merge(KeysNative.layer, FetchHttpClient.layer)))

const userKey = (hubUrl: string, adminKey: string, owner: string) =>
  Effect.map(request(`${hubUrl}/keys`, "POST", { owner }, adminKey), (r) => r.body.apiKey as string)

describe("hub learner statistics", () => {
  it.live("publishes under an API key and reads counts summed over publishers; a republish replaces", () =>
    provide(
      Effect.gen(function* () {
        const { adminKey, hub } = yield* startHub()
        const alice = yield* userKey(hub.url, adminKey, "alice")
        const bob = yield* userKey(hub.url, adminKey, "bob")
        yield* publishStats(hub.url, alice, { stats: [{ modelId: "small", taskType: "CODE", successes: 3, failures: 1 }] })
        const published = yield* publishStats(hub.url, bob, {
          stats: [{ modelId: "small", taskType: "CODE", successes: 5, failures: 5 }, { modelId: "large", taskType: "CODE", successes: 9, failures: 0 }]
        })
        assert.strictEqual(published.accepted, 2)
        yield* publishStats(hub.url, alice, { stats: [{ modelId: "small", taskType: "CODE", successes: 4, failures: 1 }] })
        const read = yield* fetchStats(hub.url)
        assert.deepStrictEqual(read.stats, [
          { modelId: "large", taskType: "CODE", successes: 9, failures: 0 },
          { modelId: "small", taskType: "CODE", successes: 9, failures: 6 }
        ])
      })
    ))

  it.live("publishing without an API key is refused with INVALID_API_KEY", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub()
        const r = yield* request(`${hub.url}/v1/learner-stats`, "POST", { stats: [] })
        assert.strictEqual(r.status, 401)
        assert.strictEqual(r.body.code, "INVALID_API_KEY")
      })
    ))

  it.live("out-of-shape counts are refused", () =>
    provide(
      Effect.gen(function* () {
        const { adminKey, hub } = yield* startHub()
        const r = yield* request(`${hub.url}/v1/learner-stats`, "POST", { stats: [{ modelId: "m", taskType: "POETRY", successes: -1, failures: 0 }] }, adminKey)
        assert.strictEqual(r.status, 400)
      })
    ))

  it.live("a new session warms its learner from what another published", () =>
    provide(
      Effect.gen(function* () {
        const { adminKey, hub } = yield* startHub()
        const { bob, mandate } = yield* holderMandate()
        const router = layerTest({ catalogue, script: ["an answer"], scores: [0.9], random: Random.make(1) })
        // The first agent learns from two calls and publishes.
        const published = yield* Effect.gen(function* () {
          const session = yield* makeSession({ mandate, privateKey: bob.key, registryUrl: hub.url, registryApiKey: adminKey })
          yield* session.chat("one")
          yield* session.chat("two")
          return yield* session.publishToRegistry
        }).pipe(Effect.provide(router))
        assert.strictEqual(published.accepted, 1)
        // A second agent (a fresh build of the layer: an empty learner) warms it from the hub.
        const belief = yield* Effect.gen(function* () {
          const session = yield* makeSession({ mandate, registryUrl: hub.url })
          assert.strictEqual(yield* session.warmFromRegistry, 1)
          return yield* Effect.flatMap(ModelLearner, (l) => l.belief("large", "REASONING"))
        }).pipe(Effect.provide(router))
        assert.deepStrictEqual(belief, { alpha: 3, beta: 1 })
      })
    ))
})
