import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A pool belongs to the grantee of its mandate (the `grantee` column, taken from the verified token), no longer to
 * the API key that happened to open it first. The column that named that key is renamed, so nothing reads it as an
 * owner again; it keeps who opened the pool, for the record only (an API key id on rows older than this migration,
 * the grantee's DID after it). Existing pools keep working, now owned by their grantee.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`ALTER TABLE mesh_pools RENAME COLUMN owner_key_id TO opened_by`.pipe(Effect.asVoid)
)
