import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The A2A task store's bounds (`maxA2aTasks`, `maxA2aTaskBytes`, `maxA2aTaskBytesPerCaller`) checked against running
 * totals instead of a count and sum over every kept task on each insert, which cost time in proportion to the tasks
 * kept (up to 10 000 by default) on every request. `mesh_a2a_task_totals` holds one row, the store's task count and
 * bytes; `mesh_a2a_task_holders` one row per holder with tasks kept, its count and bytes (a holder's row goes with its
 * last task, so anonymous callers' addresses do not pile up). The store changes them in the transaction of every
 * insert, delete and resize of a task (`A2aTaskStoreSql`, the tables' only writer), adding up a transaction's changes
 * so that keeping many tasks in one transaction updates each row once. Room is made from the oldest ended tasks a
 * page at a time: the indexes below hold them in that order (ended time, then id), in all and per holder, replacing
 * 0023's (ended, ended_at) and (holder).
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  return Effect.all([
    sql`CREATE TABLE mesh_a2a_task_totals (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      tasks ${big} NOT NULL,
      bytes ${big} NOT NULL
    )`,
    sql`CREATE TABLE mesh_a2a_task_holders (
      holder TEXT PRIMARY KEY,
      tasks ${big} NOT NULL,
      bytes ${big} NOT NULL
    )`,
    sql`INSERT INTO mesh_a2a_task_totals (id, tasks, bytes) SELECT 1, count(*), coalesce(sum(bytes), 0) FROM mesh_a2a_tasks`,
    sql`INSERT INTO mesh_a2a_task_holders (holder, tasks, bytes) SELECT holder, count(*), sum(bytes) FROM mesh_a2a_tasks GROUP BY holder`,
    sql`DROP INDEX mesh_a2a_tasks_ended_at`,
    sql`DROP INDEX mesh_a2a_tasks_holder`,
    sql`CREATE INDEX mesh_a2a_tasks_ended ON mesh_a2a_tasks (ended, ended_at, task_id)`,
    sql`CREATE INDEX mesh_a2a_tasks_holder_ended ON mesh_a2a_tasks (holder, ended, ended_at, task_id)`
  ], { discard: true })
})
