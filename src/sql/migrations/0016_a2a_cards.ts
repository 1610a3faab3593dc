import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A2A agents in the registry: an entry of kind `a2a` (its `endpoint_url` the card's URL, its `tools` the card's skill
 * names, so search finds them) and here the card itself as the hub last fetched it.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  // Epoch milliseconds: past a 32-bit INTEGER on Postgres, the same width as SQLite's INTEGER as BIGINT.
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  return sql`CREATE TABLE mesh_a2a_cards (
    did TEXT PRIMARY KEY,
    card TEXT NOT NULL,
    fetched_at ${big} NOT NULL
  )`.pipe(Effect.asVoid)
})
