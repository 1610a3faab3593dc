/**
 * Compute reservations under random interleavings: model calls reserve an upper bound, then settle with what they
 * spent (less, or more than reserved), as concurrent fibers yielding a generated number of times between steps.
 * Whatever the order, the counter never passes the limit, and when no call overran it holds exactly what the
 * admitted calls spent.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import fc from "fast-check"
import { KeyResolver } from "../src/core/KeyResolver.js"
import { issueTaskMandate } from "../src/core/Mandate.js"
import { computeCounter, TaskGuard } from "../src/core/TaskGuard.js"
import { counterScope, TaskStore, layerMemory } from "../src/core/TaskStore.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as Database from "../src/sql/Database.js"
import * as TaskStoreSql from "../src/sql/TaskStoreSql.js"
import { cast, resolverFor } from "./support/mandates.js"

const call = fc.record({
  reserve: fc.integer({ min: 1, max: 400 }),
  spentPct: fc.integer({ min: 0, max: 150 }),
  before: fc.nat(5),
  between: fc.nat(5)
})

const yields = (n: number) => Effect.repeatN(Effect.yieldNow(), n)

describe.each([
  ["memory", () => layerMemory],
  ["SQL", () => TaskStoreSql.layer.pipe(Layer.provide(Database.layerSqlite(":memory:")))]
] as const)("compute reservations (%s store)", (_label, store) => {
  it("never pass the limit, and account exactly for what was spent when nothing overran", async () => {
    const parties = await Effect.runPromise(Effect.provide(cast, KeysNative.layer))
    const { alice, bob } = parties
    const runtime = ManagedRuntime.make(
      TaskGuard.layer.pipe(
        Layer.provideMerge(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor([alice, bob])), store(), KeysNative.layer))
      )
    )
    try {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 50, max: 2_000 }), fc.array(call, { minLength: 1, maxLength: 16 }), (limit, calls) =>
          runtime.runPromise(
            Effect.gen(function* () {
              const guard = yield* TaskGuard
              const tasks = yield* TaskStore
              const m = yield* issueTaskMandate({
                grantorDid: alice.did,
                granteeDid: bob.did,
                privateKey: alice.key,
                constraints: { allowed: [], computeLimit: { llmTokens: limit }, maxDelegationDepth: 0 }
              })
              const used = tasks.used(counterScope(m), computeCounter("llmTokens"))
              const spent = yield* Effect.forEach(calls, (c) =>
                Effect.gen(function* () {
                  yield* yields(c.before)
                  const admitted = yield* Effect.either(guard.reserveCompute(m.token, bob.did, { llmTokens: c.reserve }))
                  if (admitted._tag === "Left") {
                    assert.strictEqual(admitted.left.code, "COMPUTE_LIMIT_EXCEEDED")
                    return undefined
                  }
                  assert.isAtMost(yield* used, limit)
                  yield* yields(c.between)
                  const s = Math.floor((c.reserve * c.spentPct) / 100)
                  yield* guard.settleCompute(admitted.right, { llmTokens: c.reserve }, { llmTokens: s })
                  assert.isAtMost(yield* used, limit)
                  return { s, overran: s > c.reserve }
                }), { concurrency: "unbounded" })
              const final = yield* used
              assert.isAtMost(final, limit)
              const admitted = spent.filter((x) => x !== undefined)
              if (!admitted.some((x) => x.overran)) assert.strictEqual(final, admitted.reduce((n, x) => n + x.s, 0))
              // A lone call that fits is always admitted.
              if (calls.length === 1 && calls[0]!.reserve <= limit) assert.strictEqual(admitted.length, 1)
            })
          )
        ),
        { numRuns: 60 }
      )
    } finally {
      await runtime.dispose()
    }
  }, 120_000)
})
