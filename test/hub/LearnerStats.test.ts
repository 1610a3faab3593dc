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
import * as SqlClient from "@effect/sql/SqlClient"
import * as Database from "../../src/sql/Database.js"
import { request, startHub, tempDatabase } from "./support.js"

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

  it.live("one publisher moves an arm by at most 1 000 pseudo-observations, however much it claims", () =>
    provide(
      Effect.gen(function* () {
        const { adminKey, hub } = yield* startHub()
        const honest = yield* userKey(hub.url, adminKey, "honest")
        const loud = yield* userKey(hub.url, adminKey, "loud")
        yield* publishStats(hub.url, honest, { stats: [{ modelId: "m", taskType: "CODE", successes: 30, failures: 70 }] })
        const huge = yield* request(`${hub.url}/v1/learner-stats`, "POST", { stats: [{ modelId: "m", taskType: "CODE", successes: 1e15, failures: 0 }] }, loud)
        const [afterHuge] = (yield* fetchStats(hub.url)).stats
        assert.isAtMost(afterHuge!.successes, 30 + 1_000)
        assert.deepStrictEqual([huge.status, huge.body.code], [400, "INVALID_REQUEST"])
        // The most it may claim: a million trials, all successes, counted as 1 000.
        yield* publishStats(hub.url, loud, { stats: [{ modelId: "m", taskType: "CODE", successes: 1_000_000, failures: 0 }] })
        // A ratio is kept when scaling: 2 500 of 10 000 succeed → 250 of 1 000.
        yield* publishStats(hub.url, honest, {
          stats: [{ modelId: "m", taskType: "CODE", successes: 30, failures: 70 }, { modelId: "n", taskType: "CODE", successes: 2_500, failures: 7_500 }]
        })
        const read = yield* fetchStats(hub.url)
        assert.deepStrictEqual(read.stats, [
          { modelId: "m", taskType: "CODE", successes: 1_030, failures: 70 },
          { modelId: "n", taskType: "CODE", successes: 250, failures: 750 }
        ])
      })
    ))

  it.live("a learner's counts beyond the bound are published scaled, keeping their ratio", () =>
    provide(
      Effect.gen(function* () {
        const { adminKey, hub } = yield* startHub()
        const published = yield* publishStats(hub.url, adminKey, { stats: [{ modelId: "m", taskType: "CODE", successes: 3_000_000, failures: 1_000_000 }] })
        assert.strictEqual(published.accepted, 1)
        const read = yield* fetchStats(hub.url)
        assert.deepStrictEqual(read.stats, [{ modelId: "m", taskType: "CODE", successes: 750, failures: 250 }])
      })
    ))

  it.live("extreme counts are refused with INVALID_REQUEST and the read answers 200 to everyone", () =>
    provide(
      Effect.gen(function* () {
        const { adminKey, hub } = yield* startHub()
        const honest = yield* userKey(hub.url, adminKey, "honest")
        yield* publishStats(hub.url, honest, { stats: [{ modelId: "m", taskType: "CODE", successes: 3, failures: 1 }] })
        const extremes: ReadonlyArray<readonly [number, number]> = [
          [Number.MAX_SAFE_INTEGER, 0], [0, Number.MAX_SAFE_INTEGER], [1e300, 0], [-1, 0], [1.5, 0], [1_000_001, 0], [600_000, 400_001]
        ]
        for (const [i, [successes, failures]] of extremes.entries()) {
          const key = yield* userKey(hub.url, adminKey, `extreme-${i}`)
          const r = yield* request(`${hub.url}/v1/learner-stats`, "POST", { stats: [{ modelId: "m", taskType: "CODE", successes, failures }] }, key)
          assert.deepStrictEqual([r.status, r.body.code], [400, "INVALID_REQUEST"], `${successes}/${failures}`)
          const read = yield* request(`${hub.url}/v1/learner-stats`, "GET")
          assert.strictEqual(read.status, 200, `${successes}/${failures}`)
          assert.deepStrictEqual(read.body.stats, [{ modelId: "m", taskType: "CODE", successes: 3, failures: 1 }])
        }
      })
    ))

  it.live("rows planted in the table out of bounds or out of shape are skipped, and the read answers 200", () =>
    provide(
      Effect.gen(function* () {
        const database = tempDatabase()
        const { adminKey, hub } = yield* startHub({ database })
        const honest = yield* userKey(hub.url, adminKey, "honest")
        yield* publishStats(hub.url, honest, { stats: [{ modelId: "m", taskType: "CODE", successes: 3, failures: 1 }] })
        const sql = yield* Effect.provide(SqlClient.SqlClient, yield* Layer.build(Database.layer(database)))
        const plant = (publisher: string, model: string, taskType: string, successes: unknown, failures: unknown) =>
          sql`INSERT INTO mesh_learner_stats (publisher, model, task_type, successes, failures, updated_at)
            VALUES (${publisher}, ${model}, ${taskType}, ${successes as number}, ${failures as number}, 0)`
        yield* plant("old-1", "m", "CODE", Number.MAX_SAFE_INTEGER, 0)
        yield* plant("old-2", "m", "CODE", Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
        yield* plant("old-3", "m", "CODE", 1e300, 0)
        yield* plant("old-4", "m", "CODE", 1.5, 0)
        yield* plant("old-5", "m", "CODE", "many", 0)
        yield* plant("old-6", "m", "POETRY", 1, 0)
        yield* plant("old-7", "", "CODE", 1, 0)
        yield* plant("old-8", "gone", "CODE", 1e18, 0)
        yield* plant("old-9", "m", "CODE", 5_000, 5_000)
        for (const key of [undefined, honest]) {
          const read = yield* request(`${hub.url}/v1/learner-stats`, "GET", undefined, key)
          assert.strictEqual(read.status, 200)
          // old-9 is within the publish bound and is counted, scaled to 1 000; every other planted row is skipped.
          assert.deepStrictEqual(read.body.stats, [{ modelId: "m", taskType: "CODE", successes: 503, failures: 501 }])
        }
      }).pipe(Effect.orDie)
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
