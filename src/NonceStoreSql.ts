/**
 * The SQL layer of `NonceStore`: replays stay refused across restarts and across processes sharing the database.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NonceReplayed, NonceStore, type NonceStoreApi, NonceStoreUnavailable } from "./NonceStore.js"

/** Delete expired rows once every this many records, so the table stays the size of the live window. */
const PURGE_EVERY = 1024

/** A store on the migrated `SqlClient` (see `Database`). */
export const make: Effect.Effect<NonceStoreApi, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  let sincePurge = 0
  const unavailable = (e: { readonly message: string }) => new NonceStoreUnavailable({ message: e.message })

  return {
    record: (sender, nonce, retainUntilMs) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (++sincePurge >= PURGE_EVERY) {
          sincePurge = 0
          yield* sql`DELETE FROM mesh_nonces WHERE expires_at <= ${now}`.pipe(Effect.mapError(unavailable))
        }
        // One statement decides: a new pair inserts, an expired pair is taken over, a live pair returns no row.
        const rows = yield* sql<{ sender: string }>`
          INSERT INTO mesh_nonces (sender, nonce, expires_at) VALUES (${sender}, ${nonce}, ${retainUntilMs})
          ON CONFLICT (sender, nonce) DO UPDATE SET expires_at = excluded.expires_at
          WHERE mesh_nonces.expires_at <= ${now}
          RETURNING sender`.pipe(Effect.mapError(unavailable))
        if (rows.length === 0) return yield* Effect.fail(new NonceReplayed({ sender, nonce }))
      })
  }
})

/** `NonceStore` on SQL; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layer: Layer.Layer<NonceStore, never, SqlClient.SqlClient> = Layer.effect(NonceStore, make)
