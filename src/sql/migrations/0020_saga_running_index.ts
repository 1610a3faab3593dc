import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Sagas by status and caller: a submission counts the running sagas (all, and the caller's) before it is accepted
 * (docs/sagas.md §1), which without this index reads every saga ever run. SQL both dialects accept.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE INDEX mesh_sagas_status_caller ON mesh_sagas (status, caller)`)
