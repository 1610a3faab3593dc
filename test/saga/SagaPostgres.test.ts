/**
 * Sagas on Postgres: the hub with its saga scheduler on one Postgres database (the workflow journal of
 * `@effect/cluster`'s SQL storage in it too), committing and compensating as on SQLite (test/saga/Saga.test.ts).
 */
import { assert, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import * as CommitToken from "../../src/core/CommitToken.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as SagaStore from "../../src/saga/SagaStore.js"
import * as Database from "../../src/sql/Database.js"
import { describePostgres, probeNow, scopedDatabase } from "../support/postgres.js"
import { step, world } from "./support.js"

await probeNow()

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const trip = [
  { agent: "airline", capability: "book-flight", budget: 30 },
  { agent: "hotel", capability: "book-hotel", budget: 20 },
  { agent: "rental", capability: "book-car", budget: 10 }
] as const

// A database per test: each starts a hub, whose admin key is printed on the first start on a database only.
/** A saga store on its own connection pool to `url`: one hub's worth. */
const storeOnDatabase = (url: string) =>
  Effect.map(Layer.build(SagaStore.layer.pipe(Layer.provide(Database.layer(url)))), (ctx) => ctx.unsafeMap.get(SagaStore.SagaStore.key) as SagaStore.SagaStoreApi)

/** A one-step plan, for stores written directly. */
const plan = {
  mandate: "m", grantor: "did:mesh:buyer",
  steps: [{ name: "s0", agentDid: "did:mesh:a", didHash: "h", endpointUrl: "http://127.0.0.1:9", capability: "c", params: {}, budgetMicros: 1, compensation: undefined }]
}

describePostgres("sagas on Postgres (the durable engine)", () => {
  it.live("a saga whose steps all succeed commits, each step receipted and the pool holding what was used", () =>
    provide(
      Effect.gen(function* () {
        const db = yield* scopedDatabase
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }, { name: "rental" }], database: db.url })
        const steps = trip.map((s, i) => step(w.agents, `s${i}`, s.agent, s.capability, s.budget, i === 0 ? 25 : undefined))
        const result = yield* w.hub.scheduler.run(w.buyer.did, { mandate: yield* w.mandate(), steps })
        assert.strictEqual(result.status, "committed", JSON.stringify(result))
        assert.deepStrictEqual(result.steps.map((s) => s.usedUsd), ["25", "20", "10"])
        assert.strictEqual((yield* w.pool(result.poolId)).allocatedUsd, 55)
        for (const [i, s] of result.steps.entries()) {
          const receipt = yield* CommitToken.verify(s.commitToken!, w.agents[trip[i]!.agent]!.publicKeyBytes)
          assert.deepStrictEqual([receipt.sagaId, receipt.step, receipt.amountUsd], [result.sagaId, `s${i}`, s.usedUsd])
        }
        assert.deepStrictEqual([...w.effects.values()], [1, 1, 1])
      })
    ))

  it.live("a failure at the last step compensates the steps before it, in reverse, each once", () =>
    provide(
      Effect.gen(function* () {
        const db = yield* scopedDatabase
        const w = yield* world({
          agents: [{ name: "airline" }, { name: "hotel" }, { name: "rental", failing: { "book-car": "always" } }],
          database: db.url
        })
        const steps = trip.map((s, i) => step(w.agents, `s${i}`, s.agent, s.capability, s.budget))
        const result = yield* w.hub.scheduler.run(w.buyer.did, { mandate: yield* w.mandate(), steps })
        assert.strictEqual(result.status, "compensated", JSON.stringify(result))
        assert.deepStrictEqual(result.steps.map((s) => s.status), ["compensated", "compensated", "failed"])
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(w.hub.scheduler.events(result.sagaId)))
        assert.deepStrictEqual(events.filter((e) => e.type === "step_compensated").map((e) => e.step), ["s1", "s0"])
        assert.strictEqual([...w.effects.keys()].filter((k) => k.includes("|undo-")).length, 2)
      })
    ))

  it.live("a saga's events appended by one process reach the readers of another (LISTEN/NOTIFY), not only its own", () =>
    provide(
      Effect.gen(function* () {
        const db = yield* scopedDatabase
        // Two stores on two connection pools: two hubs' worth, as a saga run by one hub and awaited on another.
        const storeOn = storeOnDatabase(db.url)
        const writer = yield* storeOn
        const reader = yield* storeOn
        const news = yield* PubSub.subscribe(reader.changes)
        yield* writer.create({ id: "saga_x", caller: "did:mesh:buyer", runner: "did:mesh:runner", poolId: "pool_x", plan })
        // The listening connection is opened as the store starts; an append right after may precede it, so the
        // writer appends until the reader hears (the reader's first news is what is asserted, whatever the count).
        const heard = yield* news.take.pipe(
          Effect.raceFirst(Effect.forever(Effect.zipRight(writer.append("saga_x", "saga_committed", null, {}), Effect.sleep("200 millis"))).pipe(Effect.as(undefined))),
          Effect.timeout("20 seconds")
        )
        assert.deepStrictEqual(heard, { sagaId: "saga_x", type: "saga_committed" })
      })
    ))

  it.live("a store does not hear its own announcements: each of its appends wakes its readers once", () =>
    provide(
      Effect.gen(function* () {
        const db = yield* scopedDatabase
        const storeOn = storeOnDatabase(db.url)
        const self = yield* storeOn
        const other = yield* storeOn
        const news = yield* PubSub.subscribe(self.changes)
        yield* other.create({ id: "saga_o", caller: "did:mesh:buyer", runner: "did:mesh:runner", poolId: "pool_o", plan })
        yield* self.create({ id: "saga_s", caller: "did:mesh:buyer", runner: "did:mesh:runner", poolId: "pool_s", plan })
        // Once this store hears another's append, its listening connection is up.
        yield* news.take.pipe(
          Effect.repeat({ until: (c) => c.sagaId === "saga_o" }),
          Effect.raceFirst(Effect.forever(Effect.zipRight(other.append("saga_o", "step_started", "s0", {}), Effect.sleep("200 millis"))).pipe(Effect.as(undefined))),
          Effect.timeout("20 seconds")
        )
        yield* news.takeAll
        yield* self.append("saga_s", "step_started", "s0", {})
        // Announcements reach a listener in commit order: once the other's later one is heard, this store's own was
        // delivered before it and, if it were forwarded, would sit between.
        yield* other.append("saga_o", "saga_committed", null, {})
        const seen: Array<SagaStore.SagaChange> = []
        yield* news.take.pipe(
          Effect.tap((c) => Effect.sync(() => seen.push(c))),
          Effect.repeat({ until: (c) => c.sagaId === "saga_o" && c.type === "saga_committed" }),
          Effect.timeout("20 seconds")
        )
        // The other's earlier appends may still be arriving; of this store's saga, only its one local wake-up.
        assert.deepStrictEqual(seen.filter((c) => c.sagaId === "saga_s"), [{ sagaId: "saga_s", type: "step_started" }])
      })
    ))
})
