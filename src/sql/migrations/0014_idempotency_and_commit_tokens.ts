import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Idempotency keys of agent runs (a stored reply per server, caller and key, kept until it expires), and the commit
 * token an allocation was released with, so a pool's billing trail can be verified offline.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_idempotency (
      scope TEXT NOT NULL,
      key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      holder TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'completed')),
      reply_status INTEGER,
      reply_body TEXT,
      expires_at INTEGER NOT NULL,
      PRIMARY KEY (scope, key)
    )`,
    sql`CREATE INDEX mesh_idempotency_expires_at ON mesh_idempotency (expires_at)`,
    sql`ALTER TABLE mesh_allocations ADD COLUMN commit_token TEXT`
  ], { discard: true })
)
