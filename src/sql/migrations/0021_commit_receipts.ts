import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * One receipt, one allocation: the receipt a release's commit token carries (its issuer, saga and step, as JSON) is
 * kept beside the token under a unique index, so the same signed work cannot be billed in a second allocation or a
 * second pool, whichever hub releases it (docs/protocol.md §13.4). Rows released before this migration keep no
 * receipt here; offline reconciliation still finds their duplicates. SQL both dialects accept.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`ALTER TABLE mesh_allocations ADD COLUMN receipt TEXT`,
    sql`CREATE UNIQUE INDEX mesh_allocations_receipt ON mesh_allocations (receipt) WHERE receipt IS NOT NULL`
  ], { discard: true }))
