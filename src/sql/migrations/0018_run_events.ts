import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Streamed runs and their SSE frames, for agent servers whose replicas share one database: a client that reconnects
 * with `Last-Event-ID` to another replica than the one running its run is answered from here (`RunLog`). A run's
 * rows go when it has been finished for its retention.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  return Effect.all([
    sql`CREATE TABLE mesh_runs (
      run_id TEXT PRIMARY KEY,
      principal TEXT NOT NULL,
      first_seq INTEGER NOT NULL,
      sent INTEGER NOT NULL,
      done INTEGER NOT NULL,
      finished_at ${big},
      created_at ${big} NOT NULL
    )`,
    sql`CREATE INDEX mesh_runs_finished_at ON mesh_runs (finished_at)`,
    sql`CREATE TABLE mesh_run_events (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      frame TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    )`
  ], { discard: true })
})
