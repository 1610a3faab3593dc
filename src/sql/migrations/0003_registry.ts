import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** The hub's registry: API keys, pinned manifests, agents, MCP servers, skills, revoked mandates, challenges. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_api_keys (
      id TEXT PRIMARY KEY,
      key_hash TEXT NOT NULL UNIQUE,
      owner TEXT NOT NULL,
      kind TEXT NOT NULL,
      label TEXT,
      created_at INTEGER NOT NULL,
      revoked_at INTEGER
    )`,
    sql`CREATE TABLE mesh_manifests (
      cid TEXT PRIMARY KEY,
      body TEXT NOT NULL,
      created_at INTEGER NOT NULL
    )`,
    sql`CREATE TABLE mesh_entries (
      did TEXT PRIMARY KEY,
      did_hash TEXT NOT NULL UNIQUE,
      kind TEXT NOT NULL,
      name TEXT NOT NULL,
      endpoint_url TEXT,
      public_key_b64 TEXT,
      key_version INTEGER NOT NULL,
      manifest_cid TEXT,
      skill_type TEXT,
      tools TEXT,
      owner_key_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    )`,
    sql`CREATE INDEX mesh_entries_kind_did_hash ON mesh_entries (kind, did_hash)`,
    sql`CREATE TABLE mesh_revoked_mandates (
      jti TEXT PRIMARY KEY,
      grantor TEXT NOT NULL,
      revoked_at INTEGER NOT NULL
    )`,
    sql`CREATE TABLE mesh_challenges (
      id TEXT PRIMARY KEY,
      did TEXT NOT NULL,
      public_key_b64 TEXT NOT NULL,
      challenge TEXT NOT NULL,
      expires_at INTEGER NOT NULL,
      used_at INTEGER
    )`
  ], { discard: true })
)
