/**
 * Sagas on Postgres: the hub with its saga scheduler on one Postgres database (the workflow journal of
 * `@effect/cluster`'s SQL storage in it too), committing and compensating as on SQLite (test/saga/Saga.test.ts).
 */
import { assert, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as CommitToken from "../../src/core/CommitToken.js"
import * as KeysNative from "../../src/node/KeysNative.js"
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
})
