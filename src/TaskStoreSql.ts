/**
 * The SQL layer of `TaskStore`: counters survive restarts and are shared by processes on one database.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { limitReached, precheck, TaskStore, type TaskStoreApi, TaskStoreUnavailable } from "./TaskStore.js"

/** Delete counters of expired mandates once every this many charges. */
const PURGE_EVERY = 1024

/** A store on the migrated `SqlClient` (see `Database`). */
export const make: Effect.Effect<TaskStoreApi, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  let sincePurge = 0
  const unavailable = (e: { readonly message: string }) => new TaskStoreUnavailable({ code: "TASK_STORE_UNAVAILABLE", message: e.message })

  return {
    charge: (charges, retainUntilMs) =>
      Effect.gen(function* () {
        for (const c of charges) {
          const bad = precheck(c)
          if (bad) return yield* Effect.fail(bad)
        }
        if (++sincePurge >= PURGE_EVERY) {
          sincePurge = 0
          const now = yield* Clock.currentTimeMillis
          yield* sql`DELETE FROM mesh_task_counters WHERE expires_at <= ${now}`.pipe(Effect.mapError(unavailable))
        }
        const expires = Math.floor(retainUntilMs)
        // One conditional upsert per counter inside one transaction: a counter that would pass its limit returns
        // no row, the transaction rolls back, and no counter of this charge moves.
        yield* Effect.forEach(charges, (c) =>
          Effect.flatMap(
            sql<{ used: number }>`
              INSERT INTO mesh_task_counters (scope, counter, used, expires_at)
              VALUES (${c.scope}, ${c.counter}, ${c.amount}, ${expires})
              ON CONFLICT (scope, counter) DO UPDATE SET used = mesh_task_counters.used + excluded.used,
                expires_at = MAX(mesh_task_counters.expires_at, excluded.expires_at)
              WHERE mesh_task_counters.used + excluded.used <= ${c.limit}
              RETURNING used`.pipe(Effect.mapError(unavailable)),
            (rows) =>
              rows.length === 0
                ? Effect.fail(limitReached(c))
                : Effect.void
          ), { discard: true }).pipe(
          sql.withTransaction,
          Effect.catchTag("SqlError", (e) => Effect.fail(unavailable(e)))
        )
      }),
    used: (scope, counter) =>
      sql<{ used: number }>`SELECT used FROM mesh_task_counters WHERE scope = ${scope} AND counter = ${counter}`.pipe(
        Effect.map((rows) => Number(rows[0]?.used ?? 0)),
        Effect.mapError(unavailable)
      )
  }
})

/** `TaskStore` on SQL; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layer: Layer.Layer<TaskStore, never, SqlClient.SqlClient> = Layer.effect(TaskStore, make)
