import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * When each agent was last heard from (registration, update or heartbeat), in epoch milliseconds, so the registry can
 * tell a live agent from one that stopped without deleting its record (docs/hub.md, "Liveness"). Rows from before
 * this migration have none and count as stale until their agent next writes. Heartbeats touch no indexed column, so
 * they do not rewrite the search docs.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  // Epoch milliseconds: past a 32-bit INTEGER on Postgres, the same width as SQLite's INTEGER as BIGINT.
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  return sql`ALTER TABLE mesh_entries ADD COLUMN last_seen_at ${big}`.pipe(Effect.asVoid)
})
