import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Schedule from "effect/Schedule"
import * as CommitToken from "../../src/core/CommitToken.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const trip = [
  { agent: "airline", capability: "book-flight", budget: 30 },
  { agent: "hotel", capability: "book-hotel", budget: 20 },
  { agent: "rental", capability: "book-car", budget: 10 }
] as const

describe.each([
  ["durable engine (@effect/cluster on SQLite)", false],
  ["in-memory engine", true]
] as const)("sagas on the %s", (_label, memoryEngine) => {
  it.live("a saga whose steps all succeed commits; each step ran once and the pool holds what was used", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }, { name: "rental" }], memoryEngine })
        // The airline reports what the flight cost (25 of its 30); the others sign for their whole budget.
        const steps = trip.map((s, i) => step(w.agents, `s${i}`, s.agent, s.capability, s.budget, i === 0 ? 25 : undefined))
        const result = yield* w.hub.scheduler.run(w.buyer.did, { mandate: yield* w.mandate(), steps })
        assert.strictEqual(result.status, "committed", JSON.stringify(result))
        assert.deepStrictEqual(result.steps.map((s) => s.usedUsd), ["25", "20", "10"])
        assert.strictEqual((yield* w.pool(result.poolId)).allocatedUsd, 55)
        for (const [i, s] of result.steps.entries()) {
          const receipt = yield* CommitToken.verify(s.commitToken!, w.agents[trip[i]!.agent]!.publicKeyBytes)
          assert.deepStrictEqual([receipt.sagaId, receipt.step, receipt.capability, receipt.amountUsd], [result.sagaId, `s${i}`, trip[i]!.capability, s.usedUsd])
        }
        assert.deepStrictEqual(result.steps.map((s) => s.status), ["committed", "committed", "committed"])
        assert.deepStrictEqual(
          [...w.effects.entries()].sort(),
          trip.map((s, i) => [`${result.sagaId}|s${i}|${s.capability}`, 1] as [string, number]).sort()
        )
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(w.hub.scheduler.events(result.sagaId)))
        assert.deepStrictEqual(
          events.map((e) => [e.type, e.step]),
          [["saga_started", null], ...[0, 1, 2].flatMap((i) => [["step_started", `s${i}`], ["step_committed", `s${i}`]]), ["saga_committed", null]]
        )
        assert.deepStrictEqual(events.map((e) => e.seq), events.map((_, i) => i + 1))
      })
    ))

  for (const failAt of [0, 1, 2]) {
    it.live(`a failure at step ${failAt} compensates exactly the steps before it, in reverse`, () =>
      provide(
        Effect.gen(function* () {
          const failing = trip[failAt]!
          const w = yield* world({
            agents: trip.map((s) => (s.agent === failing.agent ? { name: s.agent, failing: { [s.capability]: "always" as const } } : { name: s.agent })),
            memoryEngine
          })
          const steps = trip.map((s, i) => step(w.agents, `s${i}`, s.agent, s.capability, s.budget))
          const result = yield* w.hub.scheduler.run(w.buyer.did, { mandate: yield* w.mandate(), steps })
          assert.strictEqual(result.status, "compensated", JSON.stringify(result))
          assert.strictEqual(result.failedStep, `s${failAt}`)
          assert.deepStrictEqual(
            result.steps.map((s) => s.status),
            trip.map((_, i) => (i < failAt ? "compensated" : i === failAt ? "failed" : "pending"))
          )
          // Each completed step ran once and was undone once; nothing ran for the failed step or after it.
          const expected: Array<[string, number]> = []
          for (let i = 0; i < failAt; i++) {
            expected.push([`${result.sagaId}|s${i}|${trip[i]!.capability}`, 1], [`${result.sagaId}|s${i}|undo-${trip[i]!.capability}`, 1])
          }
          assert.deepStrictEqual([...w.effects.entries()].sort(), expected.sort())
          // The compensations ran in reverse order of the steps.
          const events = Chunk.toReadonlyArray(yield* Stream.runCollect(w.hub.scheduler.events(result.sagaId)))
          const undone = events.filter((e) => e.type === "step_compensated").map((e) => e.step)
          assert.deepStrictEqual(undone, trip.slice(0, failAt).map((_, i) => `s${i}`).reverse())
          assert.strictEqual(events[events.length - 1]!.type, "saga_compensated")
        })
      ))
  }
})

describe("saga compensation that keeps failing", () => {
  it.live("ends compensation_failed and names the step", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({
          agents: [{ name: "airline", failing: { "undo-book-flight": "always" } }, { name: "hotel", failing: { "book-hotel": "always" } }],
          compensationRetry: Schedule.recurs(2)
        })
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "hotel", "hotel", "book-hotel", 20)]
        const result = yield* w.hub.scheduler.run(w.buyer.did, { mandate: yield* w.mandate(), steps })
        assert.strictEqual(result.status, "compensation_failed", JSON.stringify(result))
        assert.strictEqual(result.failedStep, "flight")
        assert.deepStrictEqual(result.steps.map((s) => s.status), ["compensation_failed", "failed"])
      })
    ))
})
