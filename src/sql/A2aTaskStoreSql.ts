/**
 * `A2aTaskStore` on SQL (migration 0023): an agent's A2A tasks and their events outlive a restart and are shared by
 * replicas on one database. Making room and keeping a task is one transaction (on Postgres under one advisory lock,
 * so replicas do not both fill the last room); a task's events go when it does.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  type A2aTaskBounds,
  type A2aTaskRecord,
  A2aTaskStore,
  type A2aTaskStoreApi,
  A2aTaskStoreUnavailable,
  type A2aTaskWrite,
  DEFAULT_BOUNDS,
  toLetGo,
  updatedOf
} from "../core/A2aTaskStore.js"
import { summarize } from "./SqlFailure.js"

interface Row {
  readonly task_id: string
  readonly principal: string
  readonly holder: string
  readonly context_id: string
  readonly state: string
  readonly gate_task_id: string | null
  readonly body: string
  readonly bytes: number | string | bigint
  readonly seq: number | string
  readonly ended: number | string
}

/** What of a record the `body` column holds. */
interface Body {
  readonly statusMessage?: unknown
  readonly timestamp: string
  readonly history: ReadonlyArray<unknown>
  readonly text: string
}

const bodyOf = (r: A2aTaskRecord): string =>
  JSON.stringify({ ...(r.statusMessage === undefined ? {} : { statusMessage: r.statusMessage }), timestamp: r.timestamp, history: r.history, text: r.text } satisfies Body)

/** A task canceled (here or on another replica) stays canceled: the run still going elsewhere does not overwrite it. */
const CANCELED = "TASK_STATE_CANCELED"

/** An arbitrary constant naming the lock replicas take while they make room. */
const LOCK_KEY = 7_402_023

/** The store on the migrated `SqlClient`, with these bounds. */
export const make = (bounds: A2aTaskBounds = DEFAULT_BOUNDS): Effect.Effect<A2aTaskStoreApi, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (sql) => {
    const unavailable = (e: unknown) => new A2aTaskStoreUnavailable({ code: "STORE_UNAVAILABLE", message: summarize(e) })
    let seen = { tasks: 0, bytes: 0 }
    const lock = sql.onDialectOrElse({ pg: () => sql`SELECT pg_advisory_xact_lock(${LOCK_KEY})`, orElse: () => Effect.void })

    // A row this layer did not write is a broken database, not a missing task: fail closed.
    const fromRow = (r: Row): Effect.Effect<A2aTaskRecord, A2aTaskStoreUnavailable> =>
      Effect.try({
        try: () => {
          const body = JSON.parse(r.body) as Body
          if (typeof body.timestamp !== "string" || !Array.isArray(body.history) || typeof body.text !== "string") throw new Error("its body is malformed")
          return {
            id: r.task_id,
            contextId: r.context_id,
            principal: r.principal,
            holder: r.holder,
            state: r.state,
            statusMessage: body.statusMessage,
            timestamp: body.timestamp,
            history: body.history,
            text: body.text,
            gateTaskId: r.gate_task_id ?? undefined,
            ended: Number(r.ended) === 1,
            bytes: Number(r.bytes),
            seq: Number(r.seq)
          }
        },
        catch: (e) => new A2aTaskStoreUnavailable({ code: "STORE_UNAVAILABLE", message: `A2A task ${r.task_id} is unreadable: ${e instanceof Error ? e.message : String(e)}` })
      })

    const forget = (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.void
        : Effect.zipRight(sql`DELETE FROM mesh_a2a_tasks WHERE task_id IN ${sql.in(ids)}`, sql`DELETE FROM mesh_a2a_task_events WHERE task_id IN ${sql.in(ids)}`)

    /** Lets expired ended tasks go, then as many more (oldest ended first) as `need` bytes and `count` tasks of `holder` need; the totals left. */
    const makeRoom = (now: number, holder: string, need: number, count: number) =>
      Effect.gen(function* () {
        const expired = yield* sql<{ task_id: string }>`SELECT task_id FROM mesh_a2a_tasks WHERE ended = 1 AND ended_at < ${now - bounds.retentionMs}`
        yield* forget(expired.map((r) => r.task_id))
        const [all] = yield* sql<{ n: number | string; b: number | string | null }>`SELECT count(*) AS n, sum(bytes) AS b FROM mesh_a2a_tasks`
        const [own] = yield* sql<{ b: number | string | null }>`SELECT sum(bytes) AS b FROM mesh_a2a_tasks WHERE holder = ${holder}`
        let totals = { tasks: Number(all?.n ?? 0), bytes: Number(all?.b ?? 0), held: Number(own?.b ?? 0) }
        const over = totals.tasks + count > bounds.maxTasks || totals.bytes + need > bounds.maxBytes || totals.held + need > bounds.maxBytesPerCaller
        if (over) {
          const ended = yield* sql<{ task_id: string; holder: string; bytes: number | string }>`
            SELECT task_id, holder, bytes FROM mesh_a2a_tasks WHERE ended = 1 ORDER BY ended_at, task_id`
          const gone = toLetGo(bounds, totals, holder, need, count, ended.map((r) => ({ id: r.task_id, holder: r.holder, bytes: Number(r.bytes) })))
          yield* forget(gone)
          const goneSet = new Set(gone)
          for (const r of ended) {
            if (!goneSet.has(r.task_id)) continue
            totals = { tasks: totals.tasks - 1, bytes: totals.bytes - Number(r.bytes), held: totals.held - (r.holder === holder ? Number(r.bytes) : 0) }
          }
        }
        seen = { tasks: totals.tasks, bytes: totals.bytes }
        return totals
      })

    const insert: A2aTaskStoreApi["insert"] = (r, now) =>
      Effect.gen(function* () {
        yield* lock
        const t = yield* makeRoom(now, r.holder, r.bytes, 1)
        if (t.tasks + 1 > bounds.maxTasks || t.bytes + r.bytes > bounds.maxBytes || t.held + r.bytes > bounds.maxBytesPerCaller) return false
        const added = yield* sql<{ task_id: string }>`
          INSERT INTO mesh_a2a_tasks (task_id, principal, holder, context_id, state, gate_task_id, body, bytes, seq, ended, ended_at, updated_at)
          VALUES (${r.id}, ${r.principal}, ${r.holder}, ${r.contextId}, ${r.state}, ${r.gateTaskId ?? null}, ${bodyOf(r)}, ${r.bytes}, ${r.seq},
            ${r.ended ? 1 : 0}, ${r.ended ? now : null}, ${updatedOf(r, now)})
          ON CONFLICT (task_id) DO NOTHING RETURNING task_id`
        if (added.length > 0) seen = { tasks: t.tasks + 1, bytes: t.bytes + r.bytes }
        return added.length > 0
      }).pipe(sql.withTransaction, Effect.mapError(unavailable))

    const one = (w: A2aTaskWrite) => {
      if (w._tag === "Event") {
        // Only for a task still kept: one let go keeps no events.
        return sql`INSERT INTO mesh_a2a_task_events (task_id, seq, event)
          SELECT ${w.id}, CAST(${w.seq} AS INTEGER), ${w.event} WHERE EXISTS (SELECT 1 FROM mesh_a2a_tasks WHERE task_id = ${w.id})
          ON CONFLICT (task_id, seq) DO NOTHING`
      }
      const r = w.record
      return Effect.zipRight(
        sql`UPDATE mesh_a2a_tasks SET state = ${r.state}, gate_task_id = ${r.gateTaskId ?? null}, body = ${bodyOf(r)}, bytes = ${r.bytes}, seq = ${r.seq},
          ended = ${r.ended ? 1 : 0}, ended_at = ${r.ended ? w.at : null}, updated_at = ${updatedOf(r, w.at)} WHERE task_id = ${r.id} AND state <> ${CANCELED}`,
        // Its reply grew while it ran: room is made for it among the ended tasks (it may be the one let go).
        r.ended ? Effect.asVoid(makeRoom(w.at, r.holder, 0, 0)) : Effect.void
      )
    }

    return {
      insert,
      write: (writes) => {
        if (writes.length === 0) return Effect.void
        // A batch that makes room takes the lock first, before any row lock of its own: the order `insert` takes them in.
        const locks = writes.some((w) => w._tag === "Save" && w.record.ended)
        return Effect.zipRight(locks ? lock : Effect.void, Effect.forEach(writes, one, { discard: true })).pipe(sql.withTransaction, Effect.mapError(unavailable))
      },
      find: (id, principal) =>
        sql<Row>`SELECT * FROM mesh_a2a_tasks WHERE task_id = ${id} AND principal = ${principal}`.pipe(
          Effect.mapError(unavailable),
          Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(undefined) : fromRow(rows[0])))
        ),
      list: (q) =>
        Effect.gen(function* () {
          // Index 0026 (principal, holder, updated_at, task_id) serves both the count and the page.
          const filters = [
            sql`principal = ${q.principal}`,
            sql`holder = ${q.holder}`,
            ...(q.contextId === undefined ? [] : [sql`context_id = ${q.contextId}`]),
            ...(q.state === undefined ? [] : [sql`state = ${q.state}`]),
            ...(q.updatedAfter === undefined ? [] : [sql`updated_at >= ${q.updatedAfter}`])
          ]
          const [count] = yield* sql<{ n: number | string }>`SELECT count(*) AS n FROM mesh_a2a_tasks WHERE ${sql.and(filters)}`
          const after = q.after
          const page = after === undefined ? filters : [...filters, sql`(updated_at < ${after.updated} OR (updated_at = ${after.updated} AND task_id < ${after.id}))`]
          const rows = yield* sql<Row>`SELECT * FROM mesh_a2a_tasks WHERE ${sql.and(page)} ORDER BY updated_at DESC, task_id DESC LIMIT ${q.limit}`
          const records = yield* Effect.forEach(rows, fromRow)
          return { records, total: Number(count?.n ?? 0) }
        }).pipe(Effect.mapError((e) => (e instanceof A2aTaskStoreUnavailable ? e : unavailable(e)))),
      events: (id, from, limit) =>
        Effect.gen(function* () {
          const [kept] = yield* sql<{ task_id: string }>`SELECT task_id FROM mesh_a2a_tasks WHERE task_id = ${id}`
          if (kept === undefined) return undefined
          const rows = yield* sql<{ event: string }>`SELECT event FROM mesh_a2a_task_events WHERE task_id = ${id} AND seq >= ${from} ORDER BY seq LIMIT ${limit}`
          return rows.map((r) => r.event)
        }).pipe(Effect.mapError(unavailable)),
      stats: () => seen
    }
  })

/** `A2aTaskStore` on SQL with these bounds; provide a migrated `SqlClient` (`Database.layer`). */
export const layer = (bounds: A2aTaskBounds = DEFAULT_BOUNDS): Layer.Layer<A2aTaskStore, never, SqlClient.SqlClient> => Layer.effect(A2aTaskStore, make(bounds))
