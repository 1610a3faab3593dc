import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A `jti` is chosen by its grantor, so it identifies a mandate only together with the grantor: revocations are
 * keyed by both (one grantor cannot revoke another's mandate by reusing its `jti`). A child mandate is allocated
 * from a pool at most once.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_mandate_revocations (
      grantor TEXT NOT NULL,
      jti TEXT NOT NULL,
      revoked_at INTEGER NOT NULL,
      PRIMARY KEY (grantor, jti)
    )`,
    sql`INSERT INTO mesh_mandate_revocations (grantor, jti, revoked_at) SELECT grantor, jti, revoked_at FROM mesh_revoked_mandates`,
    sql`DROP TABLE mesh_revoked_mandates`,
    sql`CREATE UNIQUE INDEX mesh_allocations_pool_child ON mesh_allocations (pool_id, child_jti)`
  ], { discard: true })
)
