/**
 * The spending ledger: a budget pool per parent spending mandate, from which child mandates get allocations, so a
 * parent budget is never over-allocated. Allocation and release are each one statement (no read-then-write), so
 * they stay exact across fibers and across processes sharing one database: on SQLite an INSERT whose triggers take
 * from the pool, on Postgres a conditional UPDATE of the pool row feeding the INSERT in one CTE (`reserve`).
 *
 * A pool belongs to the grantee of its mandate, never to whoever posted the token first: every child carries the
 * parent token in `prf`, so anyone downstream holds it. Each operation therefore takes the DID the request proved
 * (docs/hub.md, "Spending ledger") and refuses everyone but the grantee, before anything is read back or written.
 *
 * The ledger fails with errors named after what happened (`BudgetExhausted`, `NotGrantee`, …), each carrying the
 * spec's `code`; it knows no HTTP. `HubHttp` maps them to the hub's HTTP errors, and its SQL failures arrive
 * classified (`SqlFailure`), so a budget trigger or a second allocation of a child is recognised by reason, not text.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import { allocationsMade, allocationsRefused, allocationsReplayed } from "../core/MeshMetrics.js"
import { traced } from "../http/Tracing.js"
import { HotReads, PgHotStatements } from "../sql/Database.js"
import { classify, isReason, isTriggerAbort, type PersistenceError, summarize } from "../sql/SqlFailure.js"
import * as CommitToken from "../core/CommitToken.js"
import { normalizeDid } from "../core/Did.js"
import { KeyResolver } from "../core/KeyResolver.js"
import type { Keys } from "../core/Keys.js"
import { decodeUnverified, type Mandate, verifyMandate } from "../core/Mandate.js"
import { formatUsd, type Micros, parseUsd } from "../core/Money.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { base32 } from "multiformats/bases/base32"
import { toBase64Url, utf8 } from "../core/internal/bytes.js"
import { Entropy } from "../core/Entropy.js"
import { Allocation, Pool, PoolAllocations } from "./LedgerWire.js"

export { Allocation, Pool, PoolAllocations } from "./LedgerWire.js"

/** No pool under that id (`NOT_FOUND`). */
export class PoolNotFound extends Data.TaggedError("PoolNotFound")<{ readonly code: "NOT_FOUND"; readonly message: string }> {}

/** No allocation under that id (`NOT_FOUND`). */
export class AllocationNotFound extends Data.TaggedError("AllocationNotFound")<{ readonly code: "NOT_FOUND"; readonly message: string }> {}

/** The request did not prove the pool mandate's grantee (`NOT_OWNER`). */
export class NotGrantee extends Data.TaggedError("NotGrantee")<{ readonly code: "NOT_OWNER"; readonly message: string }> {}

/** A parent or child mandate does not verify, is of the wrong kind, or is not attenuated from the pool's (`MANDATE_INVALID`). */
export class MandateRefused extends Data.TaggedError("MandateRefused")<{ readonly code: "MANDATE_INVALID"; readonly message: string }> {}

/** A spend limit or a used amount is not a valid USD amount, or exceeds the allocation (`INVALID_AMOUNT`). */
export class InvalidAmount extends Data.TaggedError("InvalidAmount")<{ readonly code: "INVALID_AMOUNT"; readonly message: string }> {}

/** The idempotency key is empty or too long (`INVALID_REQUEST`). */
export class InvalidIdempotencyKey extends Data.TaggedError("InvalidIdempotencyKey")<{ readonly code: "INVALID_REQUEST"; readonly message: string }> {}

/** The pool cannot cover the allocation (`BUDGET_EXHAUSTED`). */
export class BudgetExhausted extends Data.TaggedError("BudgetExhausted")<{ readonly code: "BUDGET_EXHAUSTED"; readonly message: string }> {}

/** The child mandate already has an allocation from this pool (`ALREADY_ALLOCATED`). */
export class AlreadyAllocated extends Data.TaggedError("AlreadyAllocated")<{ readonly code: "ALREADY_ALLOCATED"; readonly message: string }> {}

/** The idempotency key was used for another child mandate (`IDEMPOTENCY_KEY_REUSED`). */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<{ readonly code: "IDEMPOTENCY_KEY_REUSED"; readonly message: string }> {}

/**
 * A commit token given with a release proves nothing about this allocation (`INVALID_COMMIT_TOKEN`: it does not
 * verify under its issuer's key, its issuer is not the allocation's grantee, its saga and step are not the
 * allocation's idempotency key, or its amount is not `usedUsd`), or it already backs another allocation
 * (`COMMIT_TOKEN_REUSED`).
 */
export class CommitTokenRefused extends Data.TaggedError("CommitTokenRefused")<{
  readonly code: "INVALID_COMMIT_TOKEN" | "COMMIT_TOKEN_REUSED"
  readonly message: string
}> {}

/** The allocation was already released (`ALREADY_REVOKED`). */
export class AlreadyReleased extends Data.TaggedError("AlreadyReleased")<{ readonly code: "ALREADY_REVOKED"; readonly message: string }> {}

/**
 * The ledger could not decide: its database failed (`cause` is the classified `PersistenceError`) or the key
 * resolver could not answer (`STORE_UNAVAILABLE`; the caller retries).
 */
export class LedgerUnavailable extends Data.TaggedError("LedgerUnavailable")<{
  readonly code: "STORE_UNAVAILABLE"
  readonly message: string
  readonly cause?: PersistenceError | undefined
}> {}

/** Every way a ledger operation fails. */
export type LedgerError =
  | PoolNotFound
  | AllocationNotFound
  | NotGrantee
  | MandateRefused
  | InvalidAmount
  | InvalidIdempotencyKey
  | BudgetExhausted
  | AlreadyAllocated
  | IdempotencyKeyReused
  | AlreadyReleased
  | CommitTokenRefused
  | LedgerUnavailable

/**
 * The DID a request proved it acts for (a signature by its key, or an API key bound to it), or undefined when it
 * proved none. Only the grantee of a pool's mandate may act on the pool.
 */
export type Actor = string | undefined

/** The operations of the ledger; each refuses (`NotGrantee`) an actor other than the pool mandate's grantee. */
export interface LedgerApi {
  /** Opens (or returns the open) pool of a verified intent or cart mandate; its size is the mandate's spend limit. */
  readonly openPool: (actor: Actor, parentToken: string) => Effect.Effect<Pool, NotGrantee | MandateRefused | InvalidAmount | LedgerUnavailable>
  /** The pools whose mandate was granted to the actor, oldest first (at most `MAX_LISTED_POOLS`). */
  readonly pools: (actor: Actor) => Effect.Effect<ReadonlyArray<Pool>, NotGrantee | LedgerUnavailable>
  /** Reads a pool. */
  readonly pool: (actor: Actor, poolId: string) => Effect.Effect<Pool, PoolNotFound | NotGrantee | LedgerUnavailable>
  /**
   * Allocates to a child mandate attenuated from the pool's mandate, for the child's whole limit (its
   * `spendLimitUsd`, or `amountUsd` for a payment). The same idempotency key returns the same allocation.
   */
  readonly allocate: (
    actor: Actor,
    poolId: string,
    input: { readonly childToken: string; readonly idempotencyKey: string }
  ) => Effect.Effect<
    Allocation,
    | InvalidIdempotencyKey
    | PoolNotFound
    | NotGrantee
    | MandateRefused
    | InvalidAmount
    | BudgetExhausted
    | AlreadyAllocated
    | IdempotencyKeyReused
    | LedgerUnavailable
  >
  /**
   * Releases an allocation; what was not used returns to the pool. Only once. A `commitToken` (the agent's signed
   * receipt for the work) is kept with the allocation; it must decode and name `usedUsd` as its amount. Its
   * signature is checked offline, by whoever reconciles the pool (`Reconciliation.verify`).
   */
  readonly release: (
    actor: Actor,
    allocationId: string,
    input: { readonly usedUsd: number | string; readonly commitToken?: string | undefined }
  ) => Effect.Effect<
    { readonly allocation: Allocation; readonly pool: Pool },
    AllocationNotFound | PoolNotFound | NotGrantee | InvalidAmount | AlreadyReleased | CommitTokenRefused | LedgerUnavailable
  >
  /** A pool and every allocation made from it, with used amounts and commit tokens (its mandate's grantee only). */
  readonly allocations: (actor: Actor, poolId: string) => Effect.Effect<PoolAllocations, PoolNotFound | NotGrantee | LedgerUnavailable>
}

/** Most pools `pools` lists for one grantee. */
export const MAX_LISTED_POOLS = 200

/** The `Ledger` service. */
export class Ledger extends Context.Tag("agent-mesh/Ledger")<Ledger, LedgerApi>() {}

const PoolRow = Schema.Struct({
  id: Schema.String,
  token: Schema.String,
  grantor: Schema.String,
  grantee: Schema.String,
  limit_micros: Schema.Number,
  allocated_micros: Schema.Number,
  expires_at: Schema.Number,
  opened_by: Schema.String,
  created_at: Schema.Number
})
type PoolRow = typeof PoolRow.Type

/** An allocation as stored. */
export const AllocationRow = Schema.Struct({
  id: Schema.String,
  pool_id: Schema.String,
  idempotency_key: Schema.String,
  child_jti: Schema.String,
  grantee: Schema.String,
  amount_micros: Schema.Number,
  used_micros: Schema.NullOr(Schema.Number),
  created_at: Schema.Number,
  released_at: Schema.NullOr(Schema.Number),
  commit_token: Schema.optional(Schema.NullOr(Schema.String)),
  receipt: Schema.optional(Schema.NullOr(Schema.String))
})
/** An allocation as stored. */
export type AllocationRow = typeof AllocationRow.Type

const toPool = (r: PoolRow): Pool => ({
  poolId: r.id,
  grantor: r.grantor,
  grantee: r.grantee,
  limitUsd: formatUsd(r.limit_micros as Micros),
  allocatedUsd: formatUsd(r.allocated_micros as Micros),
  remainingUsd: formatUsd((r.limit_micros - r.allocated_micros) as Micros),
  expiresAt: new Date(r.expires_at * 1000).toISOString()
})

const toAllocation = (r: AllocationRow): Allocation => ({
  allocationId: r.id,
  poolId: r.pool_id,
  idempotencyKey: r.idempotency_key,
  childJti: r.child_jti,
  grantee: r.grantee,
  amountUsd: formatUsd(r.amount_micros as Micros),
  usedUsd: r.used_micros === null ? null : formatUsd(r.used_micros as Micros),
  releasedUsd: r.used_micros === null ? null : formatUsd((r.amount_micros - r.used_micros) as Micros),
  status: r.released_at === null ? "active" : "released",
  ...(r.commit_token === undefined || r.commit_token === null ? {} : { commitToken: r.commit_token })
})

const mandateInvalid = (message: string) => new MandateRefused({ code: "MANDATE_INVALID", message })
const invalidAmount = (message: string) => new InvalidAmount({ code: "INVALID_AMOUNT", message })
const unavailable = (message: string, cause?: PersistenceError) => new LedgerUnavailable({ code: "STORE_UNAVAILABLE", message, cause })
const storeFailed = (e: PersistenceError) => unavailable(summarize(e), e)

// The same answer whatever the actor is, so a refusal tells nothing about whose pool it is.
const notGrantee = () =>
  new NotGrantee({
    code: "NOT_OWNER",
    message: "only the grantee of the pool's mandate may use the pool: sign the request with its key, or use an API key bound to its DID"
  })

/** Passes only the grantee of the pool's mandate. */
const ownedBy = (actor: Actor, grantee: string): Effect.Effect<void, NotGrantee> =>
  actor !== undefined && actor === grantee ? Effect.void : Effect.fail(notGrantee())

/** The spend limit a spending mandate grants: `spendLimitUsd` (intent, cart) or `amountUsd` (payment). */
const limitOf = (m: Mandate): Either.Either<Micros, MandateRefused | InvalidAmount> => {
  const c = m.constraints as { readonly spendLimitUsd?: number; readonly amountUsd?: number }
  const usd = m.kind === "payment" ? c.amountUsd : c.spendLimitUsd
  if (usd === undefined) return Either.left(mandateInvalid(`a ${m.kind} mandate has no spend limit`))
  return Either.mapLeft(parseUsd(usd), (e) => invalidAmount(e.message))
}

/** The ledger on a migrated `SqlClient`, verifying mandates through the `KeyResolver`. */
export const make: Effect.Effect<LedgerApi, never, SqlClient.SqlClient | KeyResolver | Keys> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const resolver = yield* KeyResolver
  const context = yield* Effect.context<Keys>()
  const q = <A>(e: Effect.Effect<A, unknown>): Effect.Effect<A, LedgerUnavailable> => Effect.mapError(e, (f) => storeFailed(classify(f)))
  const decodePool = Schema.decodeUnknownSync(PoolRow)
  const decodeAllocation = Schema.decodeUnknownSync(AllocationRow)
  const pgHot = Option.getOrUndefined(yield* Effect.serviceOption(PgHotStatements))
  const fast = Option.getOrUndefined(
    Option.orElse(Option.map(yield* Effect.serviceOption(HotReads), reserveFast), () => Option.fromNullable(pgHot === undefined ? undefined : reservePg(pgHot)))
  )
  /** Rows of a read on every allocation: a prepared statement on Postgres, `SqlClient` elsewhere. */
  const read = (name: string, text: string, fallback: Effect.Effect<ReadonlyArray<unknown>, unknown>, ...values: ReadonlyArray<string>) =>
    q(pgHot === undefined ? fallback : pgHot.query(name, text, values))

  const verify = (token: string, kinds: ReadonlyArray<Mandate["kind"]>) =>
    verifyMandate(token, resolver, { kinds }).pipe(
      Effect.provide(context),
      // A resolver that could not answer says nothing about the mandate: 503, so the caller retries.
      Effect.mapError((e) => (e.reason === "RESOLVER_UNAVAILABLE" ? unavailable(e.message) : mandateInvalid(`${e.reason}: ${e.message}`)))
    )

  /**
   * The receipt a release's commit token proves, as stored: the token verifies under its issuer's registered key, the
   * issuer is the allocation's grantee (the agent its child mandate paid), its saga and step are the allocation's
   * idempotency key (`<sagaId>:<step>`), and its amount is what the release says was used.
   */
  const receiptFor = (token: string, alloc: AllocationRow, used: Micros): Effect.Effect<string, CommitTokenRefused | LedgerUnavailable> =>
    Effect.gen(function* () {
      const refused = (message: string) => new CommitTokenRefused({ code: "INVALID_COMMIT_TOKEN", message })
      const r = yield* CommitToken.verify(token, resolver).pipe(
        Effect.provide(context),
        Effect.mapError((e) => (e.code === "RESOLVER_UNAVAILABLE" ? unavailable(e.message) : refused(`${e.code}: ${e.message}`)))
      )
      if (r.issuer !== (normalizeDid(alloc.grantee) ?? alloc.grantee)) return yield* Effect.fail(refused("the commit token is signed by another agent than the allocation's grantee"))
      if (`${r.sagaId}:${r.step}` !== alloc.idempotency_key) {
        return yield* Effect.fail(refused("the commit token's saga and step (<sagaId>:<step>) are not the allocation's idempotency key"))
      }
      const amount = parseUsd(r.amountUsd)
      if (Either.isLeft(amount) || amount.right !== used) return yield* Effect.fail(refused(`the commit token is for ${r.amountUsd} USD, the release for ${formatUsd(used)} USD`))
      return JSON.stringify([r.issuer, r.sagaId, r.step])
    })

  const poolRow = (id: string) =>
    read("mesh_pool_by_id", "SELECT * FROM mesh_pools WHERE id = $1", sql`SELECT * FROM mesh_pools WHERE id = ${id}`, id).pipe(
      Effect.flatMap((rows) => (rows.length === 0 ? Effect.fail(new PoolNotFound({ code: "NOT_FOUND", message: `no pool ${id}` })) : Effect.succeed(decodePool(rows[0]))))
    )

  const allocationByChild = (poolId: string, childJti: string) =>
    read("mesh_allocation_by_child", "SELECT * FROM mesh_allocations WHERE pool_id = $1 AND child_jti = $2",
      sql`SELECT * FROM mesh_allocations WHERE pool_id = ${poolId} AND child_jti = ${childJti}`, poolId, childJti).pipe(
      Effect.map((rows) => (rows.length === 0 ? undefined : decodeAllocation(rows[0])))
    )

  const allocationByKey = (poolId: string, key: string) =>
    read("mesh_allocation_by_key", "SELECT * FROM mesh_allocations WHERE pool_id = $1 AND idempotency_key = $2",
      sql`SELECT * FROM mesh_allocations WHERE pool_id = ${poolId} AND idempotency_key = ${key}`, poolId, key).pipe(
      Effect.map((rows) => (rows.length === 0 ? undefined : decodeAllocation(rows[0])))
    )

  return instrument({
    openPool: (actor, token) =>
      Effect.gen(function* () {
        const m = yield* verify(token, ["intent", "cart"])
        // Before the insert: a refused opener must not leave a pool behind, nor learn whether one exists.
        yield* ownedBy(actor, m.grantee)
        const limit = yield* limitOf(m)
        const now = yield* Clock.currentTimeMillis
        // The id comes from the exact signed token, so nobody can claim another grantor's pool with a reused jti.
        const id = poolIdOf(token)
        yield* q(sql`INSERT INTO mesh_pools ${sql.insert({
          id, token, grantor: m.grantor, grantee: m.grantee, limit_micros: limit, allocated_micros: 0,
          expires_at: m.expiresAt, opened_by: m.grantee, created_at: now
        })} ON CONFLICT (id) DO NOTHING`)
        return toPool(yield* Effect.catchTag(poolRow(id), "PoolNotFound", () => Effect.die("pool vanished after insert")))
      }),
    pools: (actor) =>
      actor === undefined
        ? Effect.fail(notGrantee())
        : Effect.map(
          q(sql`SELECT * FROM mesh_pools WHERE grantee = ${actor} ORDER BY created_at, id LIMIT ${MAX_LISTED_POOLS}`),
          (rows) => rows.map((r) => toPool(decodePool(r)))
        ),
    pool: (actor, id) =>
      Effect.flatMap(poolRow(id), (row) => Effect.as(ownedBy(actor, row.grantee), toPool(row))),
    allocate: (actor, poolId, input) =>
      Effect.gen(function* () {
        if (input.idempotencyKey.length === 0 || input.idempotencyKey.length > 200) {
          return yield* Effect.fail(new InvalidIdempotencyKey({ code: "INVALID_REQUEST", message: "idempotencyKey must be 1 to 200 characters" }))
        }
        const pool = yield* poolRow(poolId)
        // Before the idempotent answer too: an earlier allocation is the grantee's to see.
        yield* ownedBy(actor, pool.grantee)
        // A retry is answered from the record before anything is verified or counted again.
        const settled = (row: AllocationRow, childJti: string | undefined) =>
          row.child_jti === childJti
            ? Effect.succeed(toAllocation(row))
            : Effect.fail(new IdempotencyKeyReused({ code: "IDEMPOTENCY_KEY_REUSED", message: "this idempotency key was used for another child mandate" }))
        // The child is read for its jti only when there is an earlier allocation to compare it with.
        const byKey = yield* allocationByKey(poolId, input.idempotencyKey)
        if (byKey !== undefined) return yield* Effect.tap(settled(byKey, childJtiOf(input.childToken)), () => Metric.increment(allocationsReplayed))
        const child = yield* verify(input.childToken, ["cart", "payment"])
        if (child.parent === undefined || child.parent.token !== pool.token) {
          return yield* Effect.fail(mandateInvalid("the child mandate is not attenuated from this pool's mandate"))
        }
        const alreadyAllocated = () =>
          new AlreadyAllocated({ code: "ALREADY_ALLOCATED", message: `child mandate ${child.jti} already has an allocation from this pool` })
        if ((yield* allocationByChild(poolId, child.jti)) !== undefined) return yield* Effect.fail(alreadyAllocated())
        const amount = yield* limitOf(child)
        const id = `alloc_${toBase64Url((yield* Entropy).bytes(12))}`
        const now = yield* Clock.currentTimeMillis
        const row = {
          id, pool_id: poolId, idempotency_key: input.idempotencyKey, child_jti: child.jti, grantee: child.grantee,
          amount_micros: amount, used_micros: null, created_at: now, released_at: null
        }
        const outcome = yield* Effect.mapError(fast === undefined ? reserve(sql, row) : fast(row), storeFailed)
        // Whatever happened, a concurrent request with the same key may have won: its allocation is the answer.
        const winner = yield* allocationByKey(poolId, input.idempotencyKey)
        if (winner !== undefined) return yield* Effect.tap(settled(winner, child.jti), () => Metric.increment(outcome === "allocated" ? allocationsMade : allocationsReplayed))
        if (outcome === "duplicate-child") return yield* Effect.fail(alreadyAllocated())
        if (outcome === "exhausted") {
          return yield* Effect.fail(new BudgetExhausted({ code: "BUDGET_EXHAUSTED", message: `pool ${poolId} cannot cover ${formatUsd(amount)} USD` }))
        }
        return yield* Effect.die(`allocation ${id} vanished`)
      }),
    release: (actor, allocationId, input) =>
      Effect.gen(function* () {
        const used = parseUsd(input.usedUsd)
        if (Either.isLeft(used)) return yield* Effect.fail(invalidAmount(used.left.message))
        const rows = yield* q(sql`SELECT * FROM mesh_allocations WHERE id = ${allocationId}`)
        if (rows.length === 0) return yield* Effect.fail(new AllocationNotFound({ code: "NOT_FOUND", message: `no allocation ${allocationId}` }))
        const alloc = decodeAllocation(rows[0])
        const pool = yield* poolRow(alloc.pool_id)
        yield* ownedBy(actor, pool.grantee)
        if (used.right > alloc.amount_micros) {
          return yield* Effect.fail(invalidAmount("usedUsd exceeds the allocation"))
        }
        const commitToken = input.commitToken ?? null
        const receipt = commitToken === null ? null : yield* receiptFor(commitToken, alloc, used.right)
        if (receipt !== null) {
          const holder = yield* q(sql<{ id: string }>`SELECT id FROM mesh_allocations WHERE receipt = ${receipt} AND id <> ${allocationId}`)
          if (holder.length > 0) return yield* Effect.fail(reused())
        }
        const now = yield* Clock.currentTimeMillis
        const released = yield* releaseStatement(sql, allocationId, used.right, now, commitToken, receipt).pipe(
          // Two releases racing with one receipt: the unique index lets one through.
          Effect.catchIf(isReason("UniqueViolation"), () => Effect.fail(reused())),
          Effect.mapError((e) => (e instanceof CommitTokenRefused ? e : storeFailed(e)))
        )
        if (released.length === 0) return yield* Effect.fail(new AlreadyReleased({ code: "ALREADY_REVOKED", message: `allocation ${allocationId} was already released` }))
        return { allocation: toAllocation(decodeAllocation(released[0])), pool: toPool(yield* poolRow(alloc.pool_id)) }
      }),
    allocations: (actor, poolId) =>
      Effect.gen(function* () {
        const pool = yield* poolRow(poolId)
        yield* ownedBy(actor, pool.grantee)
        // Pool and allocations in one read transaction, so the totals a reconciler compares are of one moment (on
        // Postgres that takes REPEATABLE READ: under READ COMMITTED each statement would see its own moment).
        const snapshot = sql.onDialectOrElse({ pg: () => sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`, orElse: () => Effect.succeed([]) })
        const [, poolNow, rows] = yield* q(
          sql.withTransaction(
            Effect.all([snapshot, sql`SELECT * FROM mesh_pools WHERE id = ${poolId}`, sql`SELECT * FROM mesh_allocations WHERE pool_id = ${poolId} ORDER BY created_at, id`])
          )
        )
        const allocations = rows.map((r) => decodeAllocation(r))
        const used = allocations.reduce((sum, a) => sum + (a.released_at === null ? 0 : (a.used_micros ?? 0)), 0)
        return { pool: toPool(decodePool(poolNow[0])), usedUsd: formatUsd(used as Micros), allocations: allocations.map(toAllocation) }
      })
  })
})

/** Each operation in a span (while tracing), allocations counted by outcome (`core/MeshMetrics.ts`). */
const instrument = (api: LedgerApi): LedgerApi => ({
  openPool: (actor, token) => traced("ledger.openPool")(api.openPool(actor, token)),
  pools: (actor) => traced("ledger.pools")(api.pools(actor)),
  pool: (actor, id) => traced("ledger.pool", { attributes: { "mesh.pool_id": id } })(api.pool(actor, id)),
  allocate: (actor, poolId, input) =>
    api.allocate(actor, poolId, input).pipe(
      Effect.tapError(() => Metric.increment(allocationsRefused)),
      traced("ledger.allocate", { attributes: { "mesh.pool_id": poolId } })
    ),
  release: (actor, allocationId, input) => traced("ledger.release", { attributes: { "mesh.allocation_id": allocationId } })(api.release(actor, allocationId, input)),
  allocations: (actor, poolId) => traced("ledger.allocations", { attributes: { "mesh.pool_id": poolId } })(api.allocations(actor, poolId))
})

const reused = () => new CommitTokenRefused({ code: "COMMIT_TOKEN_REUSED", message: "the commit token already backs another allocation" })

/** What one allocation statement did: inserted, lost a race on its idempotency key, or was refused. */
export type ReserveOutcome = "allocated" | "raced" | "exhausted" | "duplicate-child"

/**
 * The refusals an allocation statement expects, by classified reason: migration 0005's trigger aborting with
 * `BUDGET_EXHAUSTED`, a second allocation of one child (another idempotency key) hitting the unique (pool, child)
 * index, and on Postgres a concurrent insert of the same idempotency key (its constraint named in the baseline).
 * Anything else stays a failure of the store.
 */
const expectedRefusal = (e: PersistenceError): Effect.Effect<ReserveOutcome, PersistenceError> =>
  isTriggerAbort("BUDGET_EXHAUSTED")(e)
    ? Effect.succeed("exhausted")
    : isReason("UniqueViolation")(e)
      ? Effect.succeed(e.constraint === "mesh_allocations_pool_key" ? "raced" : "duplicate-child")
      : Effect.fail(e)

/**
 * The allocation itself, one statement. On SQLite an INSERT: migration 0005's triggers take the amount from the
 * pool in the same statement, or abort it when the pool cannot cover it; a conflict on the idempotency key inserts
 * nothing ("raced": the caller reads back the winner). On Postgres a CTE (below). A single statement is atomic, so
 * fibers and processes sharing the database can never over-allocate, and there is no transaction to hold.
 */
export const reserve = (
  sql: SqlClient.SqlClient,
  row: typeof AllocationRow.Encoded
): Effect.Effect<ReserveOutcome, PersistenceError> =>
  sql.onDialectOrElse({
    // The pool row's conditional UPDATE feeds the INSERT: no covering pool, no row to insert ("exhausted"). Under
    // READ COMMITTED a second writer waits for the row lock, then re-checks the WHERE against the committed amount,
    // so the pool cannot be over-allocated however many hubs write. A unique violation (the same key or child
    // concurrently) aborts the whole statement, the pool's part with it; the constraint's name says which.
    pg: () =>
      sql<{ id: string }>`WITH taken AS (
          UPDATE mesh_pools SET allocated_micros = allocated_micros + ${row.amount_micros}
          WHERE id = ${row.pool_id} AND allocated_micros + ${row.amount_micros} <= limit_micros RETURNING id
        )
        INSERT INTO mesh_allocations (id, pool_id, idempotency_key, child_jti, grantee, amount_micros, used_micros, created_at, released_at)
        SELECT ${row.id}, taken.id, ${row.idempotency_key}, ${row.child_jti}, ${row.grantee}, CAST(${row.amount_micros} AS BIGINT), NULL,
          CAST(${row.created_at} AS BIGINT), NULL FROM taken
        RETURNING id`.pipe(Effect.map((rows): ReserveOutcome => (rows.length === 0 ? "exhausted" : "allocated"))),
    orElse: () =>
      sql`INSERT INTO mesh_allocations ${sql.insert(row)} ON CONFLICT (pool_id, idempotency_key) DO NOTHING RETURNING id`.pipe(
        Effect.map((rows): ReserveOutcome => (rows.length === 0 ? "raced" : "allocated"))
      )
  }).pipe(Effect.mapError(classify), Effect.catchAll(expectedRefusal))

const RESERVE_SQL = `INSERT INTO mesh_allocations (id, pool_id, idempotency_key, child_jti, grantee, amount_micros, used_micros, created_at, released_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pool_id, idempotency_key) DO NOTHING RETURNING id`

/** `reserve` as one prepared statement on the `HotReads` connection: the same statement, without SqlClient's cost. */
export const reserveFast = (reads: HotReads["Type"]): ((row: typeof AllocationRow.Encoded) => Effect.Effect<ReserveOutcome, PersistenceError>) => {
  const insert = reads.prepareGet<{ id: string }>(RESERVE_SQL)
  return (row) =>
    Effect.try({
      try: (): ReserveOutcome =>
        insert(row.id, row.pool_id, row.idempotency_key, row.child_jti, row.grantee, row.amount_micros, row.used_micros, row.created_at, row.released_at) ===
          undefined
          ? "raced"
          : "allocated",
      catch: classify
    }).pipe(Effect.catchAll(expectedRefusal))
}

/**
 * The release itself, one statement that only the first release matches (a second waits for the first's row lock,
 * then finds it released): the unused part goes back to the pool in the same statement, by migration 0007's trigger
 * on SQLite and by the CTE's second UPDATE on Postgres. It returns the released row (none if it was released).
 */
export const releaseStatement = (
  sql: SqlClient.SqlClient,
  allocationId: string,
  usedMicros: number,
  now: number,
  commitToken: string | null,
  receipt: string | null = null
): Effect.Effect<ReadonlyArray<unknown>, PersistenceError> =>
  sql.onDialectOrElse({
    pg: () =>
      sql`WITH released AS (
          UPDATE mesh_allocations SET used_micros = ${usedMicros}, released_at = ${now}, commit_token = ${commitToken}, receipt = ${receipt}
          WHERE id = ${allocationId} AND released_at IS NULL RETURNING *
        ), returned AS (
          UPDATE mesh_pools p SET allocated_micros = p.allocated_micros - (r.amount_micros - r.used_micros)
          FROM released r WHERE p.id = r.pool_id RETURNING p.id
        )
        SELECT * FROM released`,
    orElse: () =>
      sql`UPDATE mesh_allocations SET used_micros = ${usedMicros}, released_at = ${now}, commit_token = ${commitToken}, receipt = ${receipt}
        WHERE id = ${allocationId} AND released_at IS NULL RETURNING *`
  }).pipe(Effect.mapError(classify))

const RESERVE_POSTGRES = `WITH taken AS (
    UPDATE mesh_pools SET allocated_micros = allocated_micros + $1
    WHERE id = $2 AND allocated_micros + $1 <= limit_micros RETURNING id
  )
  INSERT INTO mesh_allocations (id, pool_id, idempotency_key, child_jti, grantee, amount_micros, used_micros, created_at, released_at)
  SELECT $3, taken.id, $4, $5, $6, CAST($1 AS BIGINT), NULL, CAST($7 AS BIGINT), NULL FROM taken
  RETURNING id`

/** `reserve`'s Postgres statement, prepared on `PgHotStatements`: the same statement, without SqlClient's cost. */
export const reservePg = (hot: PgHotStatements["Type"]): ((row: typeof AllocationRow.Encoded) => Effect.Effect<ReserveOutcome, PersistenceError>) =>
  (row) =>
    hot.query("mesh_reserve", RESERVE_POSTGRES, [row.amount_micros, row.pool_id, row.id, row.idempotency_key, row.child_jti, row.grantee, row.created_at]).pipe(
      Effect.map((rows): ReserveOutcome => (rows.length === 0 ? "exhausted" : "allocated")),
      Effect.mapError(classify),
      Effect.catchAll(expectedRefusal)
    )

/** A pool's id: base32 of the first 15 bytes of SHA-256 over the exact parent token. */
export const poolIdOf = (token: string): string => `pool_${base32.baseEncode(sha256(utf8(token)).subarray(0, 15))}`

/** The jti a token names, read without verification (only to answer an idempotent retry). */
const childJtiOf = (token: string): string | undefined => Either.getOrUndefined(Either.map(decodeUnverified(token), (m) => m.jti))

/** The ledger on SQL; needs a migrated `SqlClient`, a `KeyResolver` and `Keys`. */
export const layer: Layer.Layer<Ledger, never, SqlClient.SqlClient | KeyResolver | Keys> = Layer.effect(Ledger, make)
