/**
 * The mesh's learner statistics: what each publisher's Thompson learner observed, counts only (no prompts, answers
 * or callers' data), one row per (publisher, model, task type) in `mesh_learner_stats` (migration 0013). A publish
 * replaces the publisher's rows with its current totals, in one transaction, so publishing twice never counts twice;
 * reading sums over publishers.
 *
 * A store: it fails with `PersistenceError` and never judges a caller; the publisher is whoever the surface says.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { LearnerStat } from "../model/ModelLearner.js"
import { type PersistenceError, refail } from "../sql/SqlFailure.js"

/** The operations of the store. */
export interface LearnerStatsStoreApi {
  /** Replaces `publisher`'s counts with `stats` (its totals); answers how many rows it now holds. */
  readonly publish: (publisher: string, stats: ReadonlyArray<LearnerStat>) => Effect.Effect<number, PersistenceError>
  /** Every (model, task type) with its counts summed over publishers. */
  readonly aggregate: Effect.Effect<ReadonlyArray<LearnerStat>, PersistenceError>
}

/** The `LearnerStatsStore` service. */
export class LearnerStatsStore extends Context.Tag("agent-mesh/hub/LearnerStatsStore")<LearnerStatsStore, LearnerStatsStoreApi>() {}

/** The store on the migrated `SqlClient`. */
export const make: Effect.Effect<LearnerStatsStoreApi, never, SqlClient.SqlClient> = Effect.map(SqlClient.SqlClient, (sql) => ({
  publish: (publisher, stats) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      refail(
        Effect.zipRight(
          sql`DELETE FROM mesh_learner_stats WHERE publisher = ${publisher}`,
          Effect.forEach(
            stats,
            (s) =>
              sql`INSERT INTO mesh_learner_stats (publisher, model, task_type, successes, failures, updated_at)
                VALUES (${publisher}, ${s.modelId}, ${s.taskType}, ${s.successes}, ${s.failures}, ${Math.floor(now / 1000)})
                ON CONFLICT (publisher, model, task_type) DO UPDATE SET successes = excluded.successes, failures = excluded.failures,
                  updated_at = excluded.updated_at`,
            { discard: true }
          )
        ).pipe(
          Effect.zipRight(sql<{ n: number }>`SELECT COUNT(*) AS n FROM mesh_learner_stats WHERE publisher = ${publisher}`),
          Effect.map((rows) => Number(rows[0]?.n ?? 0)),
          sql.withTransaction
        )
      )
    ),
  aggregate: refail(
    Effect.map(
      sql<{ model: string; task_type: LearnerStat["taskType"]; successes: number; failures: number }>`SELECT model, task_type,
        SUM(successes) AS successes, SUM(failures) AS failures FROM mesh_learner_stats GROUP BY model, task_type ORDER BY task_type, model`,
      (rows) => rows.map((r) => ({ modelId: r.model, taskType: r.task_type, successes: Number(r.successes), failures: Number(r.failures) }))
    )
  )
}))

/** The store; provide a migrated `SqlClient` (`Database.layerSqlite`). */
export const layer: Layer.Layer<LearnerStatsStore, never, SqlClient.SqlClient> = Layer.effect(LearnerStatsStore, make)
