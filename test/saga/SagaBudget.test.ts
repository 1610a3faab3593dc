import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { parseUsd } from "../../src/core/Money.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { step, world } from "./support.js"
import * as Either from "effect/Either"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))
const micros = (usd: string | null) => (usd === null ? 0 : Either.getOrThrow(parseUsd(usd)))

describe("sagas drawing on one pool", () => {
  it.live("BUDGET_EXHAUSTED at the second step compensates the first; the pool holds exactly what the first used", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }], spendLimitUsd: 40 })
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "hotel", "hotel", "book-hotel", 20)]
        const result = yield* w.hub.scheduler.run(w.buyer.did, { mandate: yield* w.mandate(), steps })
        assert.deepStrictEqual([result.status, result.failedStep, result.errorCode], ["compensated", "hotel", "BUDGET_EXHAUSTED"])
        assert.deepStrictEqual(result.steps.map((s) => [s.status, s.allocationId === null]), [["compensated", false], ["failed", true]])
        assert.deepStrictEqual([...w.effects.keys()].sort(), [`${result.sagaId}|flight|book-flight`, `${result.sagaId}|flight|undo-book-flight`])
        const pool = yield* w.pool(result.poolId)
        assert.strictEqual(micros(String(pool.allocatedUsd)), micros(result.steps[0]!.usedUsd))
      })
    ))

  it.live("50 concurrent sagas never over-allocate the pool; those that run out compensate, and the pool balances exactly", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }], spendLimitUsd: 100, maxRunningPerCaller: 50 })
        const mandate = yield* w.mandate()
        const steps = [step(w.agents, "flight", "airline", "book-flight", 3), step(w.agents, "hotel", "hotel", "book-hotel", 2)]
        const results = yield* Effect.forEach(Array.from({ length: 50 }, (_, i) => i), () => w.hub.scheduler.run(w.buyer.did, { mandate, steps }), {
          concurrency: "unbounded"
        })
        // 50 × 5 USD cannot fit in 100: some run out (which ones depends on the interleaving).
        assert.isTrue(results.some((r) => r.status === "compensated"))
        for (const r of results) {
          if (r.status === "compensated") assert.strictEqual(r.errorCode, "BUDGET_EXHAUSTED", JSON.stringify(r))
          else assert.strictEqual(r.status, "committed")
        }
        const pool = yield* w.pool(results[0]!.poolId)
        const used = results.flatMap((r) => r.steps).reduce((sum, s) => sum + micros(s.usedUsd), 0)
        assert.isAtMost(micros(String(pool.allocatedUsd)), micros("100"))
        assert.strictEqual(micros(String(pool.allocatedUsd)), used)
        // Every step that ran was charged once: its handler ran once, and a compensated one was undone once.
        for (const count of w.effects.values()) assert.strictEqual(count, 1)
      })
    ))
})
