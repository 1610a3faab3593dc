import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { type IdempotencyQuota, IdempotencyStore, layerMemory } from "../src/core/IdempotencyStore.js"
import * as Database from "../src/sql/Database.js"
import * as IdempotencyStoreSql from "../src/sql/IdempotencyStoreSql.js"

// One contract, every layer: what a caller of `IdempotencyStore` may rely on whichever store is behind it.
const layers: ReadonlyArray<readonly [string, () => Layer.Layer<IdempotencyStore>]> = [
  ["memory", () => layerMemory()],
  ["SQL", () => IdempotencyStoreSql.layer.pipe(Layer.provide(Database.layerSqlite(":memory:")), Layer.orDie)]
]

const DAY = 24 * 60 * 60 * 1000
const claimOf = (over: Partial<{ scope: string; key: string; fingerprint: string; holder: string; expiresAt: number; quota: IdempotencyQuota }> = {}) => ({
  scope: "did:mesh:agent|bearer:1",
  key: "k1",
  fingerprint: "f1",
  holder: "h1",
  expiresAt: DAY,
  ...over
})

for (const [name, layerOf] of layers) {
  describe(`IdempotencyStore contract (${name})`, () => {
    it.effect("the first claim holds the key; later claims see it pending, then completed with the reply", () =>
      Effect.gen(function* () {
        const store = yield* IdempotencyStore
        assert.deepStrictEqual(yield* store.claim(claimOf()), { _tag: "Claimed" })
        assert.deepStrictEqual(yield* store.claim(claimOf()), { _tag: "Pending", fingerprint: "f1", holder: "h1" })
        assert.deepStrictEqual(yield* store.claim(claimOf({ fingerprint: "f2" })), { _tag: "Pending", fingerprint: "f1", holder: "h1" })
        yield* store.complete("did:mesh:agent|bearer:1", "k1", "h1", { status: 200, body: "{\"message\":\"ok\"}" })
        assert.deepStrictEqual(yield* store.claim(claimOf({ holder: "h2" })), {
          _tag: "Completed",
          fingerprint: "f1",
          reply: { status: 200, body: "{\"message\":\"ok\"}" }
        })
        assert.deepStrictEqual(yield* store.claim(claimOf({ scope: "did:mesh:agent|bearer:2" })), { _tag: "Claimed" }, "another caller's key is apart")
      }).pipe(Effect.provide(layerOf())))

    it.effect("a released key is claimed afresh; release and complete by another holder change nothing", () =>
      Effect.gen(function* () {
        const store = yield* IdempotencyStore
        yield* store.claim(claimOf())
        yield* store.release("did:mesh:agent|bearer:1", "k1", "h2")
        yield* store.complete("did:mesh:agent|bearer:1", "k1", "h2", { status: 200, body: "forged" })
        assert.strictEqual((yield* store.claim(claimOf({ fingerprint: "f2" })))._tag, "Pending")
        yield* store.release("did:mesh:agent|bearer:1", "k1", "h1")
        assert.deepStrictEqual(yield* store.claim(claimOf({ fingerprint: "f2" })), { _tag: "Claimed" })
      }).pipe(Effect.provide(layerOf())))

    it.effect("a key left pending by another holder is taken over for the same request only", () =>
      Effect.gen(function* () {
        const store = yield* IdempotencyStore
        yield* store.claim(claimOf({ holder: "old" }))
        assert.strictEqual((yield* store.claim(claimOf({ holder: "new", fingerprint: "other" })))._tag, "Pending")
        assert.deepStrictEqual(yield* store.claim(claimOf({ holder: "new" })), { _tag: "Claimed" })
        yield* store.complete("did:mesh:agent|bearer:1", "k1", "old", { status: 200, body: "late" })
        yield* store.complete("did:mesh:agent|bearer:1", "k1", "new", { status: 200, body: "mine" })
        const after = yield* store.claim(claimOf({ holder: "third" }))
        assert.strictEqual(after._tag === "Completed" ? after.reply.body : after._tag, "mine")
      }).pipe(Effect.provide(layerOf())))

    it.effect("a stored reply is forgotten when it expires (TestClock): the key is claimed afresh", () =>
      Effect.gen(function* () {
        const store = yield* IdempotencyStore
        yield* store.claim(claimOf())
        yield* store.complete("did:mesh:agent|bearer:1", "k1", "h1", { status: 200, body: "first" })
        yield* TestClock.adjust(DAY - 1)
        assert.strictEqual((yield* store.claim(claimOf({ expiresAt: 3 * DAY })))._tag, "Completed")
        yield* TestClock.adjust(1)
        assert.deepStrictEqual(yield* store.claim(claimOf({ expiresAt: 3 * DAY })), { _tag: "Claimed" })
      }).pipe(Effect.provide(layerOf())))

    it.effect("a caller at its quota of keys or reply bytes is refused a new key (retry when its first expires); its held keys still answer; another caller goes on", () =>
      Effect.gen(function* () {
        const store = yield* IdempotencyStore
        const quota = { entries: 3, bytes: 2_000 }
        const big = { status: 200, body: "é".repeat(600) } // 1,200 bytes of UTF-8
        for (const key of ["k1", "k2"]) {
          yield* store.claim(claimOf({ key, quota }))
          yield* store.complete("did:mesh:agent|bearer:1", key, "h1", big)
        }
        // 2,400 bytes stored: past the byte bound with two keys of three.
        const refused = yield* Effect.flip(store.claim(claimOf({ key: "k3", quota })))
        assert.strictEqual(refused._tag, "IdempotencyQuotaExceeded")
        assert.strictEqual(refused._tag === "IdempotencyQuotaExceeded" ? refused.retryAfterMs : -1, DAY)
        assert.strictEqual((yield* store.claim(claimOf({ key: "k1", quota, holder: "h2" })))._tag, "Completed")
        assert.deepStrictEqual(yield* store.claim(claimOf({ scope: "did:mesh:agent|bearer:2", key: "k3", quota })), { _tag: "Claimed" })
        // Small replies: the entry bound.
        const few = { entries: 2, bytes: 1_000_000 }
        yield* store.claim(claimOf({ scope: "s3", key: "a", quota: few }))
        yield* store.claim(claimOf({ scope: "s3", key: "b", quota: few }))
        assert.strictEqual((yield* Effect.flip(store.claim(claimOf({ scope: "s3", key: "c", quota: few }))))._tag, "IdempotencyQuotaExceeded")
        // Expired keys make room again.
        yield* TestClock.adjust(DAY)
        assert.deepStrictEqual(yield* store.claim(claimOf({ key: "k3", quota, expiresAt: 2 * DAY })), { _tag: "Claimed" })
      }).pipe(Effect.provide(layerOf())))
  })
}

describe("IdempotencyStore memory bound", () => {
  it.effect("past its capacity of live keys it refuses a new key rather than forget an answer; expired keys make room", () =>
    Effect.gen(function* () {
      const store = yield* IdempotencyStore
      yield* store.claim(claimOf({ key: "a", expiresAt: 10 }))
      yield* store.claim(claimOf({ key: "b", expiresAt: 1000 }))
      assert.strictEqual((yield* Effect.flip(store.claim(claimOf({ key: "c" }))))._tag, "IdempotencyStoreUnavailable")
      yield* TestClock.setTime(10)
      assert.deepStrictEqual(yield* store.claim(claimOf({ key: "c" })), { _tag: "Claimed" })
    }).pipe(Effect.provide(layerMemory({ capacity: 2 }))))
})

describe("IdempotencyStore memory bytes", () => {
  it.effect("past its bytes of stored replies in all it refuses a new key (503) rather than forget an answer", () =>
    Effect.gen(function* () {
      const store = yield* IdempotencyStore
      yield* store.claim(claimOf({ scope: "a" }))
      yield* store.complete("a", "k1", "h1", { status: 200, body: "x".repeat(1_000) })
      const refused = yield* Effect.flip(store.claim(claimOf({ scope: "b" })))
      assert.strictEqual(refused._tag, "IdempotencyStoreUnavailable")
      assert.strictEqual((yield* store.claim(claimOf({ scope: "a", holder: "h2" })))._tag, "Completed")
    }).pipe(Effect.provide(layerMemory({ maxBytes: 1_000 }))))
})
