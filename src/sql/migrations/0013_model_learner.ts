import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The Thompson learner's counts per (model, task type), own and prior apart (`ModelLearnerSql`), and the hub's
 * published learner counts, one row per (publisher, model, task type) holding that publisher's latest totals, so a
 * republish replaces instead of adding (`LearnerStatsStore`).
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.andThen(
    sql`CREATE TABLE mesh_model_learner (
      model TEXT NOT NULL,
      task_type TEXT NOT NULL,
      successes INTEGER NOT NULL DEFAULT 0 CHECK (successes >= 0),
      failures INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
      prior_successes REAL NOT NULL DEFAULT 0 CHECK (prior_successes >= 0),
      prior_failures REAL NOT NULL DEFAULT 0 CHECK (prior_failures >= 0),
      PRIMARY KEY (model, task_type)
    )`,
    sql`CREATE TABLE mesh_learner_stats (
      publisher TEXT NOT NULL,
      model TEXT NOT NULL,
      task_type TEXT NOT NULL,
      successes INTEGER NOT NULL CHECK (successes >= 0),
      failures INTEGER NOT NULL CHECK (failures >= 0),
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (publisher, model, task_type)
    )`
  )
)
