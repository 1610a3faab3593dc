/**
 * Per-key token buckets on Effect's Clock (so tests drive them with TestClock): `capacity` requests at once, refilled
 * at `perMinute` a minute. Bounded: when `maxKeys` buckets exist, the least recently used is forgotten (a forgotten
 * bucket comes back full, which only ever errs toward letting a request through). Hubs sharing a Postgres database
 * share their buckets too (`SharedRateLimits`, `makeSql`).
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The key has no token left; `retryAfterSeconds` is when the next one arrives. */
export class RateLimitExceeded extends Data.TaggedError("RateLimitExceeded")<{ readonly retryAfterSeconds: number }> {}

/** Rate limiter settings. */
export interface RateLimitOptions {
  /** Requests allowed in a burst. */
  readonly capacity: number
  /** Tokens added per minute. */
  readonly perMinute: number
  /** Buckets kept at most (default 10 000). */
  readonly maxKeys?: number
}

/** A rate limiter. */
export interface RateLimiter {
  /** Takes one token for `key`, or fails with when to retry. */
  readonly take: (key: string) => Effect.Effect<void, RateLimitExceeded>
}

/** A new limiter with its own buckets. */
export const make = (options: RateLimitOptions): RateLimiter => {
  const maxKeys = options.maxKeys ?? 10_000
  const perMs = options.perMinute / 60_000
  const buckets = new Map<string, { tokens: number; at: number }>()
  return {
    take: (key) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        let b = buckets.get(key)
        if (b === undefined) {
          if (buckets.size >= maxKeys) {
            const oldest = buckets.keys().next()
            if (!oldest.done) buckets.delete(oldest.value)
          }
          b = { tokens: options.capacity, at: now }
        } else {
          buckets.delete(key) // re-inserted below: Map order is recency order
          b.tokens = Math.min(options.capacity, b.tokens + (now - b.at) * perMs)
          b.at = now
        }
        buckets.set(key, b)
        if (b.tokens >= 1) {
          b.tokens -= 1
          return Effect.void
        }
        const retryAfterSeconds = perMs > 0 ? Math.max(1, Math.ceil((1 - b.tokens) / perMs / 1000)) : 60
        return Effect.fail(new RateLimitExceeded({ retryAfterSeconds }))
      })
  }
}

/**
 * Where a hub keeps its rate limits: absent, each limiter keeps its buckets in this process; present (hubs on one
 * Postgres database), every limiter takes from buckets in the database, so N hubs behind a load balancer hold a
 * client to one limit, not N.
 */
export class SharedRateLimits extends Context.Tag("agent-mesh/SharedRateLimits")<SharedRateLimits, {
  /** A limiter over the database's buckets; `name` keeps one limiter's keys apart from another's. */
  readonly make: (name: string, options: RateLimitOptions) => RateLimiter
}>() {}

/** Delete buckets that have refilled (and so say nothing) once every this many takes. */
const SHARED_PURGE_EVERY = 1024

/**
 * Token buckets in the database (migration 0019), one row per key. A take is one conditional upsert: the bucket is
 * refilled to `now` and spent in the statement that checks it, so concurrent takes from several hubs cannot spend
 * one token twice. A database that cannot answer lets the request through (as a forgotten memory bucket would):
 * the limiter only slows clients down, and the request itself meets the database's failure next.
 */
export const makeSql = (sql: SqlClient.SqlClient, name: string, options: RateLimitOptions): RateLimiter => {
  const perMs = options.perMinute / 60_000
  const capacity = options.capacity
  // Full again after this long: older rows can go.
  const refillMs = perMs > 0 ? Math.ceil(capacity / perMs) : 24 * 3_600_000
  let sincePurge = 0
  return {
    take: (key) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const k = `${name}:${key}`
        if (++sincePurge >= SHARED_PURGE_EVERY) {
          sincePurge = 0
          yield* Effect.ignore(sql`DELETE FROM mesh_rate_limits WHERE key LIKE ${`${name}:%`} AND at < ${now - refillMs}`)
        }
        // The bucket as of now: its tokens plus what refilled since `at` (never negative under clock skew), capped.
        const level = sql`(CASE WHEN mesh_rate_limits.tokens + (CASE WHEN ${now} > mesh_rate_limits.at THEN ${now} - mesh_rate_limits.at ELSE 0 END) * CAST(${perMs} AS DOUBLE PRECISION) > ${capacity}
          THEN CAST(${capacity} AS DOUBLE PRECISION)
          ELSE mesh_rate_limits.tokens + (CASE WHEN ${now} > mesh_rate_limits.at THEN ${now} - mesh_rate_limits.at ELSE 0 END) * CAST(${perMs} AS DOUBLE PRECISION) END)`
        const taken = yield* sql<{ tokens: number }>`
          INSERT INTO mesh_rate_limits (key, tokens, at) VALUES (${k}, CAST(${capacity - 1} AS DOUBLE PRECISION), CAST(${now} AS BIGINT))
          ON CONFLICT (key) DO UPDATE SET tokens = ${level} - 1,
            at = CASE WHEN excluded.at > mesh_rate_limits.at THEN excluded.at ELSE mesh_rate_limits.at END
          WHERE ${level} >= 1
          RETURNING tokens`.pipe(Effect.either)
        if (taken._tag === "Left") {
          yield* Effect.logWarning(`shared rate limit ${name} unavailable, letting the request through: ${String(taken.left)}`)
          return
        }
        if (taken.right.length > 0) return
        const [row] = yield* Effect.orElseSucceed(sql<{ tokens: number; at: number }>`SELECT tokens, at FROM mesh_rate_limits WHERE key = ${k}`, () => [])
        const tokens = row === undefined ? 0 : Math.min(capacity, Number(row.tokens) + Math.max(0, now - Number(row.at)) * perMs)
        const retryAfterSeconds = perMs > 0 ? Math.max(1, Math.ceil((1 - tokens) / perMs / 1000)) : 60
        return yield* Effect.fail(new RateLimitExceeded({ retryAfterSeconds }))
      })
  }
}

/** `SharedRateLimits` on the migrated `SqlClient` of the hubs' shared database. */
export const layerShared: Layer.Layer<SharedRateLimits, never, SqlClient.SqlClient> = Layer.effect(
  SharedRateLimits,
  Effect.map(SqlClient.SqlClient, (sql) => ({ make: (name: string, options: RateLimitOptions) => makeSql(sql, name, options) }))
)

/** The limiter `name`: in the shared database when the hub has one (`SharedRateLimits`), else in this process. */
export const limiter = (name: string, options: RateLimitOptions): Effect.Effect<RateLimiter> =>
  Effect.map(Effect.serviceOption(SharedRateLimits), (shared) => (shared._tag === "Some" ? shared.value.make(name, options) : make(options)))
