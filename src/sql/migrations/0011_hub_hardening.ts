import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Hub hardening: a settings table whose `admin_created` row says the admin credential was made once (so a hub whose
 * admin key was revoked does not mint a new one on restart), tombstones of deleted agents (so a DID's key version
 * never restarts at 1), an index that lets the challenge purge find expired rows, and padded (canonical) spellings
 * of stored public keys.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_settings (
      name TEXT PRIMARY KEY,
      value TEXT NOT NULL
    )`,
    // A database that already has (or had) an admin key was started before: it must not get another one.
    sql`INSERT INTO mesh_settings (name, value)
      SELECT 'admin_created', 'migrated' WHERE EXISTS (SELECT 1 FROM mesh_api_keys WHERE kind = 'admin')`,
    sql`CREATE TABLE mesh_tombstones (
      did TEXT PRIMARY KEY,
      did_hash TEXT NOT NULL,
      public_key_b64 TEXT NOT NULL,
      key_version INTEGER NOT NULL,
      deleted_at INTEGER NOT NULL
    )`,
    sql`CREATE INDEX mesh_challenges_expires_at ON mesh_challenges (expires_at)`,
    // 43 characters of standard base64 are 32 bytes without the one '=' of padding.
    sql`UPDATE mesh_entries SET public_key_b64 = public_key_b64 || '=' WHERE public_key_b64 IS NOT NULL AND length(public_key_b64) = 43`,
    sql`UPDATE mesh_challenges SET public_key_b64 = public_key_b64 || '=' WHERE length(public_key_b64) = 43`
  ], { discard: true })
)
