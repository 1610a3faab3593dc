import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Mandate counters (actionLimits, computeLimit, spend), per mandate jti, kept until the mandate expires. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_task_counters (
      scope TEXT NOT NULL,
      counter TEXT NOT NULL,
      used INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      PRIMARY KEY (scope, counter)
    )`,
    sql`CREATE INDEX mesh_task_counters_expires_at ON mesh_task_counters (expires_at)`
  ], { discard: true })
)
