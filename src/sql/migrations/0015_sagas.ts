import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Sagas as the scheduler records them: the definition as accepted (immutable, so a resumed workflow reads exactly
 * what was checked), one row per step with the child mandate it was issued (so a step re-run after a crash presents
 * the same mandate to the ledger and the agent), and the progress events in order (replayed to SSE readers).
 * The workflow journal itself is @effect/cluster's own tables.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mesh_sagas (
    id TEXT PRIMARY KEY,
    caller TEXT NOT NULL,
    runner TEXT NOT NULL,
    mandate TEXT NOT NULL,
    pool_id TEXT NOT NULL,
    definition TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'committed', 'compensated', 'compensation_failed')),
    failed_step TEXT,
    error_code TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE mesh_saga_steps (
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
  )`
  yield* sql`CREATE TABLE mesh_saga_events (
    saga_id TEXT NOT NULL REFERENCES mesh_sagas (id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    step TEXT,
    data TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (saga_id, seq)
  )`
})
