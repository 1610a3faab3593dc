/**
 * The mesh's learner statistics: what each publisher's Thompson learner observed, counts only (no prompts, answers
 * or callers' data), one row per (publisher, model, task type) in `mesh_learner_stats` (migration 0013). A publish
 * replaces the publisher's rows with its current totals, in one transaction, so publishing twice never counts twice.
 *
 * Reading sums over publishers, each weighed by at most `PUBLISHER_WEIGHT` pseudo-observations per pair: a row of
 * more trials is scaled down to that many in integer arithmetic, keeping its ratio (`ModelLearner.scaleCounts`, done
 * here in SQL), so one publisher — and an agent key is anyone's for the asking (docs/security.md §2.4) — moves a pair
 * by a bounded amount however much it claims. A row that is not a count within the publish bound (`MAX_ARM_TRIALS`,
 * non-negative integers) or does not decode (rows stored before the bound, or written around the hub) is skipped
 * and logged, never summed: one publisher's row must not turn everyone's read into an error.
 *
 * A store: it fails with `PersistenceError` and never judges a caller; the publisher is whoever the surface says.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { LearnerStat, MAX_ARM_TRIALS } from "../model/ModelLearner.js"
import { type PersistenceError, refail } from "../sql/SqlFailure.js"

/** Most pseudo-observations one publisher's counts weigh in the aggregate, per (model, task type). */
export const PUBLISHER_WEIGHT = 1_000

/** The operations of the store. */
export interface LearnerStatsStoreApi {
  /** Replaces `publisher`'s counts with `stats` (its totals); answers how many rows it now holds. */
  readonly publish: (publisher: string, stats: ReadonlyArray<LearnerStat>) => Effect.Effect<number, PersistenceError>
  /** Every (model, task type) with its counts summed over publishers, each scaled to `PUBLISHER_WEIGHT`; bad rows skipped. */
  readonly aggregate: Effect.Effect<ReadonlyArray<LearnerStat>, PersistenceError>
}

/** The `LearnerStatsStore` service. */
export class LearnerStatsStore extends Context.Tag("agent-mesh/hub/LearnerStatsStore")<LearnerStatsStore, LearnerStatsStoreApi>() {}

/** One (model, task type) of the aggregate as the engine answers it (SQLite numbers, Postgres bigint strings). */
interface AggregateRow {
  readonly model: unknown
  readonly task_type: unknown
  readonly successes: unknown
  readonly failures: unknown
  readonly counted: unknown
  readonly skipped: unknown
}

/**
 * The per-pair sums of every publisher's rows scaled to `PUBLISHER_WEIGHT`, with how many rows were counted and
 * skipped. The bounds are written into the statement, not bound: a bound number reaches SQLite as a float, and the
 * division with it would be one. Each guard is its own CASE so the engine never adds or multiplies an unchecked row
 * (on Postgres an INTEGER overflow is an error); a checked row's `successes * PUBLISHER_WEIGHT` is at most 10⁹.
 */
const aggregateRows = (sql: SqlClient.SqlClient) => {
  const w = sql.literal(String(PUBLISHER_WEIGHT))
  const m = sql.literal(String(MAX_ARM_TRIALS))
  return sql<AggregateRow>`SELECT model, task_type,
      SUM(CASE WHEN ok = 1 THEN CASE WHEN successes + failures <= ${w} THEN successes
        ELSE (successes * ${w} + (successes + failures) / 2) / (successes + failures) END ELSE 0 END) AS successes,
      SUM(CASE WHEN ok = 1 THEN CASE WHEN successes + failures <= ${w} THEN failures
        ELSE ${w} - (successes * ${w} + (successes + failures) / 2) / (successes + failures) END ELSE 0 END) AS failures,
      SUM(ok) AS counted, COUNT(*) - SUM(ok) AS skipped
    FROM (SELECT model, task_type, successes, failures,
        CASE WHEN successes >= 0 AND failures >= 0 AND successes <= ${m} AND failures <= ${m}
            AND successes = CAST(successes AS INTEGER) AND failures = CAST(failures AS INTEGER)
          THEN CASE WHEN successes + failures <= ${m} THEN 1 ELSE 0 END ELSE 0 END AS ok
      FROM mesh_learner_stats) published
    GROUP BY model, task_type ORDER BY task_type, model`
}

const decodeStat = Schema.decodeUnknownOption(LearnerStat)

/** A summed count as an exact non-negative integer, at most the largest safe one; `undefined` when it is none. */
const count = (u: unknown): number | undefined => {
  const text = typeof u === "number" ? (Number.isInteger(u) ? BigInt(u).toString() : "") : typeof u === "bigint" || typeof u === "string" ? String(u) : ""
  if (!/^[0-9]+$/.test(text)) return undefined
  const n = BigInt(text)
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n)
}

/** One pair of the aggregate, or none when no row of it counted or it does not decode; what it left out is logged. */
const aggregateStat = (r: AggregateRow): Effect.Effect<Option.Option<LearnerStat>> => {
  const counted = count(r.counted) ?? 0
  const skipped = count(r.skipped) ?? 0
  const stat = counted === 0
    ? Option.none()
    : decodeStat({ modelId: r.model, taskType: r.task_type, successes: count(r.successes), failures: count(r.failures) })
  const dropped = Option.isSome(stat) ? skipped : counted + skipped
  return dropped === 0
    ? Effect.succeed(stat)
    : Effect.as(
      Effect.logWarning("learner statistics: rows skipped, out of bounds or out of shape").pipe(
        Effect.annotateLogs({ model: String(r.model).slice(0, 200), taskType: String(r.task_type).slice(0, 40), rows: dropped })
      ),
      stat
    )
}

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
  aggregate: Effect.flatMap(refail(aggregateRows(sql)), (rows) => Effect.map(Effect.forEach(rows, aggregateStat), Arr.getSomes))
}))

/** The store; provide a migrated `SqlClient` (`Database.layerSqlite`). */
export const layer: Layer.Layer<LearnerStatsStore, never, SqlClient.SqlClient> = Layer.effect(LearnerStatsStore, make)
