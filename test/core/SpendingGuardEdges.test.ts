import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { KeyResolver } from "../../src/core/KeyResolver.js"
import { attenuateToCart, issueIntentMandate, issueTaskMandate } from "../../src/core/Mandate.js"
import { SpendingGuard } from "../../src/core/SpendingGuard.js"
import * as TaskStore from "../../src/core/TaskStore.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { cast, resolverFor } from "../support/mandates.js"

// A clock at a realistic instant (not 0), so a retention horizon off by a factor shows.
const T0 = 1_800_000_000_000

/** The guard over a memory store that records every charge it is asked for, with its retention horizon. */
const spied = Effect.gen(function* () {
  const parties = yield* cast
  const calls: Array<{ readonly charges: ReadonlyArray<TaskStore.CounterCharge>; readonly until: number }> = []
  const inner = TaskStore.makeMemory()
  const store: TaskStore.TaskStoreApi = {
    ...inner,
    charge: (charges, until) => Effect.zipRight(Effect.sync(() => void calls.push({ charges, until })), inner.charge(charges, until))
  }
  const layer = SpendingGuard.layer.pipe(
    Layer.provide(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor(Object.values(parties))), Layer.succeed(TaskStore.TaskStore, store), KeysNative.layer))
  )
  const guard = yield* Effect.provide(SpendingGuard, layer)
  return { ...parties, guard, calls }
}).pipe(Effect.provide(KeysNative.layer))

describe("SpendingGuard edges", () => {
  it.effect("a cart mandate pays like an intent; every link is charged on the spend counter, kept until the root expires", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, carol, guard, calls } = yield* spied
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, ttlSeconds: 7_200, constraints: { spendLimitUsd: 50 } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, ttlSeconds: 600, narrowed: { spendLimitUsd: 20, allowedMerchants: ["shop"] } })
      const ok = yield* guard.authorize(cart.token, { amountUsd: 12.5, merchant: "shop", presenter: carol.did })
      assert.strictEqual(ok.amountMicros, 12_500_000)
      assert.strictEqual(ok.mandate.kind, "cart")
      // The counter name is stored with every charge (and in SQL rows): renaming it would forget what was spent.
      assert.deepStrictEqual(calls, [{
        charges: [
          { scope: TaskStore.counterScope(intent), counter: "spend:usdMicros", amount: 12_500_000, limit: 50_000_000 },
          { scope: TaskStore.counterScope(cart), counter: "spend:usdMicros", amount: 12_500_000, limit: 20_000_000 }
        ],
        until: Math.floor(T0 / 1000) * 1000 + 7_200_000
      }])
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a task mandate is not a spending mandate: MANDATE_INVALID with KIND_MISMATCH, nothing charged", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, guard, calls } = yield* spied
      const task = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["pay"], maxDelegationDepth: 0 } })
      const e = yield* Effect.flip(guard.authorize(task.token, { amountUsd: 1, merchant: "shop", presenter: bob.did }))
      assert.strictEqual(e.code, "MANDATE_INVALID")
      assert.strictEqual(e._tag === "SpendingConstraintViolation" ? e.reason : undefined, "KIND_MISMATCH")
      assert.deepStrictEqual(calls, [])
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("refusals name the merchant and the mandate, or the amount and the limit reached", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, guard } = yield* spied
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 3, allowedMerchants: ["shop"] } })
      const merchant = yield* Effect.flip(guard.authorize(intent.token, { amountUsd: 1, merchant: "casino", presenter: bob.did }))
      assert.strictEqual(merchant.code, "MERCHANT_NOT_ALLOWED")
      assert.include(merchant.message, "\"casino\"")
      assert.include(merchant.message, intent.jti)
      const limit = yield* Effect.flip(guard.authorize(intent.token, { amountUsd: 3.5, merchant: "shop", presenter: bob.did }))
      assert.strictEqual(limit.code, "LIMIT_EXCEEDED")
      for (const n of ["3.5 USD", TaskStore.counterScope(intent), "3000000"]) assert.include(limit.message, n)
    }).pipe(Effect.provide(KeysNative.layer)))
})
