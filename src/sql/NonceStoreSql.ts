/**
 * The SQL layer of `NonceStore`: replays stay refused across restarts and across processes sharing the database.
 * One statement records a nonce and enforces the sender's quota, so the hot path is one round trip; expired rows
 * are purged on a schedule (Effect `Schedule` on the `Clock`), not by the requests that happen to come in.
 *
 * The quota is read by key: `mesh_nonce_senders` counts the rows each sender holds (live, or expired and not yet
 * purged; triggers keep it, migration 0028), so the statement costs the same however many nonces the sender holds.
 * A sender refused at its count first drops its own expired rows and tries once more, so what it is refused for is
 * exactly its live nonces reaching the quota, as before.
 *
 * On a SQLite file the statement runs prepared on the `HotReads` connection, synchronously, which is what keeps a
 * signed request on the calling stack (no fiber, no `SqlClient` round of its own). That connection does not wait for
 * a lock: when another writer holds the database (a `SqlClient` transaction of this process that yielded, or another
 * process on a shared file) the record goes through `SqlClient`, which queues behind the one and waits for the other.
 * Either way the nonce is committed before the request is answered: nothing is batched or held in memory.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
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
import { HotReads } from "./Database.js"
import { classify, summarize } from "./SqlFailure.js"

/** Default time between purges of expired rows. */
export const DEFAULT_PURGE_INTERVAL_MS = 60_000

/** SQL store settings. */
export interface SqlOptions {
  /** Live nonces one sender may hold; default 6 250 (as the memory store's default). */
  readonly perSenderQuota?: number
  /** Time between purges of expired rows; default 60 s. */
  readonly purgeIntervalMs?: number
}

/** Expired rows the purge deletes per statement: a purge of a busy minute's nonces goes in steps, letting requests in. */
export const PURGE_CHUNK = 1_000

/**
 * Deletes expired rows, `PURGE_CHUNK` at a time with a yield between (a minute of a busy agent's nonces in one
 * statement held the event loop for a quarter of a second per 100 000), then the counts of senders left with none;
 * how many rows went.
 */
export const purgeExpired: Effect.Effect<number, NonceStoreUnavailable, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const now = yield* Clock.currentTimeMillis
  const unavailable = (e: unknown) => new NonceStoreUnavailable({ message: summarize(e) })
  let purged = 0
  for (;;) {
    // Through each sender's range of the (sender, expires_at) index: the expired rows, none of the live ones.
    const rows = yield* sql<{ sender: string }>`
      DELETE FROM mesh_nonces WHERE (sender, nonce) IN (
        SELECT sender, nonce FROM mesh_nonces
        WHERE sender IN (SELECT sender FROM mesh_nonce_senders) AND expires_at <= ${now} LIMIT ${PURGE_CHUNK}
      ) RETURNING sender`.pipe(Effect.mapError(unavailable))
    purged += rows.length
    if (rows.length < PURGE_CHUNK) break
    yield* Effect.yieldNow()
  }
  yield* sql`DELETE FROM mesh_nonce_senders WHERE held <= 0`.pipe(Effect.mapError(unavailable))
  return purged
})

/**
 * The record statement on SQLite, for the `HotReads` connection (positional parameters: sender, nonce, retain until,
 * sender, quota, now): a new pair inserts while the sender's count is under the quota, an expired pair is taken over,
 * a live pair (or a sender at its count) changes no row.
 */
export const RECORD_SQLITE = `INSERT INTO mesh_nonces (sender, nonce, expires_at)
  SELECT ?, ?, ? WHERE coalesce((SELECT held FROM mesh_nonce_senders WHERE sender = ?), 0) < ?
  ON CONFLICT (sender, nonce) DO UPDATE SET expires_at = excluded.expires_at WHERE mesh_nonces.expires_at <= ?`

/** A store on the migrated `SqlClient` (see `Database`); its purge runs until the scope closes. */
export const make = (options: SqlOptions = {}): Effect.Effect<NonceStoreApi, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const hot = yield* Effect.serviceOption(HotReads)
    const quota = options.perSenderQuota ?? DEFAULT_PER_SENDER_QUOTA
    // Every failure here is the store's, whatever its reason (the statements expect no constraint to fire).
    const unavailable = (e: unknown) => new NonceStoreUnavailable({ message: summarize(e) })

    yield* purgeExpired.pipe(
      Effect.catchAll((e) => Effect.logWarning(`nonce purge failed: ${e.message}`)),
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.repeat(Schedule.spaced(Duration.millis(options.purgeIntervalMs ?? DEFAULT_PURGE_INTERVAL_MS))),
      Effect.forkScoped
    )

    // The unique key decides between processes too: on Postgres a second insert of a pair waits for the first to
    // commit, then takes the conflict branch and finds it live, so a replay is refused by whichever replica sees it
    // second. True when the pair was recorded.
    const insert = (sender: string, nonce: string, retainUntilMs: number, now: number): Effect.Effect<boolean, NonceStoreUnavailable> =>
      Effect.map(
        sql<{ sender: string }>`
          INSERT INTO mesh_nonces (sender, nonce, expires_at)
          SELECT ${sender}, ${nonce}, CAST(${Math.floor(retainUntilMs)} AS BIGINT)
          WHERE COALESCE((SELECT held FROM mesh_nonce_senders WHERE sender = ${sender}), 0) < ${quota}
          ON CONFLICT (sender, nonce) DO UPDATE SET expires_at = excluded.expires_at
          WHERE mesh_nonces.expires_at <= ${now}
          RETURNING sender`.pipe(Effect.mapError(unavailable)),
        (rows) => rows.length > 0
      )

    // Refused: a replay if the pair is live; else the sender's count reached the quota, which may count expired rows
    // not yet purged: those of this sender go, and the record is tried once more. The rare path pays these queries.
    const refused = (sender: string, nonce: string, retainUntilMs: number, now: number, again: boolean): Effect.Effect<void, NonceReplayed | NonceQuotaExceeded | NonceStoreUnavailable> =>
      Effect.gen(function* () {
        const [held] = yield* sql<{ expires_at: number }>`SELECT expires_at FROM mesh_nonces WHERE sender = ${sender} AND nonce = ${nonce}`.pipe(
          Effect.mapError(unavailable)
        )
        if (held !== undefined && Number(held.expires_at) > now) return yield* Effect.fail(new NonceReplayed({ sender, nonce }))
        if (again) {
          const dropped = yield* sql<{ sender: string }>`DELETE FROM mesh_nonces WHERE sender = ${sender} AND expires_at <= ${now} RETURNING sender`.pipe(
            Effect.mapError(unavailable)
          )
          if (dropped.length > 0) {
            if (yield* insert(sender, nonce, retainUntilMs, now)) return
            return yield* refused(sender, nonce, retainUntilMs, now, false)
          }
        }
        const [next] = yield* sql<{ expires_at: number }>`
          SELECT expires_at FROM mesh_nonces WHERE sender = ${sender} AND expires_at > ${now} ORDER BY expires_at LIMIT 1`.pipe(Effect.mapError(unavailable))
        return yield* Effect.fail(new NonceQuotaExceeded({ sender, quota, retryAfterMs: Math.max(0, (next === undefined ? now : Number(next.expires_at)) - now) }))
      })

    const viaClient = (sender: string, nonce: string, retainUntilMs: number, now: number) =>
      Effect.flatMap(insert(sender, nonce, retainUntilMs, now), (recorded) => (recorded ? Effect.void : refused(sender, nonce, retainUntilMs, now, true)))

    const recordAt: NonceStoreApi["recordAt"] & {} = Option.match(hot, {
      onNone: () => viaClient,
      onSome: (reads) => {
        const statement = reads.prepareRun(RECORD_SQLITE)
        return (sender, nonce, retainUntilMs, now) =>
          Effect.suspend(() => {
            let changed: number
            try {
              changed = statement(sender, nonce, Math.floor(retainUntilMs), sender, quota, now)
            } catch (e) {
              // Locked by another writer: SqlClient queues behind it (or waits for it); anything else fails closed.
              const failure = classify(e)
              return failure.reason === "Busy" ? viaClient(sender, nonce, retainUntilMs, now) : Effect.fail(new NonceStoreUnavailable({ message: `${failure.reason}: ${failure.message}` }))
            }
            return changed > 0 ? Effect.void : refused(sender, nonce, retainUntilMs, now, true)
          })
      }
    })

    return {
      recordAt,
      record: (sender, nonce, retainUntilMs) => Effect.flatMap(Clock.currentTimeMillis, (now) => recordAt(sender, nonce, retainUntilMs, now))
    }
  })

/** `NonceStore` on SQL with these settings; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layerWith = (options: SqlOptions): Layer.Layer<NonceStore, never, SqlClient.SqlClient> => Layer.scoped(NonceStore, make(options))

/** `NonceStore` on SQL with the default settings; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layer: Layer.Layer<NonceStore, never, SqlClient.SqlClient> = layerWith({})
