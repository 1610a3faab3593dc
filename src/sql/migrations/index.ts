/**
 * Every schema migration of both dialects, in order. Keys must match `NNNN_name` or the migrator skips them silently.
 *
 * SQLite has stepped through 0001 … 0015; Postgres starts from the schema they add up to (`postgres_baseline`, run
 * as its 0001), so 0002 … 0015 do nothing there. Every migration from 0016 on gives both dialects itself
 * (`sql.onDialectOrElse`, or SQL both accept), and is tested on both by the store suite.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import m0001 from "./0001_nonces.js"
import m0002 from "./0002_task_counters.js"
import m0003 from "./0003_registry.js"
import m0004 from "./0004_ledger.js"
import m0005 from "./0005_ledger_triggers.js"
import m0006 from "./0006_revocations_by_grantor.js"
import m0007 from "./0007_ledger_release_trigger.js"
import m0008 from "./0008_paused_tasks.js"
import m0009 from "./0009_agent_memory.js"
import m0010 from "./0010_search_index.js"
import m0011 from "./0011_hub_hardening.js"
import m0012 from "./0012_pool_owner_is_grantee.js"
import m0013 from "./0013_model_learner.js"
import m0014 from "./0014_idempotency_and_commit_tokens.js"
import m0015 from "./0015_sagas.js"
import m0016 from "./0016_a2a_cards.js"
import m0017 from "./0017_agent_last_seen.js"
import m0018 from "./0018_run_events.js"
import m0019 from "./0019_rate_limits.js"
import m0020 from "./0020_saga_running_index.js"
import m0021 from "./0021_commit_receipts.js"
import m0022 from "./0022_idempotency_reply_bytes.js"
import m0023 from "./0023_a2a_tasks.js"
import m0024 from "./0024_write_quotas.js"
import m0025 from "./0025_search_trigram.js"
import m0026 from "./0026_a2a_task_listing.js"
import m0027 from "./0027_saga_listing.js"
import m0028 from "./0028_nonce_quota_counts.js"
import m0029 from "./0029_a2a_task_totals.js"
import postgresBaseline from "./postgres_baseline.js"

type Migration = Effect.Effect<void, unknown, SqlClient.SqlClient>

/** A SQLite migration whose Postgres counterpart is `postgres`. */
const dialects = (sqlite: Migration, postgres: Migration): Migration =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.onDialectOrElse({ pg: () => postgres, orElse: () => sqlite }))

/** A step of SQLite's history that Postgres's baseline already contains. */
const sqliteHistory = (sqlite: Migration): Migration => dialects(sqlite, Effect.void)

/** The migration record handed to `Migrator.fromRecord` (a record survives bundling, a glob does not). */
export const migrations: Record<string, Migration> = {
  "0001_nonces": dialects(m0001, postgresBaseline),
  "0002_task_counters": sqliteHistory(m0002),
  "0003_registry": sqliteHistory(m0003),
  "0004_ledger": sqliteHistory(m0004),
  "0005_ledger_triggers": sqliteHistory(m0005),
  "0006_revocations_by_grantor": sqliteHistory(m0006),
  "0007_ledger_release_trigger": sqliteHistory(m0007),
  "0008_paused_tasks": sqliteHistory(m0008),
  "0009_agent_memory": sqliteHistory(m0009),
  "0010_search_index": sqliteHistory(m0010),
  "0011_hub_hardening": sqliteHistory(m0011),
  "0012_pool_owner_is_grantee": sqliteHistory(m0012),
  "0013_model_learner": sqliteHistory(m0013),
  "0014_idempotency_and_commit_tokens": sqliteHistory(m0014),
  "0015_sagas": sqliteHistory(m0015),
  "0016_a2a_cards": m0016,
  "0017_agent_last_seen": m0017,
  "0018_run_events": m0018,
  "0019_rate_limits": m0019,
  "0020_saga_running_index": m0020,
  "0021_commit_receipts": m0021,
  "0022_idempotency_reply_bytes": m0022,
  "0023_a2a_tasks": m0023,
  "0024_write_quotas": m0024,
  "0025_search_trigram": m0025,
  "0026_a2a_task_listing": m0026,
  "0027_saga_listing": m0027,
  "0028_nonce_quota_counts": m0028,
  "0029_a2a_task_totals": m0029
}
