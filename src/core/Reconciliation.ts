/**
 * Billing reconciliation, offline: given a pool's allocations as the ledger lists them (docs/hub.md, "Spending
 * ledger") and a way to resolve DID keys, check that every charge is backed by the signed receipt of the agent that
 * did the work, and that the ledger's own total agrees with its rows. Nothing here trusts the hub: a tampered token,
 * an amount changed after signing, or a total that does not add up is reported, each failure on its own line.
 *
 * Rules (docs/protocol.md §13.4): a released allocation that used anything carries a commit token; every token
 * present verifies under its issuer's key; its issuer is the allocation's grantee (the agent the child mandate paid)
 * and its saga and step are the allocation's idempotency key (`<sagaId>:<step>`), so a receipt proves the work of
 * this allocation and no other; its amount is the allocation's used amount; no receipt (issuer, saga, step) is billed
 * twice, in one pool or across the pools checked together (`verifyPools`); and the pool's allocated amount is the sum
 * of the active allocations' amounts and the released allocations' used amounts.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { type CommitReceipt, type KeySource, verify as verifyToken } from "./CommitToken.js"
import type { Keys } from "./Keys.js"
import { formatUsdString, type Micros, parseUsd } from "./Money.js"

/** An allocation as the ledger lists it (the fields reconciliation reads; amounts in USD). */
export interface ListedAllocation {
  readonly allocationId: string
  /** The DID the allocation's child mandate was granted to: the one agent whose receipt can back it. */
  readonly grantee: string
  /** The key the allocation was made under; a receipt backs it only for `<sagaId>:<step>` equal to it. */
  readonly idempotencyKey: string
  readonly amountUsd: number
  readonly usedUsd: number | null
  readonly status: "active" | "released"
  readonly commitToken?: string | undefined
}

/** A pool as the ledger reports it (the fields reconciliation reads). */
export interface ListedPool {
  readonly poolId: string
  readonly allocatedUsd: number
}

/** Why one line of the trail does not reconcile. */
export type FailureCode =
  | "MISSING_COMMIT_TOKEN"
  | "MALFORMED_TOKEN"
  | "SIGNATURE_INVALID"
  | "KEY_NOT_FOUND"
  | "KEY_REVOKED"
  | "RESOLVER_UNAVAILABLE"
  | "AMOUNT_MISMATCH"
  | "ISSUER_MISMATCH"
  | "STEP_MISMATCH"
  | "DUPLICATE_RECEIPT"
  | "INVALID_AMOUNT"
  | "TOTAL_MISMATCH"

/** One failure; `allocationId` is absent for the pool's total. */
export interface Failure {
  readonly code: FailureCode
  readonly allocationId?: string
  readonly message: string
}

/** The outcome: the receipts that verified, the totals recomputed, and every failure. */
export interface Report {
  /** True when there is no failure. */
  readonly ok: boolean
  readonly poolId: string
  /** Verified receipts by allocation id. */
  readonly receipts: ReadonlyMap<string, CommitReceipt>
  /** The pool's allocated amount as the rows add up (active amounts + released used amounts), USD decimal string. */
  readonly allocatedUsd: string
  /** What the released allocations used, USD decimal string. */
  readonly usedUsd: string
  readonly failures: ReadonlyArray<Failure>
}

/** Checks a pool's allocation list offline; never fails, every problem is a line of the report. */
export const verify = (
  allocations: ReadonlyArray<ListedAllocation>,
  pool: ListedPool,
  resolveKey: KeySource
): Effect.Effect<Report, never, Keys> => check(allocations, pool, resolveKey, new Map())

/**
 * Checks several pools' lists together, one report each: a receipt billed in two pools (the same signed work released
 * twice) is a `DUPLICATE_RECEIPT` on the second, which checking each pool alone cannot see.
 */
export const verifyPools = (
  trails: ReadonlyArray<{ readonly allocations: ReadonlyArray<ListedAllocation>; readonly pool: ListedPool }>,
  resolveKey: KeySource
): Effect.Effect<ReadonlyArray<Report>, never, Keys> =>
  Effect.suspend(() => {
    const billed = new Map<string, string>()
    return Effect.forEach(trails, (t) => check(t.allocations, t.pool, resolveKey, billed))
  })

/** One pool's checks, with the receipts already billed (receipt id → where) shared by the pools checked together. */
const check = (
  allocations: ReadonlyArray<ListedAllocation>,
  pool: ListedPool,
  resolveKey: KeySource,
  billed: Map<string, string>
): Effect.Effect<Report, never, Keys> =>
  Effect.gen(function* () {
    const failures: Array<Failure> = []
    const receipts = new Map<string, CommitReceipt>()
    let allocated = 0
    let used = 0
    const micros = (usd: number, what: string, allocationId?: string): Micros | undefined => {
      const m = parseUsd(usd)
      if (Either.isRight(m)) return m.right
      failures.push({ code: "INVALID_AMOUNT", ...(allocationId === undefined ? {} : { allocationId }), message: `${what}: ${m.left.message}` })
      return undefined
    }
    for (const a of allocations) {
      const id = a.allocationId
      const amount = micros(a.amountUsd, "amountUsd", id) ?? 0
      const spent = a.status === "released" ? (micros(a.usedUsd ?? 0, "usedUsd", id) ?? 0) : undefined
      allocated += spent ?? amount
      used += spent ?? 0
      if (a.commitToken === undefined) {
        if (spent !== undefined && spent > 0) {
          failures.push({ code: "MISSING_COMMIT_TOKEN", allocationId: id, message: `${formatUsdString(spent as Micros)} USD used without a commit token` })
        }
        continue
      }
      const receipt = yield* Effect.either(verifyToken(a.commitToken, resolveKey))
      if (Either.isLeft(receipt)) {
        const code = receipt.left.code === "INVALID_RECEIPT" ? "MALFORMED_TOKEN" : receipt.left.code
        failures.push({ code, allocationId: id, message: receipt.left.message })
        continue
      }
      const r = receipt.right
      receipts.set(id, r)
      if (r.issuer !== a.grantee.toLowerCase()) {
        failures.push({ code: "ISSUER_MISMATCH", allocationId: id, message: "the token is signed by another agent than the allocation's grantee" })
      }
      if (`${r.sagaId}:${r.step}` !== a.idempotencyKey) {
        failures.push({ code: "STEP_MISMATCH", allocationId: id, message: "the token's saga and step (<sagaId>:<step>) are not the allocation's idempotency key" })
      }
      const signed = Either.getOrUndefined(parseUsd(r.amountUsd))
      if (signed !== (spent ?? -1)) {
        failures.push({
          code: "AMOUNT_MISMATCH",
          allocationId: id,
          message: spent === undefined ? `a commit token on an allocation still active` : `the token signs ${r.amountUsd} USD, the ledger used ${formatUsdString(spent as Micros)} USD`
        })
      }
      const receiptId = JSON.stringify([r.issuer, r.sagaId, r.step])
      const earlier = billed.get(receiptId)
      if (earlier !== undefined) {
        failures.push({ code: "DUPLICATE_RECEIPT", allocationId: id, message: `saga ${r.sagaId} step ${r.step} by ${r.issuer} is billed on ${earlier} too` })
      } else billed.set(receiptId, `${pool.poolId}/${id}`)
    }
    const ledgerTotal = micros(pool.allocatedUsd, "the pool's allocatedUsd")
    if (ledgerTotal !== undefined && ledgerTotal !== allocated) {
      failures.push({
        code: "TOTAL_MISMATCH",
        message: `the pool says ${formatUsdString(ledgerTotal)} USD allocated; its allocations add up to ${formatUsdString(allocated as Micros)} USD`
      })
    }
    return {
      ok: failures.length === 0,
      poolId: pool.poolId,
      receipts,
      allocatedUsd: formatUsdString(allocated as Micros),
      usedUsd: formatUsdString(used as Micros),
      failures
    }
  })
