import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Tasks paused at a human gate, with the mandate and the agent server's state (JSON text) needed to resume them.
 * Finished rows stay until the mandate expires, so a reused approval meets `resumed` rather than nothing.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_paused_tasks (
      task_id TEXT PRIMARY KEY,
      owner TEXT NOT NULL,
      capability TEXT NOT NULL,
      mandate_jti TEXT NOT NULL,
      grantor TEXT NOT NULL,
      mandate TEXT NOT NULL,
      state TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('paused', 'resumed', 'cancelled')),
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL
    )`,
    sql`CREATE INDEX mesh_paused_tasks_expires_at ON mesh_paused_tasks (expires_at)`
  ], { discard: true })
)
