/**
 * The Thompson learner kept in SQL (table `mesh_model_learner`, migration 0013), so what a router learned survives a
 * restart. Every count is loaded once when the layer is built and kept in memory, because sampling runs on every
 * routed call and must not wait on the database; each recorded outcome is written through as one UPSERT of the
 * pair's totals, so the row is always the in-memory count, never a count of increments that could be lost.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { TaskType } from "../core/Constraints.js"
import { type PersistenceError, refail } from "../sql/SqlFailure.js"
import { type Counts, fromCounts, ModelLearner, type ModelLearnerApi, pairKey } from "./ModelLearner.js"

interface Row {
  readonly model: string
  readonly task_type: string
  readonly successes: number
  readonly failures: number
  readonly prior_successes: number
  readonly prior_failures: number
}

/** A learner over the migrated `SqlClient`: counts loaded now, every change written through. */
export const make: Effect.Effect<ModelLearnerApi, PersistenceError, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* refail(sql<Row>`SELECT model, task_type, successes, failures, prior_successes, prior_failures FROM mesh_model_learner`)
  const counts = new Map<string, Counts>()
  for (const r of rows) {
    counts.set(pairKey(r.model, r.task_type as TaskType), {
      successes: Number(r.successes),
      failures: Number(r.failures),
      priorSuccesses: Number(r.prior_successes),
      priorFailures: Number(r.prior_failures)
    })
  }
  const upsert = (modelId: string, taskType: string, c: Counts) =>
    sql`INSERT INTO mesh_model_learner (model, task_type, successes, failures, prior_successes, prior_failures)
      VALUES (${modelId}, ${taskType}, ${c.successes}, ${c.failures}, ${c.priorSuccesses}, ${c.priorFailures})
      ON CONFLICT (model, task_type) DO UPDATE SET successes = excluded.successes, failures = excluded.failures,
        prior_successes = excluded.prior_successes, prior_failures = excluded.prior_failures`
  return fromCounts(counts, {
    recorded: (modelId, taskType, c) => refail(upsert(modelId, taskType, c)),
    priorsReplaced: (all) =>
      refail(
        Effect.forEach(
          all,
          ([key, c]) => {
            const at = key.indexOf("\u0000")
            return upsert(key.slice(at + 1), key.slice(0, at), c)
          },
          { discard: true }
        ).pipe(sql.withTransaction)
      )
  })
})

/** The SQL learner; provide a migrated `SqlClient` (`Database.layerSqlite(learnerPath)`). */
export const layer: Layer.Layer<ModelLearner, PersistenceError, SqlClient.SqlClient> = Layer.effect(ModelLearner, make)
