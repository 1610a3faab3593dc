import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * When each agent was last heard from (registration, update or heartbeat), in epoch milliseconds, so the registry can
 * tell a live agent from one that stopped without deleting its record (docs/hub.md, "Liveness"). Rows from before
 * this migration have none and count as stale until their agent next writes. Heartbeats touch no indexed column, so
 * they do not rewrite the search docs.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`ALTER TABLE mesh_entries ADD COLUMN last_seen_at INTEGER`.pipe(Effect.asVoid)
)
