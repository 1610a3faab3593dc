/**
 * The SQL layer of `TaskStore`: counters and paused tasks survive restarts and are shared by processes on one
 * database. A claim is one conditional UPDATE, so the database itself picks the one winner.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  isAdjustment,
  limitReached,
  notPaused,
  type PausedTask,
  type PausedTaskStatus,
  PauseRefused,
  precheck,
  PURGE_TASKS_EVERY,
  storable,
  TaskStore,
  type TaskStoreApi,
  TaskStoreUnavailable
} from "../core/TaskStore.js"
import { summarize } from "./SqlFailure.js"

/** Delete counters of expired mandates once every this many charges. */
const PURGE_EVERY = 1024

interface TaskRow {
  readonly task_id: string
  readonly owner: string
  readonly capability: string
  readonly mandate_jti: string
  readonly grantor: string
  readonly mandate: string
  readonly state: string
  readonly status: string
  readonly created_at: number | bigint | string
  readonly expires_at: number | bigint | string
}

const isStatus = (s: string): s is PausedTaskStatus => s === "paused" || s === "resumed" || s === "cancelled"

/** A store on the migrated `SqlClient` (see `Database`). */
export const make: Effect.Effect<TaskStoreApi, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  let sincePurge = 0
  let sinceTaskPurge = 0
  const refused = (message: string) => new TaskStoreUnavailable({ code: "TASK_STORE_UNAVAILABLE", message })
  // Every database failure here is the store's, whatever its reason: limits and taken ids are decided by the
  // statements themselves (a row returned or not), never by a constraint firing.
  const unavailable = (e: unknown) => refused(summarize(e))
  // A row this layer did not write (bad JSON, unknown status) is a broken database, not a missing task: fail closed.
  const fromRow = (r: TaskRow): Effect.Effect<PausedTask & { readonly status: PausedTaskStatus }, TaskStoreUnavailable> =>
    Effect.try({
      try: () => {
        if (!isStatus(r.status)) throw new Error(`unknown status ${JSON.stringify(r.status)}`)
        return {
          taskId: r.task_id,
          owner: r.owner,
          capability: r.capability,
          mandateJti: r.mandate_jti,
          grantor: r.grantor,
          mandate: r.mandate,
          state: JSON.parse(r.state) as unknown,
          createdAt: Number(r.created_at),
          expiresAt: Number(r.expires_at),
          status: r.status
        }
      },
      catch: (e) => refused(`paused task ${r.task_id} is unreadable: ${e instanceof Error ? e.message : String(e)}`)
    })

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
        // no row, the transaction rolls back, and no counter of this charge moves. The upsert is atomic per row on
        // either engine (Postgres re-checks the WHERE on the row it locked), so concurrent charges from several
        // processes cannot pass a limit between them.
        yield* Effect.forEach(charges, (c) =>
          Effect.flatMap(
            sql<{ used: number }>`
              INSERT INTO mesh_task_counters (scope, counter, used, expires_at)
              VALUES (${c.scope}, ${c.counter}, ${c.amount}, ${expires})
              ON CONFLICT (scope, counter) DO UPDATE SET used = mesh_task_counters.used + excluded.used,
                expires_at = CASE WHEN excluded.expires_at > mesh_task_counters.expires_at THEN excluded.expires_at ELSE mesh_task_counters.expires_at END
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
    adjust: (adjustments, retainUntilMs) => {
      const expires = Math.floor(retainUntilMs)
      // The clamp is in the statement, so concurrent adjustments and charges on one counter stay within 0 … limit.
      return Effect.forEach(adjustments.filter((a) => isAdjustment(a) && a.delta !== 0), (a) =>
        a.delta < 0
          ? sql`UPDATE mesh_task_counters SET used = CASE WHEN used + ${a.delta} < 0 THEN 0 ELSE used + ${a.delta} END
              WHERE scope = ${a.scope} AND counter = ${a.counter}`
          : sql`
              INSERT INTO mesh_task_counters (scope, counter, used, expires_at)
              VALUES (${a.scope}, ${a.counter}, ${Math.min(a.limit, a.delta)}, ${expires})
              ON CONFLICT (scope, counter) DO UPDATE SET
                used = CASE WHEN mesh_task_counters.used >= ${a.limit} THEN mesh_task_counters.used
                  WHEN mesh_task_counters.used + ${a.delta} > ${a.limit} THEN ${a.limit} ELSE mesh_task_counters.used + ${a.delta} END,
                expires_at = CASE WHEN excluded.expires_at > mesh_task_counters.expires_at THEN excluded.expires_at ELSE mesh_task_counters.expires_at END`, { discard: true }).pipe(
        sql.withTransaction,
        Effect.mapError(unavailable)
      )
    },
    used: (scope, counter) =>
      sql<{ used: number }>`SELECT used FROM mesh_task_counters WHERE scope = ${scope} AND counter = ${counter}`.pipe(
        Effect.map((rows) => Number(rows[0]?.used ?? 0)),
        Effect.mapError(unavailable)
      ),
    pause: (input) =>
      Effect.gen(function* () {
        const ok = storable(input)
        if (ok instanceof PauseRefused) return yield* Effect.fail(ok)
        const t = ok.task
        if (++sinceTaskPurge >= PURGE_TASKS_EVERY) {
          sinceTaskPurge = 0
          const now = yield* Clock.currentTimeMillis
          yield* sql`DELETE FROM mesh_paused_tasks WHERE expires_at <= ${now}`.pipe(Effect.mapError(unavailable))
        }
        // An existing id is never overwritten: a resumed task paused again under its old id could be reopened by
        // the approval that already resumed it once.
        const rows = yield* sql<{ task_id: string }>`
          INSERT INTO mesh_paused_tasks (task_id, owner, capability, mandate_jti, grantor, mandate, state, status, created_at, expires_at)
          VALUES (${t.taskId}, ${t.owner}, ${t.capability}, ${t.mandateJti}, ${t.grantor}, ${t.mandate}, ${ok.stateJson}, 'paused',
            ${t.createdAt}, ${t.expiresAt})
          ON CONFLICT (task_id) DO NOTHING
          RETURNING task_id`.pipe(Effect.mapError(unavailable))
        if (rows.length === 0) {
          return yield* Effect.fail(new PauseRefused({ code: "TASK_ID_TAKEN", message: `task ${t.taskId} already exists`, taskId: t.taskId }))
        }
      }),
    paused: (taskId) =>
      sql<TaskRow>`SELECT * FROM mesh_paused_tasks WHERE task_id = ${taskId}`.pipe(
        Effect.mapError(unavailable),
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeedNone : Effect.asSome(fromRow(rows[0]))))
      ),
    claim: (taskId, to) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const won = yield* sql<TaskRow>`
          UPDATE mesh_paused_tasks SET status = ${to}
          WHERE task_id = ${taskId} AND status = 'paused' AND expires_at > ${now}
          RETURNING *`.pipe(Effect.mapError(unavailable))
        if (won[0] !== undefined) {
          const { status: _status, ...task } = yield* fromRow(won[0])
          return task
        }
        // Lost: read the row only to say why; a task never goes back to `paused`, so the answer cannot flip.
        const found = yield* sql<TaskRow>`SELECT * FROM mesh_paused_tasks WHERE task_id = ${taskId}`.pipe(Effect.mapError(unavailable))
        const row = found[0] === undefined ? undefined : yield* fromRow(found[0])
        return yield* Effect.fail(notPaused(taskId, row, now))
      })
  }
})

/** `TaskStore` on SQL; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layer: Layer.Layer<TaskStore, never, SqlClient.SqlClient> = Layer.effect(TaskStore, make)
