import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The registry's write quotas and used write proofs, in the database so every hub on it counts them once
 * (docs/scaling.md §2). `mesh_write_quotas` holds one fixed window per budget (an API key, the DID of agent keys, a
 * client address): a write is charged by a conditional upsert that adds only while the sum stays within the budget.
 * `mesh_used_proofs` holds the value of every applied write proof until it could no longer be fresh: claiming one is
 * an INSERT its primary key refuses the second time. Both are purged by the time columns indexed here.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  return Effect.all([
    sql`CREATE TABLE mesh_write_quotas (
      id TEXT PRIMARY KEY,
      window_start ${big} NOT NULL,
      entries ${big} NOT NULL,
      bytes ${big} NOT NULL
    )`,
    sql`CREATE INDEX mesh_write_quotas_window_start ON mesh_write_quotas (window_start)`,
    sql`CREATE TABLE mesh_used_proofs (
      proof_value TEXT PRIMARY KEY,
      expires_at ${big} NOT NULL
    )`,
    sql`CREATE INDEX mesh_used_proofs_expires_at ON mesh_used_proofs (expires_at)`
  ], { discard: true })
})
