/**
 * `A2aTaskStore` on SQL (migrations 0023, 0029): an agent's A2A tasks and their events outlive a restart and are shared
 * by replicas on one database. Making room and keeping a task is one transaction (on Postgres under one advisory lock,
 * so replicas do not both fill the last room); a task's events go when it does.
 *
 * The bounds are checked against running totals (0029: the store's task count and bytes, and each holder's), which
 * every operation here that keeps, lets go or resizes a task changes in its own transaction (`Tracked`); room is made
 * from the oldest ended tasks read a page at a time in index order, so keeping a task costs the same with 10 tasks
 * kept as with 10 000.
 *
 * Each operation is written once, as the statements it runs (`Op`), and run by one of two drivers. On a SQLite file,
 * on a connection of the store's own (`Database.sqliteConnection`): prepared statements, each write one IMMEDIATE
 * transaction run synchronously from start to commit, a few µs a statement and no fiber needed, so an A2A request
 * that keeps its task can still be answered on the calling stack; a write that meets another connection's lock is
 * retried after a pause. Otherwise (Postgres, SQLite `:memory:`) through `SqlClient`.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { SqliteClient } from "@effect/sql-sqlite-node"
import type BetterSqlite3 from "better-sqlite3"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import {
  type A2aTaskBounds,
  type A2aTaskInsert,
  type A2aTaskRecord,
  A2aTaskStore,
  type A2aTaskStoreApi,
  A2aTaskStoreUnavailable,
  type A2aTaskWrite,
  DEFAULT_BOUNDS,
  shareFits,
  totalFits,
  updatedOf
} from "../core/A2aTaskStore.js"
import { type DatabaseError, isMemoryFile, sqliteConnection } from "./Database.js"
import { classify, summarize } from "./SqlFailure.js"

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

/** An arbitrary constant naming the lock replicas take while they change the totals. */
const LOCK_KEY = 7_402_023

/** Ended tasks read at a time while making room (usually one goes). */
const PAGE = 16

// The oldest ended tasks, one (the usual need once the store is full) or a page: each limit written into the text,
// which SQLite reads three times faster than a bound limit.
const OLDEST = "SELECT task_id, holder, bytes FROM mesh_a2a_tasks WHERE ended = 1 ORDER BY ended_at, task_id LIMIT"
const OLDEST_ONE = `${OLDEST} 1`
const OLDEST_PAGE = `${OLDEST} ${PAGE}`
const OLDEST_OWN = `SELECT task_id, holder, bytes FROM mesh_a2a_tasks WHERE holder = ? AND ended = 1 ORDER BY ended_at, task_id LIMIT ${PAGE}`

// ---------------------------------------------------------------------------------------------------------------
// Operations, as the statements they run.

type Param = string | number | null

/** One statement: SQLite's text with `?` placeholders (numbered `$n` for Postgres; no text holds a literal `?`). */
interface Statement {
  readonly text: string
  readonly params: ReadonlyArray<Param>
}

/** An operation of the store: its statements in order, each answered with its rows (none for a plain write). */
type Op<A> = Generator<Statement, A, ReadonlyArray<unknown>>

function* query<R = unknown>(text: string, ...params: ReadonlyArray<Param>): Op<ReadonlyArray<R>> {
  return (yield { text, params }) as ReadonlyArray<R>
}

/** The store's totals and `holder`'s bytes. */
interface Totals {
  readonly tasks: number
  readonly bytes: number
  readonly held: number
}

/**
 * The totals as one transaction has them: read once (a holder's when first needed), kept in step with every change it
 * makes to the tasks, and written back as the changes' sums when it ends (`settle`). Every statement that keeps, lets
 * go or resizes a task goes through here, so the totals stay exact.
 */
interface Tracked {
  tasks: number
  bytes: number
  /** Holders' bytes, as read and changed so far. */
  readonly held: Map<string, number>
  /** Each holder's change in tasks and bytes, to write back. */
  readonly changed: Map<string, { tasks: number; bytes: number }>
  /** No ended task ended before this (a bound: the earliest end when read, or a retention cutoff since applied). */
  endedSince: number
}

function* track(): Op<Tracked> {
  const [t] = yield* query<{ tasks: number | string; bytes: number | string; since: number | string | null }>(
    "SELECT tasks, bytes, (SELECT min(ended_at) FROM mesh_a2a_tasks WHERE ended = 1) AS since FROM mesh_a2a_task_totals WHERE id = 1"
  )
  return {
    tasks: Number(t?.tasks ?? 0),
    bytes: Number(t?.bytes ?? 0),
    held: new Map(),
    changed: new Map(),
    endedSince: t?.since == null ? Infinity : Number(t.since)
  }
}

function* heldBy(t: Tracked, holder: string): Op<number> {
  const known = t.held.get(holder)
  if (known !== undefined) return known
  const [h] = yield* query<{ bytes: number | string }>("SELECT bytes FROM mesh_a2a_task_holders WHERE holder = ?", holder)
  const held = Number(h?.bytes ?? 0) + (t.changed.get(holder)?.bytes ?? 0)
  t.held.set(holder, held)
  return held
}

/** Counts a task of `holder` and `bytes` out of the totals (`sign` -1) or into them (+1). */
const count = (t: Tracked, holder: string, bytes: number, sign: 1 | -1) => {
  t.tasks += sign
  t.bytes += sign * bytes
  const held = t.held.get(holder)
  if (held !== undefined) t.held.set(holder, held + sign * bytes)
  const changed = t.changed.get(holder)
  if (changed === undefined) t.changed.set(holder, { tasks: sign, bytes: sign * bytes })
  else {
    changed.tasks += sign
    changed.bytes += sign * bytes
  }
}

/** Writes the transaction's changes to the totals: the store's, and each holder's (whose row goes with its last task). */
function* settle(t: Tracked): Op<void> {
  let tasks = 0
  let bytes = 0
  for (const [holder, c] of t.changed) {
    if (c.tasks === 0 && c.bytes === 0) continue
    tasks += c.tasks
    bytes += c.bytes
    yield* query(
      `INSERT INTO mesh_a2a_task_holders (holder, tasks, bytes) VALUES (?, ?, ?)
        ON CONFLICT (holder) DO UPDATE SET tasks = mesh_a2a_task_holders.tasks + excluded.tasks, bytes = mesh_a2a_task_holders.bytes + excluded.bytes`,
      holder,
      c.tasks,
      c.bytes
    )
    if (c.tasks < 0) yield* query("DELETE FROM mesh_a2a_task_holders WHERE holder = ? AND tasks = 0", holder)
  }
  t.changed.clear()
  if (tasks !== 0 || bytes !== 0) yield* query("UPDATE mesh_a2a_task_totals SET tasks = tasks + ?, bytes = bytes + ? WHERE id = 1", tasks, bytes)
}

interface Ended {
  readonly task_id: string
  readonly holder: string
  readonly bytes: number | string
}

/** Lets a task go, with its events. */
function* drop(t: Tracked, r: Ended): Op<void> {
  yield* query("DELETE FROM mesh_a2a_tasks WHERE task_id = ?", r.task_id)
  yield* query("DELETE FROM mesh_a2a_task_events WHERE task_id = ?", r.task_id)
  count(t, r.holder, Number(r.bytes), -1)
}

/**
 * Lets ended tasks go: those ended for longer than the retention, then, oldest first, `holder`'s own until its share
 * has room for `need` more bytes, then any until the store has room for `count` more tasks and `need` more bytes.
 * The totals left.
 */
function* makeRoom(bounds: A2aTaskBounds, t: Tracked, now: number, holder: string, need: number, more: number): Op<Totals> {
  const cutoff = now - bounds.retentionMs
  if (cutoff > t.endedSince) {
    const expired = yield* query<Ended>("DELETE FROM mesh_a2a_tasks WHERE ended = 1 AND ended_at < ? RETURNING task_id, holder, bytes", cutoff)
    for (const r of expired) {
      yield* query("DELETE FROM mesh_a2a_task_events WHERE task_id = ?", r.task_id)
      count(t, r.holder, Number(r.bytes), -1)
    }
    t.endedSince = cutoff
  }
  // Each page's first task goes (the bound is still over), so every page read makes progress.
  while (!shareFits(bounds, yield* heldBy(t, holder), need)) {
    const page = yield* query<Ended>(OLDEST_OWN, holder)
    if (page.length === 0) break
    for (const r of page) {
      if (shareFits(bounds, yield* heldBy(t, holder), need)) break
      yield* drop(t, r)
    }
  }
  while (!totalFits(bounds, t.tasks, t.bytes, more, need)) {
    // Over by one task alone (the usual case once the store is full), one goes: read no more.
    const page = yield* query<Ended>(t.bytes + need <= bounds.maxBytes && t.tasks + more - bounds.maxTasks === 1 ? OLDEST_ONE : OLDEST_PAGE)
    if (page.length === 0) break
    for (const r of page) {
      if (totalFits(bounds, t.tasks, t.bytes, more, need)) break
      yield* drop(t, r)
    }
  }
  return { tasks: t.tasks, bytes: t.bytes, held: yield* heldBy(t, holder) }
}

/** Keeps each entry in order if it fits once room is made: whether each was kept, and the totals after the last. */
function* insertAllOp(bounds: A2aTaskBounds, entries: ReadonlyArray<A2aTaskInsert>): Op<{ readonly kept: ReadonlyArray<boolean>; readonly totals: Totals }> {
  const t = yield* track()
  const kept: Array<boolean> = []
  for (const { now, record: r } of entries) {
    const room = yield* makeRoom(bounds, t, now, r.holder, r.bytes, 1)
    if (!totalFits(bounds, room.tasks, room.bytes, 1, r.bytes) || !shareFits(bounds, room.held, r.bytes)) {
      kept.push(false)
      continue
    }
    const added = yield* query(
      `INSERT INTO mesh_a2a_tasks (task_id, principal, holder, context_id, state, gate_task_id, body, bytes, seq, ended, ended_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING RETURNING task_id`,
      r.id,
      r.principal,
      r.holder,
      r.contextId,
      ...stateColumns(r, now)
    )
    if (added.length > 0) {
      count(t, r.holder, r.bytes, 1)
      if (r.ended) t.endedSince = Math.min(t.endedSince, now)
    }
    kept.push(added.length > 0)
  }
  yield* settle(t)
  return { kept, totals: { tasks: t.tasks, bytes: t.bytes, held: 0 } }
}

/** What an insert and an update both write of a task at `at`: state, gate_task_id, body, bytes, seq, ended, ended_at, updated_at. */
const stateColumns = (r: A2aTaskRecord, at: number) =>
  [r.state, r.gateTaskId ?? null, bodyOf(r), r.bytes, r.seq, r.ended ? 1 : 0, r.ended ? at : null, updatedOf(r, at)] as const

/** The writes in order; the totals after the last that made room, if one did. */
function* writeOp(bounds: A2aTaskBounds, writes: ReadonlyArray<A2aTaskWrite>): Op<Totals | undefined> {
  let t: Tracked | undefined = undefined
  let totals: Totals | undefined = undefined
  for (const w of writes) {
    if (w._tag === "Event") {
      // Only for a task still kept: one let go keeps no events.
      yield* query(
        `INSERT INTO mesh_a2a_task_events (task_id, seq, event)
          SELECT ?, CAST(? AS INTEGER), ? WHERE EXISTS (SELECT 1 FROM mesh_a2a_tasks WHERE task_id = ?)
          ON CONFLICT (task_id, seq) DO NOTHING`,
        w.id,
        w.seq,
        w.event,
        w.id
      )
      continue
    }
    t ??= yield* track()
    const r = w.record
    const [was] = yield* query<{ holder: string; bytes: number | string }>("SELECT holder, bytes FROM mesh_a2a_tasks WHERE task_id = ? AND state <> ?", r.id, CANCELED)
    if (was === undefined) continue
    yield* query(
      `UPDATE mesh_a2a_tasks SET state = ?, gate_task_id = ?, body = ?, bytes = ?, seq = ?, ended = ?, ended_at = ?, updated_at = ?
        WHERE task_id = ?`,
      ...stateColumns(r, w.at),
      r.id
    )
    count(t, was.holder, Number(was.bytes), -1)
    count(t, was.holder, r.bytes, 1)
    if (!r.ended) continue
    t.endedSince = Math.min(t.endedSince, w.at)
    // Its reply grew while it ran: room is made for it among the ended tasks (it may be the one let go).
    totals = yield* makeRoom(bounds, t, w.at, r.holder, 0, 0)
  }
  if (t !== undefined) yield* settle(t)
  return totals
}

// ---------------------------------------------------------------------------------------------------------------
// Drivers.

/** Runs operations: `write` as one transaction (`locks`: it may change the totals), `read` statement by statement. */
interface Driver {
  readonly write: <A>(op: () => Op<A>, locks: boolean) => Effect.Effect<A, unknown>
  readonly read: <A>(op: () => Op<A>) => Effect.Effect<A, unknown>
}

/** Through `SqlClient`; on Postgres a write that may change the totals takes the store's lock first. */
const sqlDriver = (sql: SqlClient.SqlClient): Driver => {
  const numbered = new Map<string, string>()
  const textOf = sql.onDialectOrElse({
    pg: () => (text: string) => {
      let out = numbered.get(text)
      if (out === undefined) {
        let i = 0
        out = text.replace(/\?/g, () => `$${++i}`)
        numbered.set(text, out)
      }
      return out
    },
    orElse: () => (text: string) => text
  })
  const run = <A>(make: () => Op<A>): Effect.Effect<A, SqlError> =>
    Effect.suspend(() => {
      const op = make()
      const step = (rows: ReadonlyArray<unknown>): Effect.Effect<A, SqlError> => {
        const next = op.next(rows)
        return next.done ? Effect.succeed(next.value) : Effect.flatMap(sql.unsafe(textOf(next.value.text), next.value.params), step)
      }
      return step([])
    })
  const lock = sql.onDialectOrElse({ pg: () => Effect.asVoid(sql`SELECT pg_advisory_xact_lock(${LOCK_KEY})`), orElse: () => Effect.void })
  return {
    write: (make, locks) => sql.withTransaction(locks ? Effect.zipRight(lock, run(make)) : run(make)),
    read: run
  }
}

/** How long a write that meets another connection's lock keeps retrying (the main connection's busy timeout). */
const BUSY_RETRY = Schedule.spaced(Duration.millis(2)).pipe(Schedule.upTo(Duration.seconds(5)))

const isBusy = (e: unknown): boolean => classify(e).reason === "Busy"

/** On a SQLite file's connection of its own: prepared statements, each write one IMMEDIATE transaction run at once. */
const fileDriver = (db: BetterSqlite3.Database): Driver => {
  const prepared = new Map<string, BetterSqlite3.Statement>()
  const runNow = <A>(make: () => Op<A>): A => {
    const op = make()
    let next = op.next([])
    while (!next.done) {
      const { params, text } = next.value
      let s = prepared.get(text)
      if (s === undefined) prepared.set(text, (s = db.prepare(text)))
      next = op.next(s.reader ? s.all(...params) : (s.run(...params), []))
    }
    return next.value
  }
  const transaction = db.transaction((f: () => unknown) => f())
  // The first attempt needs no fiber; only a write that met a lock waits, and tries again.
  const attempt = <A>(f: () => A): Effect.Effect<A, unknown> => {
    const once = Effect.try({ try: f, catch: identity })
    return Effect.catchIf(once, isBusy, () => Effect.retry(once, { while: isBusy, schedule: BUSY_RETRY }))
  }
  return {
    write: <A>(make: () => Op<A>) => attempt(() => transaction.immediate(() => runNow(make)) as A),
    read: (make) => attempt(() => runNow(make))
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The store.

/**
 * The store on the migrated `SqlClient`, with these bounds: on a SQLite file (a `SqliteClient` of a file in context)
 * through a connection of its own, closed with the scope.
 */
export const make = (bounds: A2aTaskBounds = DEFAULT_BOUNDS): Effect.Effect<A2aTaskStoreApi, DatabaseError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const file = Option.filter(Option.map(yield* Effect.serviceOption(SqliteClient.SqliteClient), (c) => c.config.filename), (f) => !isMemoryFile(f))
    const driver = Option.isSome(file) ? fileDriver(yield* sqliteConnection(file.value)) : sqlDriver(sql)
    return makeOn(driver, bounds)
  })

const makeOn = (driver: Driver, bounds: A2aTaskBounds): A2aTaskStoreApi => {
  const unavailable = (e: unknown) => new A2aTaskStoreUnavailable({ code: "STORE_UNAVAILABLE", message: summarize(e) })
  let seen = { tasks: 0, bytes: 0 }
  const saw = (t: Totals | undefined) => {
    if (t !== undefined) seen = { tasks: t.tasks, bytes: t.bytes }
  }

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

  const list: A2aTaskStoreApi["list"] = (q) => {
    // Index 0026 (principal, holder, updated_at, task_id) serves both the count and the page.
    const filters: Array<readonly [string, Param]> = [["principal = ?", q.principal], ["holder = ?", q.holder]]
    if (q.contextId !== undefined) filters.push(["context_id = ?", q.contextId])
    if (q.state !== undefined) filters.push(["state = ?", q.state])
    if (q.updatedAfter !== undefined) filters.push(["updated_at >= ?", q.updatedAfter])
    const where = filters.map(([f]) => f).join(" AND ")
    const params = filters.map(([, p]) => p)
    const after = q.after
    const page = after === undefined ? where : `${where} AND (updated_at < ? OR (updated_at = ? AND task_id < ?))`
    const pageParams = after === undefined ? params : [...params, after.updated, after.updated, after.id]
    return driver.read(function*() {
      const [count] = yield* query<{ n: number | string }>(`SELECT count(*) AS n FROM mesh_a2a_tasks WHERE ${where}`, ...params)
      const rows = yield* query<Row>(`SELECT * FROM mesh_a2a_tasks WHERE ${page} ORDER BY updated_at DESC, task_id DESC LIMIT ?`, ...pageParams, q.limit)
      return { rows, total: Number(count?.n ?? 0) }
    }).pipe(
      Effect.mapError(unavailable),
      Effect.flatMap(({ rows, total }) => Effect.map(Effect.forEach(rows, fromRow), (records) => ({ records, total })))
    )
  }

  const insertAll: A2aTaskStoreApi["insertAll"] = (entries) =>
    entries.length === 0
      ? Effect.succeed([])
      : driver.write(() => insertAllOp(bounds, entries), true).pipe(
        Effect.mapError(unavailable),
        Effect.map(({ kept, totals }) => {
          saw(totals)
          return kept
        })
      )

  return {
    insert: (record, now) => Effect.map(insertAll([{ record, now }]), (kept) => kept[0] === true),
    insertAll,
    write: (writes) => {
      if (writes.length === 0) return Effect.void
      // A batch that saves a task may change the totals (its bytes, or room made when it ended).
      const locks = writes.some((w) => w._tag === "Save")
      return driver.write(() => writeOp(bounds, writes), locks).pipe(Effect.mapError(unavailable), Effect.map(saw))
    },
    find: (id, principal) =>
      driver.read(() => query<Row>("SELECT * FROM mesh_a2a_tasks WHERE task_id = ? AND principal = ?", id, principal)).pipe(
        Effect.mapError(unavailable),
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(undefined) : fromRow(rows[0])))
      ),
    list,
    events: (id, from, limit) =>
      driver.read(function*() {
        const [kept] = yield* query("SELECT task_id FROM mesh_a2a_tasks WHERE task_id = ?", id)
        if (kept === undefined) return undefined
        const rows = yield* query<{ event: string }>("SELECT event FROM mesh_a2a_task_events WHERE task_id = ? AND seq >= ? ORDER BY seq LIMIT ?", id, from, limit)
        return rows.map((r) => r.event)
      }).pipe(Effect.mapError(unavailable)),
    stats: () => seen
  }
}

/** `A2aTaskStore` on SQL with these bounds; provide a migrated `SqlClient` (`Database.layer`). */
export const layer = (bounds: A2aTaskBounds = DEFAULT_BOUNDS): Layer.Layer<A2aTaskStore, DatabaseError, SqlClient.SqlClient> =>
  Layer.scoped(A2aTaskStore, make(bounds))
