import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The size of each stored reply, kept beside it: a claim of a new key sums its caller's reply bytes against the
 * caller's quota (docs/agent.md §3), which without this column re-measured every stored body on every keyed request.
 * Replies stored before it are measured once here.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`ALTER TABLE mesh_idempotency ADD COLUMN reply_bytes BIGINT`,
    sql.onDialectOrElse({
      pg: () => sql`UPDATE mesh_idempotency SET reply_bytes = octet_length(reply_body) WHERE reply_body IS NOT NULL`,
      orElse: () => sql`UPDATE mesh_idempotency SET reply_bytes = length(CAST(reply_body AS BLOB)) WHERE reply_body IS NOT NULL`
    })
  ], { discard: true }))
