/**
 * What the ledger reports on the wire: pools and allocations. `Ledger` keeps them in SQL; `HubApi` and `MeshClient`
 * need only these shapes, so they import no SQL.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Schema from "effect/Schema"

/** A pool as the ledger reports it (amounts in USD). */
export const Pool = Schema.Struct({
  poolId: Schema.String,
  grantor: Schema.String,
  grantee: Schema.String,
  limitUsd: Schema.Number,
  allocatedUsd: Schema.Number,
  remainingUsd: Schema.Number,
  expiresAt: Schema.String
})
/** A pool as the ledger reports it. */
export type Pool = typeof Pool.Type

/** An allocation as the ledger reports it. */
export const Allocation = Schema.Struct({
  allocationId: Schema.String,
  poolId: Schema.String,
  idempotencyKey: Schema.String,
  childJti: Schema.String,
  grantee: Schema.String,
  amountUsd: Schema.Number,
  usedUsd: Schema.NullOr(Schema.Number),
  releasedUsd: Schema.NullOr(Schema.Number),
  status: Schema.Literal("active", "released"),
  /** The agent's signed receipt the allocation was released with (docs/protocol.md §13), when one was given. */
  commitToken: Schema.optional(Schema.String)
})
/** An allocation as the ledger reports it. */
export type Allocation = typeof Allocation.Type

/** A pool with every allocation made from it, in the order they were made: the billing trail to reconcile. */
export const PoolAllocations = Schema.Struct({
  pool: Pool,
  /** What released allocations used, in total. */
  usedUsd: Schema.Number,
  allocations: Schema.Array(Allocation)
})
/** A pool with every allocation made from it. */
export type PoolAllocations = typeof PoolAllocations.Type
