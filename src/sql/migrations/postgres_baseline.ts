/**
 * The Postgres schema as SQLite has it after migration 0015, created in one migration (Postgres databases start
 * here; there is no older Postgres schema to step through). It is the Postgres side of migration 0001; 0002 … 0015
 * are SQLite history and do nothing on Postgres. Migrations after 0015 give both dialects themselves.
 *
 * What differs from SQLite, and why:
 * - times (ms) and amounts (micro-dollars) are BIGINT: INTEGER is 32-bit here;
 * - the ledger has no triggers: allocation and release are single conditional statements in `Ledger` (a CTE that
 *   takes from the pool row and writes the allocation, or aborts both), exact under READ COMMITTED because the
 *   conditional UPDATE re-reads the locked pool row; the CHECK on the pool stays as the last line of defence;
 * - the registry's search has no FTS5 index: `RegistryStore` matches the same bounded fields with `position()` over
 *   the entries (migration 0025 later gives them a pg_trgm index);
 * - the unique constraints of allocations are named, so a violation says which one fired.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Every table of the current schema, on Postgres. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_nonces (
      sender TEXT NOT NULL,
      nonce TEXT NOT NULL,
      expires_at BIGINT NOT NULL,
      PRIMARY KEY (sender, nonce)
    )`,
    sql`CREATE INDEX mesh_nonces_expires_at ON mesh_nonces (expires_at)`,
    sql`CREATE TABLE mesh_task_counters (
      scope TEXT NOT NULL,
      counter TEXT NOT NULL,
      used BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      PRIMARY KEY (scope, counter)
    )`,
    sql`CREATE INDEX mesh_task_counters_expires_at ON mesh_task_counters (expires_at)`,
    sql`CREATE TABLE mesh_api_keys (
      id TEXT PRIMARY KEY,
      key_hash TEXT NOT NULL UNIQUE,
      owner TEXT NOT NULL,
      kind TEXT NOT NULL,
      label TEXT,
      created_at BIGINT NOT NULL,
      revoked_at BIGINT
    )`,
    sql`CREATE TABLE mesh_manifests (
      cid TEXT PRIMARY KEY,
      body TEXT NOT NULL,
      created_at BIGINT NOT NULL
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
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    )`,
    sql`CREATE INDEX mesh_entries_kind_did_hash ON mesh_entries (kind, did_hash)`,
    sql`CREATE TABLE mesh_mandate_revocations (
      grantor TEXT NOT NULL,
      jti TEXT NOT NULL,
      revoked_at BIGINT NOT NULL,
      PRIMARY KEY (grantor, jti)
    )`,
    sql`CREATE TABLE mesh_challenges (
      id TEXT PRIMARY KEY,
      did TEXT NOT NULL,
      public_key_b64 TEXT NOT NULL,
      challenge TEXT NOT NULL,
      expires_at BIGINT NOT NULL,
      used_at BIGINT
    )`,
    sql`CREATE INDEX mesh_challenges_expires_at ON mesh_challenges (expires_at)`,
    sql`CREATE TABLE mesh_pools (
      id TEXT PRIMARY KEY,
      token TEXT NOT NULL,
      grantor TEXT NOT NULL,
      grantee TEXT NOT NULL,
      limit_micros BIGINT NOT NULL,
      allocated_micros BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      opened_by TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      CONSTRAINT mesh_pools_within_limit CHECK (allocated_micros >= 0 AND allocated_micros <= limit_micros)
    )`,
    sql`CREATE TABLE mesh_allocations (
      id TEXT PRIMARY KEY,
      pool_id TEXT NOT NULL REFERENCES mesh_pools (id),
      idempotency_key TEXT NOT NULL,
      child_jti TEXT NOT NULL,
      grantee TEXT NOT NULL,
      amount_micros BIGINT NOT NULL,
      used_micros BIGINT,
      created_at BIGINT NOT NULL,
      released_at BIGINT,
      commit_token TEXT,
      CONSTRAINT mesh_allocations_pool_key UNIQUE (pool_id, idempotency_key),
      CONSTRAINT mesh_allocations_pool_child UNIQUE (pool_id, child_jti)
    )`,
    sql`CREATE TABLE mesh_paused_tasks (
      task_id TEXT PRIMARY KEY,
      owner TEXT NOT NULL,
      capability TEXT NOT NULL,
      mandate_jti TEXT NOT NULL,
      grantor TEXT NOT NULL,
      mandate TEXT NOT NULL,
      state TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('paused', 'resumed', 'cancelled')),
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL
    )`,
    sql`CREATE INDEX mesh_paused_tasks_expires_at ON mesh_paused_tasks (expires_at)`,
    sql`CREATE TABLE mesh_agent_messages (
      agent TEXT NOT NULL,
      owner TEXT NOT NULL,
      session_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      role TEXT NOT NULL,
      content TEXT NOT NULL,
      PRIMARY KEY (agent, owner, session_id, seq)
    )`,
    sql`CREATE TABLE mesh_settings (
      name TEXT PRIMARY KEY,
      value TEXT NOT NULL
    )`,
    sql`CREATE TABLE mesh_tombstones (
      did TEXT PRIMARY KEY,
      did_hash TEXT NOT NULL,
      public_key_b64 TEXT NOT NULL,
      key_version INTEGER NOT NULL,
      deleted_at BIGINT NOT NULL
    )`,
    sql`CREATE TABLE mesh_model_learner (
      model TEXT NOT NULL,
      task_type TEXT NOT NULL,
      successes BIGINT NOT NULL DEFAULT 0 CHECK (successes >= 0),
      failures BIGINT NOT NULL DEFAULT 0 CHECK (failures >= 0),
      prior_successes DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (prior_successes >= 0),
      prior_failures DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (prior_failures >= 0),
      PRIMARY KEY (model, task_type)
    )`,
    sql`CREATE TABLE mesh_learner_stats (
      publisher TEXT NOT NULL,
      model TEXT NOT NULL,
      task_type TEXT NOT NULL,
      successes BIGINT NOT NULL CHECK (successes >= 0),
      failures BIGINT NOT NULL CHECK (failures >= 0),
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (publisher, model, task_type)
    )`,
    sql`CREATE TABLE mesh_idempotency (
      scope TEXT NOT NULL,
      key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      holder TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'completed')),
      reply_status INTEGER,
      reply_body TEXT,
      expires_at BIGINT NOT NULL,
      PRIMARY KEY (scope, key)
    )`,
    sql`CREATE INDEX mesh_idempotency_expires_at ON mesh_idempotency (expires_at)`,
    sql`CREATE TABLE mesh_sagas (
      id TEXT PRIMARY KEY,
      caller TEXT NOT NULL,
      runner TEXT NOT NULL,
      mandate TEXT NOT NULL,
      pool_id TEXT NOT NULL,
      definition TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('running', 'committed', 'compensated', 'compensation_failed')),
      failed_step TEXT,
      error_code TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    )`,
    sql`CREATE TABLE mesh_saga_steps (
      saga_id TEXT NOT NULL REFERENCES mesh_sagas (id),
      idx INTEGER NOT NULL,
      name TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'committed', 'failed', 'compensated', 'compensation_failed')),
      child_token TEXT,
      allocation_id TEXT,
      commit_token TEXT,
      used_usd TEXT,
      result TEXT,
      error_code TEXT,
      error_message TEXT,
      PRIMARY KEY (saga_id, idx)
    )`,
    sql`CREATE TABLE mesh_saga_events (
      saga_id TEXT NOT NULL REFERENCES mesh_sagas (id),
      seq INTEGER NOT NULL,
      type TEXT NOT NULL,
      step TEXT,
      data TEXT NOT NULL,
      at BIGINT NOT NULL,
      PRIMARY KEY (saga_id, seq)
    )`
  ], { discard: true })
)
