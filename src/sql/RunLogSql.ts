/**
 * `RunLog` on SQL (migration 0018): streamed runs shared by agent replicas on one database, so a reconnect with
 * `Last-Event-ID` is answered by whichever replica it reaches.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RunLog, type RunLogApi, RunLogUnavailable, type RunLogWrite } from "../core/RunLog.js"
import { summarize } from "./SqlFailure.js"

/** The log on the migrated `SqlClient`. */
export const make: Effect.Effect<RunLogApi, never, SqlClient.SqlClient> = Effect.map(SqlClient.SqlClient, (sql) => {
  const unavailable = (e: unknown) => new RunLogUnavailable({ code: "STORE_UNAVAILABLE", message: summarize(e) })
  const one = (w: RunLogWrite) => {
    switch (w._tag) {
      case "Open":
        return sql`INSERT INTO mesh_runs (run_id, principal, first_seq, sent, done, finished_at, created_at)
          VALUES (${w.runId}, ${w.principal}, 0, 0, 0, NULL, ${w.at}) ON CONFLICT (run_id) DO NOTHING`
      case "Event":
        return sql`INSERT INTO mesh_run_events (run_id, seq, frame) VALUES (${w.runId}, ${w.seq}, ${w.frame}) ON CONFLICT (run_id, seq) DO NOTHING`
      case "Finish":
        return sql`UPDATE mesh_runs SET done = 1, sent = ${w.sent}, finished_at = ${w.at} WHERE run_id = ${w.runId}`
    }
  }
  // Consecutive events go in one multi-row INSERT; the batch is one transaction, so a reader sees it whole.
  const statements = (writes: ReadonlyArray<RunLogWrite>) => {
    const out: Array<Effect.Effect<unknown, unknown>> = []
    let events: Array<{ run_id: string; seq: number; frame: string }> = []
    const flush = () => {
      if (events.length > 0) {
        const rows = events
        out.push(sql`INSERT INTO mesh_run_events ${sql.insert(rows)} ON CONFLICT (run_id, seq) DO NOTHING`)
      }
      events = []
    }
    for (const w of writes) {
      if (w._tag === "Event") events.push({ run_id: w.runId, seq: w.seq, frame: w.frame })
      else {
        flush()
        out.push(one(w))
      }
    }
    flush()
    return out
  }
  return {
    write: (writes) =>
      writes.length === 0
        ? Effect.void
        : Effect.all(statements(writes), { discard: true }).pipe(sql.withTransaction, Effect.mapError(unavailable)),
    read: (runId, from, limit) =>
      Effect.gen(function* () {
        const [run] = yield* sql<{ principal: string; done: number; sent: number }>`SELECT principal, done, sent FROM mesh_runs WHERE run_id = ${runId}`
        if (run === undefined) return undefined
        const frames = yield* sql<{ seq: number; frame: string }>`SELECT seq, frame FROM mesh_run_events
          WHERE run_id = ${runId} AND seq >= ${from} ORDER BY seq LIMIT ${limit}`
        const [last] = yield* sql<{ n: number | null }>`SELECT max(seq) AS n FROM mesh_run_events WHERE run_id = ${runId}`
        const stored = last?.n === null || last?.n === undefined ? 0 : Number(last.n) + 1
        const done = Number(run.done) === 1
        return { principal: run.principal, done, sent: done ? Number(run.sent) : stored, frames: frames.map((f) => f.frame) }
      }).pipe(Effect.mapError(unavailable)),
    purge: (before) =>
      Effect.gen(function* () {
        const gone = yield* sql<{ run_id: string }>`DELETE FROM mesh_runs WHERE done = 1 AND finished_at < ${before} RETURNING run_id`
        if (gone.length > 0) yield* sql`DELETE FROM mesh_run_events WHERE run_id IN ${sql.in(gone.map((g) => g.run_id))}`
        return gone.length
      }).pipe(sql.withTransaction, Effect.mapError(unavailable))
  }
})

/** `RunLog` on SQL; provide a migrated `SqlClient` (`Database.layer`). */
export const layer: Layer.Layer<RunLog, never, SqlClient.SqlClient> = Layer.effect(RunLog, make)
