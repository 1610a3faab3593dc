import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { digestResult, sign } from "../src/core/CommitToken.js"
import { Keys, type PrivateKey } from "../src/core/Keys.js"
import { makeStatic } from "../src/core/KeyResolver.js"
import { type ListedAllocation, verify, verifyPools } from "../src/core/Reconciliation.js"
import { toBase64Url, utf8 } from "../src/core/internal/bytes.js"

const FLIGHTS = "did:mesh:flights"
const HOTEL = "did:mesh:hotel"

/** A clean trail: two receipts, one compensated step with nothing used, one allocation still active. */
const cleanRun = Effect.gen(function* () {
  const keys = yield* Keys
  const flights = yield* keys.generate
  const hotel = yield* keys.generate
  const token = (key: PrivateKey, issuer: string, step: string, amountUsd: string) =>
    Effect.flatMap(Effect.orDie(digestResult(step)), (resultDigest) =>
      Effect.orDie(sign({ sagaId: "saga_1", step, capability: `book-${step}`, amountUsd, resultDigest, at: "2026-11-26T08:00:00.000Z", issuer }, key))
    )
  const allocations: Array<ListedAllocation> = [
    { allocationId: "a1", grantee: FLIGHTS, idempotencyKey: "saga_1:flight", amountUsd: 30, usedUsd: 25.5, status: "released", commitToken: yield* token(flights, FLIGHTS, "flight", "25.5") },
    { allocationId: "a2", grantee: HOTEL, idempotencyKey: "saga_1:hotel", amountUsd: 50, usedUsd: 50, status: "released", commitToken: yield* token(hotel, HOTEL, "hotel", "50") },
    { allocationId: "a3", grantee: HOTEL, idempotencyKey: "saga_1:spa", amountUsd: 20, usedUsd: 0, status: "released" },
    { allocationId: "a4", grantee: FLIGHTS, idempotencyKey: "saga_1:car", amountUsd: 10, usedUsd: null, status: "active" }
  ]
  const resolver = makeStatic({ [FLIGHTS]: { publicKey: flights.publicKey, keyVersion: 1 }, [HOTEL]: { publicKey: hotel.publicKey, keyVersion: 1 } })
  return { allocations, pool: { poolId: "pool_1", allocatedUsd: 85.5 }, resolver, token, flights }
})

const codes = (failures: ReadonlyArray<{ readonly code: string; readonly allocationId?: string }>) => failures.map((f) => `${f.allocationId ?? "pool"}:${f.code}`)

const provide = <A, E>(e: Effect.Effect<A, E, Keys>) => Effect.provide(e, Keys.noble)

describe("Reconciliation.verify", () => {
  it.effect("a clean trail passes: every token verifies, amounts match, totals add up", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, pool, resolver } = yield* cleanRun
        const report = yield* verify(allocations, pool, resolver)
        assert.deepStrictEqual(report.failures, [])
        assert.isTrue(report.ok)
        assert.deepStrictEqual([report.allocatedUsd, report.usedUsd, report.receipts.size], ["85.5", "75.5", 2])
      })
    ))

  it.effect("a tampered token is SIGNATURE_INVALID; an issuer nobody knows is KEY_NOT_FOUND; garbage is MALFORMED_TOKEN", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, pool, resolver, token, flights } = yield* cleanRun
        const [h, p, s] = allocations[1]!.commitToken!.split(".") as [string, string, string]
        const payload = JSON.parse(atob(p.replace(/-/g, "+").replace(/_/g, "/"))) as Record<string, string>
        const tampered = `${h}.${toBase64Url(utf8(JSON.stringify({ ...payload, capability: "book-suite" })))}.${s}`
        const stranger = yield* token(flights, "did:mesh:stranger", "flight", "25.5")
        const list = [
          { ...allocations[0]!, commitToken: stranger },
          { ...allocations[1]!, commitToken: tampered },
          { ...allocations[2]!, commitToken: "garbage" },
          allocations[3]!
        ]
        const report = yield* verify(list, pool, resolver)
        assert.isFalse(report.ok)
        assert.deepStrictEqual(codes(report.failures), ["a1:KEY_NOT_FOUND", "a2:SIGNATURE_INVALID", "a3:MALFORMED_TOKEN"])
      })
    ))

  it.effect("a used amount other than the token's is AMOUNT_MISMATCH, and the pool's total no longer adds up", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, pool, resolver } = yield* cleanRun
        const list = [{ ...allocations[0]!, usedUsd: 29 }, ...allocations.slice(1)]
        const report = yield* verify(list, pool, resolver)
        assert.deepStrictEqual(codes(report.failures), ["a1:AMOUNT_MISMATCH", "pool:TOTAL_MISMATCH"])
        const ledgerLies = yield* verify(allocations, { ...pool, allocatedUsd: 90 }, resolver)
        assert.deepStrictEqual(codes(ledgerLies.failures), ["pool:TOTAL_MISMATCH"])
      })
    ))

  it.effect("money used without a token is MISSING_COMMIT_TOKEN; a token on an active allocation is AMOUNT_MISMATCH", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, pool, resolver } = yield* cleanRun
        const { commitToken: _dropped, ...bare } = allocations[1]!
        const list = [allocations[0]!, bare, allocations[2]!, { ...allocations[3]!, commitToken: allocations[0]!.commitToken }]
        const report = yield* verify(list, pool, resolver)
        assert.deepStrictEqual(codes(report.failures), ["a2:MISSING_COMMIT_TOKEN", "a4:STEP_MISMATCH", "a4:AMOUNT_MISMATCH", "a4:DUPLICATE_RECEIPT"])
      })
    ))

  it.effect("one receipt billed on two allocations is DUPLICATE_RECEIPT", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, resolver } = yield* cleanRun
        const twice = [...allocations, { ...allocations[0]!, allocationId: "a5" }]
        const report = yield* verify(twice, { poolId: "pool_1", allocatedUsd: 111 }, resolver)
        assert.deepStrictEqual(codes(report.failures), ["a5:DUPLICATE_RECEIPT"])
      })
    ))

  it.effect("a receipt proves only its own allocation: another agent's token is ISSUER_MISMATCH, an invented saga or step STEP_MISMATCH", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, pool, resolver, token, flights } = yield* cleanRun
        // The hotel's allocation released with a receipt the flights agent signed for work it made up.
        const invented = yield* token(flights, FLIGHTS, "made-up", "50")
        const list = [allocations[0]!, { ...allocations[1]!, commitToken: invented }, ...allocations.slice(2)]
        const report = yield* verify(list, pool, resolver)
        assert.deepStrictEqual(codes(report.failures), ["a2:ISSUER_MISMATCH", "a2:STEP_MISMATCH"])
        assert.isFalse(report.ok)
      })
    ))

  it.effect("the same receipt released in two pools reconciles in each alone, and is DUPLICATE_RECEIPT when the pools are checked together", () =>
    provide(
      Effect.gen(function* () {
        const { allocations, pool, resolver } = yield* cleanRun
        const second = { pool: { poolId: "pool_2", allocatedUsd: 25.5 }, allocations: [{ ...allocations[0]!, allocationId: "b1" }] }
        assert.isTrue((yield* verify(second.allocations, second.pool, resolver)).ok)
        const [first, other] = yield* verifyPools([{ allocations, pool }, second], resolver)
        assert.isTrue(first!.ok)
        assert.deepStrictEqual(codes(other!.failures), ["b1:DUPLICATE_RECEIPT"])
      })
    ))
})
