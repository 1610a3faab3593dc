import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Budget pools (one per parent spending mandate) and the allocations made from them to child mandates. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_pools (
      id TEXT PRIMARY KEY,
      token TEXT NOT NULL,
      grantor TEXT NOT NULL,
      grantee TEXT NOT NULL,
      limit_micros INTEGER NOT NULL,
      allocated_micros INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      owner_key_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      CHECK (allocated_micros >= 0 AND allocated_micros <= limit_micros)
    )`,
    sql`CREATE TABLE mesh_allocations (
      id TEXT PRIMARY KEY,
      pool_id TEXT NOT NULL REFERENCES mesh_pools (id),
      idempotency_key TEXT NOT NULL,
      child_jti TEXT NOT NULL,
      grantee TEXT NOT NULL,
      amount_micros INTEGER NOT NULL,
      used_micros INTEGER,
      created_at INTEGER NOT NULL,
      released_at INTEGER,
      UNIQUE (pool_id, idempotency_key)
    )`
  ], { discard: true })
)
