import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Nonces seen per sender, kept until their envelope can no longer validate. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_nonces (
      sender TEXT NOT NULL,
      nonce TEXT NOT NULL,
      expires_at INTEGER NOT NULL,
      PRIMARY KEY (sender, nonce)
    )`,
    sql`CREATE INDEX mesh_nonces_expires_at ON mesh_nonces (expires_at)`
  ], { discard: true })
)
