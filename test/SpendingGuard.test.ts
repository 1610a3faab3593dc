import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import type { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { KeyResolver } from "../src/core/KeyResolver.js"
import { attenuateToCart, attenuateToPayment, issueIntentMandate } from "../src/core/Mandate.js"
import { SpendingGuard } from "../src/core/SpendingGuard.js"
import * as TaskStore from "../src/core/TaskStore.js"
import { cast, resolverFor } from "./support/mandates.js"

const guarded = <A, E>(effect: Effect.Effect<A, E, SpendingGuard | Keys>) =>
  Effect.gen(function* () {
    const { alice, bob, carol, dave } = yield* Effect.provide(cast, KeysNative.layer)
    const layer = SpendingGuard.layer.pipe(
      Layer.provideMerge(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor([alice, bob, carol, dave])), TaskStore.layerMemory, KeysNative.layer))
    )
    return yield* Effect.provide(effect, layer)
  })

const codeOf = <A>(e: Effect.Effect<A, { readonly code: string }, SpendingGuard>) => Effect.map(Effect.flip(e), (x) => x.code)

describe("SpendingGuard", () => {
  it.effect("authorizes within the limit and for allowed merchants; LIMIT_EXCEEDED and MERCHANT_NOT_ALLOWED otherwise", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 50, allowedMerchants: ["shop"] } })
      // USD as the decimal string Money reads counts the same as the number.
      const ok = yield* SpendingGuard.authorize(intent.token, { amountUsd: "20.00", merchant: "shop", presenter: bob.did })
      assert.strictEqual(ok.amountMicros, 20_000_000)
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 50.01, merchant: "shop", presenter: bob.did })), "LIMIT_EXCEEDED")
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 1, merchant: "elsewhere", presenter: bob.did })), "MERCHANT_NOT_ALLOWED")
      // Cumulative: 20 spent, 30 left.
      yield* SpendingGuard.authorize(intent.token, { amountUsd: 30, merchant: "shop", presenter: bob.did })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 0.000001, merchant: "shop", presenter: bob.did })), "LIMIT_EXCEEDED")
    })))

  it.effect("0.1 + 0.2 never decides a payment: 0.1 then 0.2 exactly fill a 0.3 limit; the float sum is refused", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 0.3 } })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 0.1 + 0.2, merchant: "m", presenter: bob.did })), "INVALID_AMOUNT")
      yield* SpendingGuard.authorize(intent.token, { amountUsd: 0.1, merchant: "m", presenter: bob.did })
      yield* SpendingGuard.authorize(intent.token, { amountUsd: 0.2, merchant: "m", presenter: bob.did })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 0.000001, merchant: "m", presenter: bob.did })), "LIMIT_EXCEEDED")
    })))

  it.effect("a payment mandate pays its merchant at most its amount, once; every link's limit is charged", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol, dave } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 100, allowedMerchants: ["a", "b"] } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 60, allowedMerchants: ["a"] } })
      const payment = yield* attenuateToPayment({ parent: cart, granteeDid: dave.did, grantorPrivateKey: carol.key, amountUsd: 40, merchant: "a" })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(payment.token, { amountUsd: 40.000001, merchant: "a", presenter: dave.did })), "LIMIT_EXCEEDED")
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(payment.token, { amountUsd: 40, merchant: "b", presenter: dave.did })), "MERCHANT_NOT_ALLOWED")
      yield* SpendingGuard.authorize(payment.token, { amountUsd: 40, merchant: "a", presenter: dave.did })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(payment.token, { amountUsd: 40, merchant: "a", presenter: dave.did })), "LIMIT_EXCEEDED")
      // The cart has 20 left: a second payment under it for 25 is refused at authorization, though it was issued.
      const second = yield* attenuateToPayment({ parent: cart, granteeDid: dave.did, grantorPrivateKey: carol.key, amountUsd: 25, merchant: "a" })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(second.token, { amountUsd: 25, merchant: "a", presenter: dave.did })), "LIMIT_EXCEEDED")
      yield* SpendingGuard.authorize(second.token, { amountUsd: 20, merchant: "a", presenter: dave.did })
    })))

  it.effect("MANDATE_INVALID carries the verification reason: wrong presenter, expiry, tampering, wrong kind", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, ttlSeconds: 60, constraints: { spendLimitUsd: 5 } })
      const wrongPresenter = yield* Effect.flip(SpendingGuard.authorize(intent.token, { amountUsd: 1, merchant: "m", presenter: carol.did }))
      assert.strictEqual(wrongPresenter.code, "MANDATE_INVALID")
      assert.strictEqual(wrongPresenter._tag === "SpendingConstraintViolation" ? wrongPresenter.reason : undefined, "GRANTEE_MISMATCH")
      assert.match(wrongPresenter.message, /GRANTEE_MISMATCH/)
      const tampered = intent.token.slice(0, -3) + (intent.token.endsWith("AAA") ? "BAA" : "AAA")
      const t = yield* Effect.flip(SpendingGuard.authorize(tampered, { amountUsd: 1, merchant: "m", presenter: bob.did }))
      assert.strictEqual(t.code, "MANDATE_INVALID")
      yield* TestClock.adjust("60 seconds")
      const expired = yield* Effect.flip(SpendingGuard.authorize(intent.token, { amountUsd: 1, merchant: "m", presenter: bob.did }))
      assert.strictEqual(expired._tag === "SpendingConstraintViolation" ? expired.reason : undefined, "EXPIRED")
    })))

  it.effect("a payment mandate's own merchant binds on its own: under an intent open to any merchant, another merchant is refused", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      yield* TestClock.setTime(1_800_000_000_000)
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 50 } })
      const payment = yield* attenuateToPayment({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, amountUsd: 10, merchant: "shop" })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(payment.token, { amountUsd: 10, merchant: "elsewhere", presenter: carol.did })), "MERCHANT_NOT_ALLOWED")
      // Exactly its amount to its merchant passes; the intent (open to anyone) took no part in the refusal.
      const ok = yield* SpendingGuard.authorize(payment.token, { amountUsd: 10, merchant: "shop", presenter: carol.did })
      assert.strictEqual(ok.amountMicros, 10_000_000)
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(payment.token, { amountUsd: 10, merchant: "shop", presenter: carol.did })), "LIMIT_EXCEEDED")
      // The intent's holder may still pay anyone up to what is left of its limit.
      yield* SpendingGuard.authorize(intent.token, { amountUsd: 40, merchant: "anyone", presenter: bob.did })
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 0.000001, merchant: "anyone", presenter: bob.did })), "LIMIT_EXCEEDED")
    })))

  it.effect("refusals: a bad amount is INVALID_AMOUNT, a mandate for someone else or of another kind MANDATE_INVALID", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 5 } })
      for (const amountUsd of [-1, Number.NaN, 0.0000001]) {
        assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd, merchant: "m", presenter: bob.did })), "INVALID_AMOUNT", String(amountUsd))
      }
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize(intent.token, { amountUsd: 1, merchant: "m", presenter: carol.did })), "MANDATE_INVALID")
      assert.strictEqual(yield* codeOf(SpendingGuard.authorize("not.a.token", { amountUsd: 1, merchant: "m", presenter: bob.did })), "MANDATE_INVALID")
    })))
})

