import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { Lru } from "../src/core/internal/lru.js"
import { Keys, makeNoble } from "../src/core/Keys.js"
import { issueTaskMandate, type MandateInvalidReason, verifyMandate } from "../src/core/Mandate.js"
import * as MandateCache from "../src/core/MandateCache.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { cast, type Party, resolverFor } from "./support/mandates.js"

const issue = (from: Party, to: Party) =>
  Effect.map(
    issueTaskMandate({ grantorDid: from.did, granteeDid: to.did, privateKey: from.key, constraints: { allowed: ["search"], maxDelegationDepth: 1 } }),
    (m) => m.token
  )

const reasonOf = <A, R>(effect: Effect.Effect<A, { readonly reason: MandateInvalidReason }, R>) => Effect.map(Effect.flip(effect), (e) => e.reason)

describe("Lru", () => {
  it("holds at most max entries: inserting max + N leaves max", () => {
    const lru = new Lru<number, number>(8)
    for (let i = 0; i < 8 + 100; i++) lru.set(i, i)
    assert.strictEqual(lru.size, 8)
    assert.isUndefined(lru.get(0))
    assert.strictEqual(lru.get(107), 107)
  })

  it("drops the least recently used entry, not the oldest inserted", () => {
    const lru = new Lru<string, number>(2)
    lru.set("a", 1)
    lru.set("b", 2)
    assert.strictEqual(lru.get("a"), 1)
    lru.set("c", 3)
    assert.strictEqual(lru.get("a"), 1)
    assert.isUndefined(lru.get("b"))
    assert.strictEqual(lru.size, 2)
  })

  it("refuses a maximum below one", () => {
    assert.throws(() => new Lru(0), RangeError)
  })
})

describe("MandateCache", () => {
  it.effect("is bounded: verifying more distinct tokens than it holds leaves it at its maximum", () =>
    Effect.gen(function* () {
      const { alice, bob, carol, dave } = yield* cast
      const cache = MandateCache.make({ chainEntries: 4, headerEntries: 2 })
      const resolver = resolverFor([alice, bob, carol])
      const grantors = [alice, bob, carol]
      for (let i = 0; i < 4 + 5; i++) {
        const token = yield* issue(grantors[i % 3]!, dave)
        yield* verifyMandate(token, resolver, { cache })
      }
      assert.strictEqual(cache.chains.size, 4)
      assert.strictEqual(cache.headers.size, 2)
    }).pipe(Effect.provideService(Keys, makeNoble)))

  it.effect("two caches share no entries", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const a = MandateCache.make()
      const b = MandateCache.make()
      const token = yield* issue(alice, bob)
      yield* verifyMandate(token, alice.key.publicKey, { cache: a })
      assert.strictEqual(a.chains.size, 1)
      assert.strictEqual(b.chains.size, 0)
      assert.strictEqual(b.headers.size, 0)
    }).pipe(Effect.provideService(Keys, makeNoble)))

  it.effect("each build of a Keys layer comes with its own cache, used by verifyMandate without options", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* Effect.provide(cast, Keys.noble)
      const token = yield* Effect.provide(issue(alice, bob), Keys.noble)
      const verifyIn = (layer: typeof Keys.noble | typeof KeysNative.layer) =>
        Effect.provide(
          Effect.zipRight(verifyMandate(token, alice.key.publicKey), MandateCache.MandateCache),
          layer
        )
      const first = yield* verifyIn(KeysNative.layer)
      const second = yield* verifyIn(KeysNative.layer)
      const noble = yield* verifyIn(Keys.noble)
      assert.notStrictEqual(first, second)
      assert.notStrictEqual(first, noble)
      for (const cache of [first, second, noble]) assert.strictEqual(cache.chains.size, 1)
    }))

  it.effect("a cached chain is still checked: time and signature every call", () =>
    Effect.gen(function* () {
      const { alice, bob, mallory } = yield* cast
      const cache = MandateCache.make()
      const token = yield* issue(alice, bob)
      yield* verifyMandate(token, alice.key.publicKey, { cache })
      assert.strictEqual(cache.chains.size, 1)
      assert.strictEqual(yield* reasonOf(verifyMandate(token, mallory.key.publicKey, { cache })), "SIGNATURE_INVALID")
      yield* TestClock.adjust("2 hours")
      assert.strictEqual(yield* reasonOf(verifyMandate(token, alice.key.publicKey, { cache })), "EXPIRED")
    }).pipe(Effect.provideService(Keys, makeNoble)))

  it.effect("without a cache, verification parses every time and still verifies", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const token = yield* issue(alice, bob)
      const m = yield* verifyMandate(token, alice.key.publicKey)
      assert.strictEqual(m.grantee, bob.did)
    }).pipe(Effect.provideService(Keys, makeNoble)))

  it.effect("tokens longer than maxTokenLength are verified but not kept", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const token = yield* issue(alice, bob)
      const cache = MandateCache.make({ maxTokenLength: token.length - 1 })
      yield* verifyMandate(token, alice.key.publicKey, { cache })
      assert.strictEqual(cache.chains.size, 0)
    }).pipe(Effect.provideService(Keys, makeNoble)))
})
