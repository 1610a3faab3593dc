import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The A2A tasks of an agent and the events their followers are sent, so `GetTask`, `SubscribeToTask` and an
 * approval are answered after a restart and by any replica on the same database. A task's events go with it.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  return Effect.all([
    sql`CREATE TABLE mesh_a2a_tasks (
      task_id TEXT PRIMARY KEY,
      principal TEXT NOT NULL,
      holder TEXT NOT NULL,
      context_id TEXT NOT NULL,
      state TEXT NOT NULL,
      gate_task_id TEXT,
      body TEXT NOT NULL,
      bytes ${big} NOT NULL,
      seq INTEGER NOT NULL,
      ended INTEGER NOT NULL,
      ended_at ${big},
      updated_at ${big} NOT NULL
    )`,
    sql`CREATE INDEX mesh_a2a_tasks_ended_at ON mesh_a2a_tasks (ended, ended_at)`,
    sql`CREATE INDEX mesh_a2a_tasks_holder ON mesh_a2a_tasks (holder)`,
    sql`CREATE TABLE mesh_a2a_task_events (
      task_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      event TEXT NOT NULL,
      PRIMARY KEY (task_id, seq)
    )`
  ], { discard: true })
})
