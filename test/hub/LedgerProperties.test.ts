/**
 * Ledger properties under random interleavings: allocations, concurrent retries of the same idempotency key and
 * releases run as concurrent fibers, each yielding a generated number of times between its steps, so every run
 * interleaves the ledger's statements differently. Whatever the order, the pool never holds more than its limit and
 * holds exactly what its allocations say.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import fc from "fast-check"
import * as Database from "../../src/sql/Database.js"
import { generateDid } from "../../src/core/Did.js"
import { KeyResolver } from "../../src/core/KeyResolver.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as Ledger from "../../src/hub/Ledger.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import { tempDatabase } from "./support.js"

const child = fc.record({
  cents: fc.integer({ min: 1, max: 2_000 }),
  before: fc.nat(6),
  // A second request with the same idempotency key, racing the first.
  retry: fc.option(fc.nat(6), { nil: undefined }),
  release: fc.option(fc.record({ usedPct: fc.integer({ min: 0, max: 100 }), after: fc.nat(6) }), { nil: undefined })
})

type Child = typeof child extends fc.Arbitrary<infer A> ? A : never

const yields = (n: number) => Effect.repeatN(Effect.yieldNow(), n)

describe.each([
  ["on a file (prepared-statement path)", tempDatabase],
  ["in memory (SqlClient path)", (): string => ":memory:"]
] as const)("ledger properties %s", (_label, database) => {
  it("allocations never exceed the pool, and the pool holds exactly what its allocations say, under random interleavings", async () => {
    const parties = await Effect.runPromise(Effect.all([generateDid("alice"), generateDid("bob")]).pipe(Effect.provide(KeysNative.layer)))
    const [alice, bob] = parties
    const resolver = KeyResolver.layerStatic({
      [alice.did]: { publicKey: alice.publicKeyBytes, keyVersion: 1 },
      [bob.did]: { publicKey: bob.publicKeyBytes, keyVersion: 1 }
    })
    const runtime = ManagedRuntime.make(
      Layer.mergeAll(Ledger.layer.pipe(Layer.provide(Layer.mergeAll(Database.layerSqlite(database()), resolver))), KeysNative.layer).pipe(
        Layer.provide(KeysNative.layer)
      )
    )
    let exhaustedSeen = 0
    try {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 100, max: 5_000 }), fc.array(child, { minLength: 1, maxLength: 12 }), (limitCents: number, generated: ReadonlyArray<Child>): Promise<void> =>
          runtime.runPromise(
            Effect.gen(function* () {
              const ledger = yield* Ledger.Ledger
              // A child is never wider than its parent (attenuation refuses it), so amounts are capped at the limit.
              const children = generated.map((c) => ({ ...c, cents: Math.min(c.cents, limitCents) }))
              const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, constraints: { spendLimitUsd: limitCents / 100 }, privateKey: alice.privateKey })
              const pool = yield* ledger.openPool(bob.did, intent.token)
              const tokens = yield* Effect.forEach(children, (c) =>
                attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: c.cents / 100 }, grantorPrivateKey: bob.privateKey })
              )
              const allocate = (i: number, wait: number) =>
                Effect.either(Effect.zipRight(yields(wait), ledger.allocate(bob.did, pool.poolId, { childToken: tokens[i]!.token, idempotencyKey: `k${i}` })))
              const outcomes = yield* Effect.forEach(
                children,
                (c, i) =>
                  Effect.gen(function* () {
                    const [first, second] = yield* Effect.all([allocate(i, c.before), c.retry === undefined ? Effect.succeed(undefined) : allocate(i, c.retry)], { concurrency: 2 })
                    const won = first._tag === "Right" ? first.right : second?._tag === "Right" ? second.right : undefined
                    let usedCents: number | undefined = undefined
                    if (won !== undefined && c.release !== undefined) {
                      usedCents = Math.floor((c.cents * c.release.usedPct) / 100)
                      yield* yields(c.release.after)
                      yield* ledger.release(bob.did, won.allocationId, { usedUsd: usedCents / 100 })
                    }
                    return { first, second, won, usedCents }
                  }),
                { concurrency: "unbounded" }
              )
              const after = yield* ledger.pool(bob.did, pool.poolId)
              // In micro-dollars, so not even one micro-dollar of drift hides in rounding.
              const allocatedMicros = Math.round(after.allocatedUsd * 1_000_000)
              const allocatedCents = allocatedMicros / 10_000
              // Never more than the limit.
              assert.isAtMost(allocatedMicros, limitCents * 10_000)
              // Exactly what the allocations hold: an active one its amount, a released one what it used.
              let expected = 0
              outcomes.forEach((o, i) => {
                if (o.won !== undefined) expected += o.usedCents ?? children[i]!.cents
                for (const r of [o.first, o.second]) {
                  if (r === undefined) continue
                  // An allocation either succeeds or finds the pool short; a retry answers the same allocation.
                  if (r._tag === "Left") assert.strictEqual(r.left.code, "BUDGET_EXHAUSTED", r.left.message)
                  else assert.strictEqual(r.right.allocationId, o.won!.allocationId)
                }
              })
              assert.strictEqual(allocatedMicros, expected * 10_000)
              // Without releases the pool only fills, so a refusal is never spurious: the amount exceeds even what is left at the end.
              if (children.every((c) => c.release === undefined)) {
                outcomes.forEach((o, i) => {
                  if (o.won === undefined) assert.isAbove(children[i]!.cents, limitCents - allocatedCents)
                })
              }
              exhaustedSeen += outcomes.filter((o) => o.won === undefined).length
            })
          )
        ),
        { numRuns: 25 }
      )
    } finally {
      await runtime.dispose()
    }
    // The generator does reach full pools, not only roomy ones.
    assert.isAbove(exhaustedSeen, 0)
  }, 120_000)
})
