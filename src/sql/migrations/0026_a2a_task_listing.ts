import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * `ListTasks` reads one caller's A2A tasks newest status first, a page at a time (keyset on `updated_at`, then
 * `task_id`): this index holds them in that order, so a page costs its own rows, not the caller's whole history.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`CREATE INDEX mesh_a2a_tasks_listing ON mesh_a2a_tasks (principal, holder, updated_at, task_id)`)
