import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Token buckets shared by every hub on one database (`RateLimiterSql`): one row per limited key, its tokens as of
 * `at`. A take is one conditional upsert, so hubs taking from one bucket at once cannot both spend its last token.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  const real = sql.onDialectOrElse({ pg: () => sql.literal("DOUBLE PRECISION"), orElse: () => sql.literal("REAL") })
  return Effect.all([
    sql`CREATE TABLE mesh_rate_limits (
      key TEXT PRIMARY KEY,
      tokens ${real} NOT NULL,
      at ${big} NOT NULL
    )`,
    sql`CREATE INDEX mesh_rate_limits_at ON mesh_rate_limits (at)`
  ], { discard: true })
})
