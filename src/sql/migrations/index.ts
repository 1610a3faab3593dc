/**
 * Every schema migration, in order. Keys must match `NNNN_name` or the migrator skips them silently.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Effect from "effect/Effect"
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

/** The migration record handed to `Migrator.fromRecord` (a record survives bundling, a glob does not). */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_nonces": m0001,
  "0002_task_counters": m0002,
  "0003_registry": m0003,
  "0004_ledger": m0004,
  "0005_ledger_triggers": m0005,
  "0006_revocations_by_grantor": m0006,
  "0007_ledger_release_trigger": m0007,
  "0008_paused_tasks": m0008,
  "0009_agent_memory": m0009,
  "0010_search_index": m0010,
  "0011_hub_hardening": m0011,
  "0012_pool_owner_is_grantee": m0012,
  "0013_model_learner": m0013,
  "0014_idempotency_and_commit_tokens": m0014,
  "0015_sagas": m0015,
  "0016_a2a_cards": m0016,
  "0017_agent_last_seen": m0017
}
