import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * `GET /v1/sagas` reads one caller's sagas newest first, a page at a time (keyset on `created_at`, then `id`): this
 * index holds them in that order, so a page costs its own rows, not the caller's whole history.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE INDEX mesh_sagas_listing ON mesh_sagas (caller, created_at, id)`)
