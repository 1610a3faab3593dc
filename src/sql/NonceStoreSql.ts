/**
 * The SQL layer of `NonceStore`: replays stay refused across restarts and across processes sharing the database.
 * One statement records a nonce and enforces the sender's quota, so the hot path is one round trip; expired rows
 * are purged on a schedule (Effect `Schedule` on the `Clock`), not by the requests that happen to come in.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import {
  DEFAULT_PER_SENDER_QUOTA,
  NonceQuotaExceeded,
  NonceReplayed,
  NonceStore,
  type NonceStoreApi,
  NonceStoreUnavailable
} from "../core/NonceStore.js"
import { summarize } from "./SqlFailure.js"

/** Default time between purges of expired rows. */
export const DEFAULT_PURGE_INTERVAL_MS = 60_000

/** SQL store settings. */
export interface SqlOptions {
  /** Live nonces one sender may hold; default 6 250 (as the memory store's default). */
  readonly perSenderQuota?: number
  /** Time between purges of expired rows; default 60 s. */
  readonly purgeIntervalMs?: number
}

/** Deletes expired rows; how many went. */
export const purgeExpired: Effect.Effect<number, NonceStoreUnavailable, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const now = yield* Clock.currentTimeMillis
  const rows = yield* sql<{ sender: string }>`DELETE FROM mesh_nonces WHERE expires_at <= ${now} RETURNING sender`.pipe(
    Effect.mapError((e) => new NonceStoreUnavailable({ message: summarize(e) }))
  )
  return rows.length
})

/** A store on the migrated `SqlClient` (see `Database`); its purge runs until the scope closes. */
export const make = (options: SqlOptions = {}): Effect.Effect<NonceStoreApi, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const quota = options.perSenderQuota ?? DEFAULT_PER_SENDER_QUOTA
    // Every failure here is the store's, whatever its reason (the statements expect no constraint to fire).
    const unavailable = (e: unknown) => new NonceStoreUnavailable({ message: summarize(e) })

    yield* purgeExpired.pipe(
      Effect.catchAll((e) => Effect.logWarning(`nonce purge failed: ${e.message}`)),
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.repeat(Schedule.spaced(Duration.millis(options.purgeIntervalMs ?? DEFAULT_PURGE_INTERVAL_MS))),
      Effect.forkScoped
    )

    return {
      record: (sender, nonce, retainUntilMs) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          // One statement decides: a new pair inserts while the sender is under its quota, an expired pair is taken
          // over, a live pair (or a sender at its quota) returns no row. The unique key decides between processes
          // too: on Postgres a second insert of a pair waits for the first to commit, then takes the conflict branch
          // and finds it live, so a replay is refused by whichever replica sees it second.
          const rows = yield* sql<{ sender: string }>`
            INSERT INTO mesh_nonces (sender, nonce, expires_at)
            SELECT ${sender}, ${nonce}, CAST(${Math.floor(retainUntilMs)} AS BIGINT)
            WHERE (SELECT COUNT(*) FROM mesh_nonces WHERE sender = ${sender} AND expires_at > ${now}) < ${quota}
            ON CONFLICT (sender, nonce) DO UPDATE SET expires_at = excluded.expires_at
            WHERE mesh_nonces.expires_at <= ${now}
            RETURNING sender`.pipe(Effect.mapError(unavailable))
          if (rows.length > 0) return
          // Refused: say whether it is a replay or the quota, and when the sender's next nonce expires (the rare path
          // pays the second query).
          const [live] = yield* sql<{ held: number | null; earliest: number | null }>`
            SELECT MAX(CASE WHEN nonce = ${nonce} THEN 1 ELSE 0 END) AS held, MIN(expires_at) AS earliest
            FROM mesh_nonces WHERE sender = ${sender} AND expires_at > ${now}`.pipe(Effect.mapError(unavailable))
          if (live?.held === 1) return yield* Effect.fail(new NonceReplayed({ sender, nonce }))
          return yield* Effect.fail(new NonceQuotaExceeded({ sender, quota, retryAfterMs: Math.max(0, (live?.earliest ?? now) - now) }))
        })
    }
  })

/** `NonceStore` on SQL with these settings; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layerWith = (options: SqlOptions): Layer.Layer<NonceStore, never, SqlClient.SqlClient> => Layer.scoped(NonceStore, make(options))

/** `NonceStore` on SQL with the default settings; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layer: Layer.Layer<NonceStore, never, SqlClient.SqlClient> = layerWith({})
