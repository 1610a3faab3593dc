/**
 * The scheduler's own records of each saga (migration 0015): the accepted plan, one row per step and the progress
 * events. The workflow engine journals which activities finished; these rows hold what a reader asks for (status,
 * commit tokens, events) and the one thing a re-run step must not make afresh, its child mandate: the ledger answers
 * an allocation retried under the same idempotency key only for the same child.
 *
 * Every write is one statement, so two fibers (a step and a reader) never hold a transaction across each other.
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { formatUsdString, type Micros } from "../core/Money.js"
import { classify, summarize } from "../sql/SqlFailure.js"
import { type SagaEvent, type SagaEventType, type SagaPage, type SagaPlan, type SagaResult, type SagaStatus, SagaUnavailable, type StepStatus } from "./Saga.js"

/** A saga as stored. */
export interface StoredSaga {
  readonly id: string
  /** Who started it: the mandate's grantor, the only one who may read it. */
  readonly caller: string
  readonly runner: string
  readonly poolId: string
  readonly plan: SagaPlan
  readonly status: SagaStatus
}

/** What a step's row may be updated with. */
export interface StepUpdate {
  readonly status?: StepStatus
  readonly allocationId?: string
  readonly commitToken?: string | null
  readonly usedMicros?: number
  readonly result?: string
  readonly errorCode?: string
  readonly errorMessage?: string
}

/** The operations of the saga store. */
export interface SagaStoreApi {
  /** Stores the saga, its steps and, in the same transaction, its first event (`saga_started`). */
  readonly create: (
    input: { readonly id: string; readonly caller: string; readonly runner: string; readonly poolId: string; readonly plan: SagaPlan },
    started?: EventInput
  ) => Effect.Effect<void, SagaUnavailable>
  readonly load: (id: string) => Effect.Effect<StoredSaga | undefined, SagaUnavailable>
  /** How many sagas are running: all of them, and those `caller` started. */
  readonly running: (caller: string) => Effect.Effect<{ readonly total: number; readonly caller: number }, SagaUnavailable>
  /** The running sagas created before `createdBefore` (ms since the epoch), each with the time of its latest event. */
  readonly runningSince: (createdBefore: number) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly lastEventAt: number }>, SagaUnavailable>
  /**
   * The step's child mandate: the one stored, or `make`'s, stored first-writer-wins; `event`, when given, is appended
   * in the same transaction as the store of a new one.
   */
  readonly childToken: <E>(id: string, idx: number, make: Effect.Effect<string, E>, event?: EventInput) => Effect.Effect<string, E | SagaUnavailable>
  /** Updates a step's row and, in the same transaction, appends `event` when given. */
  readonly updateStep: (id: string, idx: number, update: StepUpdate, event?: EventInput) => Effect.Effect<void, SagaUnavailable>
  /** Ends a running saga, appending `event` in the same transaction; false (and no event) when it had already ended. */
  readonly finish: (id: string, status: Exclude<SagaStatus, "running">, failedStep: string | null, errorCode: string | null, event?: EventInput) => Effect.Effect<boolean, SagaUnavailable>
  readonly append: (id: string, type: SagaEventType, step: string | null, data: Readonly<Record<string, unknown>>) => Effect.Effect<void, SagaUnavailable>
  readonly eventsAfter: (id: string, seq: number) => Effect.Effect<ReadonlyArray<SagaEvent>, SagaUnavailable>
  readonly result: (id: string) => Effect.Effect<SagaResult | undefined, SagaUnavailable>
  /** The sagas `caller` started, newest first: at most `limit`, after `cursor` (a page's `nextCursor`). */
  readonly list: (caller: string, limit: number, cursor?: SagaCursor) => Effect.Effect<SagaPage, SagaUnavailable>
  /**
   * Each event appended (its saga and type), for readers waiting in this process. On Postgres it also carries the
   * events other processes append (LISTEN/NOTIFY), so a reader on one hub hears of a saga running on another.
   */
  readonly changes: PubSub.PubSub<SagaChange>
}

/**
 * An event to append with another write: each step's progress is one transaction, one commit (a flush to disk) fewer
 * per event than writing them apart.
 */
export interface EventInput {
  readonly type: SagaEventType
  readonly step: string | null
  readonly data: Readonly<Record<string, unknown>>
}

/** News of one saga: an event of `type` was appended. */
export interface SagaChange {
  readonly sagaId: string
  readonly type: SagaEventType
}

/** Where a page of `list` starts: after the saga created at `createdAt` (ms) with id `id`, newest first. */
export interface SagaCursor {
  readonly createdAt: number
  readonly id: string
}

/** A cursor as `nextCursor` writes it: `<createdAt>.<id>`. */
export const formatCursor = (c: SagaCursor): string => `${c.createdAt}.${c.id}`

/** A `nextCursor` read back; undefined when it is not one. */
export const parseCursor = (text: string): SagaCursor | undefined => {
  const m = /^(\d{1,15})\.(saga_[A-Za-z0-9_-]{1,64})$/.exec(text)
  return m === null ? undefined : { createdAt: Number(m[1]), id: m[2]! }
}

/** The `SagaStore` service. */
export class SagaStore extends Context.Tag("agent-mesh/SagaStore")<SagaStore, SagaStoreApi>() {}

interface SagaRow {
  readonly id: string
  readonly caller: string
  readonly runner: string
  readonly pool_id: string
  readonly definition: string
  readonly status: SagaStatus
  readonly failed_step: string | null
  readonly error_code: string | null
}

interface SummaryRow {
  readonly id: string
  readonly pool_id: string
  readonly status: SagaStatus
  readonly failed_step: string | null
  readonly error_code: string | null
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly steps: number | string
}

interface StepRow {
  readonly idx: number
  readonly name: string
  readonly status: StepStatus
  readonly allocation_id: string | null
  readonly commit_token: string | null
  readonly used_usd: string | null
  readonly result: string | null
  readonly error_code: string | null
  readonly error_message: string | null
}

interface EventRow {
  readonly saga_id: string
  readonly seq: number
  readonly type: SagaEventType
  readonly step: string | null
  readonly data: string
  readonly at: number
}

/** The Postgres channel on which every append is announced to the other processes on the database. */
export const CHANNEL = "mesh_saga_events"

/**
 * On Postgres, forwards the appends other processes announce into `changes` for as long as the scope lives; the
 * listening connection is opened again when it drops.
 */
const forwardNotifications = (sql: SqlClient.SqlClient, changes: PubSub.PubSub<SagaChange>, self: string) =>
  sql.onDialectOrElse({
    orElse: () => Effect.void,
    pg: () =>
      Effect.gen(function* () {
        const { PgClient } = yield* Effect.promise(() => import("@effect/sql-pg"))
        const pg = yield* Effect.serviceOption(PgClient.PgClient)
        if (Option.isNone(pg)) return
        yield* pg.value.listen(CHANNEL).pipe(
          Stream.runForEach((payload) => {
            // `<store> <saga> <type>`: this store's own appends woke its readers already, on their commit.
            const [from, sagaId, type] = payload.split(" ")
            return from === self || sagaId === undefined || type === undefined ? Effect.void : PubSub.publish(changes, { sagaId, type: type as SagaEventType })
          }),
          Effect.catchAllCause((cause) => Effect.logWarning("saga notifications: listening connection lost; listening again", cause)),
          Effect.repeat(Schedule.spaced("1 second")),
          Effect.forkScoped
        )
      })
  })

/** The store on a migrated `SqlClient`. */
export const make: Effect.Effect<SagaStoreApi, never, SqlClient.SqlClient | Scope.Scope> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const changes = yield* PubSub.unbounded<SagaChange>()
  // Names this store in its announcements, so it does not hear its own. Not a secret, and only Postgres needs it: the
  // embedded database's stores draw nothing (a simulation forbids the asynchronous work a random draw starts).
  const self = sql.onDialectOrElse({ orElse: () => "", pg: () => globalThis.crypto.randomUUID() })
  yield* forwardNotifications(sql, changes, self)
  const announce = sql.onDialectOrElse({
    orElse: () => (_id: string, _type: SagaEventType) => Effect.void,
    pg: () => (id: string, type: SagaEventType) => Effect.asVoid(sql`SELECT pg_notify(${CHANNEL}, ${`${self} ${id} ${type}`})`)
  })
  const q = <A>(e: Effect.Effect<A, unknown>): Effect.Effect<A, SagaUnavailable> =>
    Effect.mapError(e, (f) => new SagaUnavailable({ code: "STORE_UNAVAILABLE", message: summarize(classify(f)) }))

  // The next seq is read and written in one statement: appends of one saga never share a number. On Postgres the
  // announcement is part of the transaction, so other processes hear of the event once it is committed.
  const insertEvent = (id: string, e: EventInput) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      sql`INSERT INTO mesh_saga_events (saga_id, seq, type, step, data, at)
        SELECT ${id}, COALESCE(MAX(seq), 0) + 1, ${e.type}, ${e.step}, ${JSON.stringify(e.data)}, CAST(${now} AS BIGINT) FROM mesh_saga_events WHERE saga_id = ${id}`.pipe(
        Effect.zipRight(announce(id, e.type))
      )
    )
  /** Wakes this process's readers, after the event's commit. */
  const published = (id: string, e: EventInput | undefined) => (e === undefined ? Effect.void : Effect.asVoid(PubSub.publish(changes, { sagaId: id, type: e.type })))
  /** `write`, then the event, in one transaction (or `write` alone); this process's readers woken after the commit. */
  const withEvent = <A, E>(id: string, write: Effect.Effect<A, E>, e: EventInput | undefined, when: (a: A) => boolean = () => true) =>
    e === undefined
      ? q(write)
      : q(sql.withTransaction(Effect.flatMap(write, (a) => (when(a) ? Effect.as(insertEvent(id, e), a) : Effect.succeed(a))))).pipe(
        Effect.tap((a) => (when(a) ? published(id, e) : Effect.void))
      )

  const load = (id: string) =>
    q(sql<SagaRow>`SELECT id, caller, runner, pool_id, definition, status, failed_step, error_code FROM mesh_sagas WHERE id = ${id}`).pipe(
      Effect.map((rows) => rows[0])
    )

  const api: SagaStoreApi = {
    changes,
    create: ({ id, caller, runner, poolId, plan }, started) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        // One transaction, so no reader finds a saga without its steps.
        yield* q(sql`INSERT INTO mesh_sagas ${sql.insert({
          id, caller, runner, mandate: plan.mandate, pool_id: poolId, definition: JSON.stringify(plan), status: "running",
          failed_step: null, error_code: null, created_at: now, updated_at: now
        })}`.pipe(
          Effect.zipRight(sql`INSERT INTO mesh_saga_steps ${sql.insert(plan.steps.map((s, idx) => ({ saga_id: id, idx, name: s.name, status: "pending" })))}`),
          Effect.zipRight(started === undefined ? Effect.void : insertEvent(id, started)),
          sql.withTransaction
        ))
        yield* published(id, started)
      }),
    load: (id) =>
      Effect.map(load(id), (row) =>
        row === undefined ? undefined : { id: row.id, caller: row.caller, runner: row.runner, poolId: row.pool_id, plan: JSON.parse(row.definition) as SagaPlan, status: row.status }
      ),
    running: (caller) =>
      q(sql<{ total: number | string; mine: number | string | null }>`SELECT COUNT(*) AS total, SUM(CASE WHEN caller = ${caller} THEN 1 ELSE 0 END) AS mine
        FROM mesh_sagas WHERE status = 'running'`).pipe(Effect.map((rows) => ({ total: Number(rows[0]?.total ?? 0), caller: Number(rows[0]?.mine ?? 0) }))),
    runningSince: (createdBefore) =>
      q(sql<{ id: string; last_at: number | string | null }>`SELECT s.id, (SELECT MAX(e.at) FROM mesh_saga_events e WHERE e.saga_id = s.id) AS last_at
        FROM mesh_sagas s WHERE s.status = 'running' AND s.created_at < ${createdBefore}`).pipe(
        Effect.map((rows) => rows.map((r) => ({ id: r.id, lastEventAt: Number(r.last_at ?? 0) })))
      ),
    childToken: (id, idx, mint, e) =>
      Effect.gen(function* () {
        const read = q(sql<{ child_token: string | null }>`SELECT child_token FROM mesh_saga_steps WHERE saga_id = ${id} AND idx = ${idx}`)
        const before = (yield* read)[0]?.child_token
        if (before !== null && before !== undefined) {
          // A re-run step: its token was stored by the first run; the event is appended on its own.
          if (e !== undefined) yield* withEvent(id, Effect.void, e)
          return before
        }
        const token = yield* mint
        // The row answers only when this write won; a concurrent first writer's token is read back instead.
        const written = yield* withEvent(
          id,
          sql<{ child_token: string }>`UPDATE mesh_saga_steps SET child_token = ${token} WHERE saga_id = ${id} AND idx = ${idx} AND child_token IS NULL RETURNING child_token`,
          e
        )
        if (written.length > 0) return token
        return (yield* read)[0]?.child_token ?? token
      }),
    updateStep: (id, idx, u, e) => {
      const set: Record<string, string | number | null> = {}
      if (u.status !== undefined) set.status = u.status
      if (u.allocationId !== undefined) set.allocation_id = u.allocationId
      if (u.commitToken !== undefined) set.commit_token = u.commitToken
      if (u.usedMicros !== undefined) set.used_usd = formatUsdString(u.usedMicros as Micros)
      if (u.result !== undefined) set.result = u.result
      if (u.errorCode !== undefined) set.error_code = u.errorCode
      if (u.errorMessage !== undefined) set.error_message = u.errorMessage
      return Effect.asVoid(withEvent(id, sql`UPDATE mesh_saga_steps SET ${sql.update(set)} WHERE saga_id = ${id} AND idx = ${idx}`, e))
    },
    finish: (id, status, failedStep, errorCode, e) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        withEvent(
          id,
          sql`UPDATE mesh_sagas SET status = ${status}, failed_step = ${failedStep}, error_code = ${errorCode}, updated_at = ${now}
            WHERE id = ${id} AND status = 'running' RETURNING id`,
          e,
          (rows) => rows.length > 0
        ).pipe(Effect.map((rows) => rows.length > 0))
      ),
    append: (id, type, step, data) => Effect.asVoid(withEvent(id, Effect.void, { type, step, data })),
    eventsAfter: (id, seq) =>
      q(sql<EventRow>`SELECT * FROM mesh_saga_events WHERE saga_id = ${id} AND seq > ${seq} ORDER BY seq`).pipe(
        Effect.map((rows) =>
          rows.map((r): SagaEvent => ({
            sagaId: r.saga_id,
            seq: Number(r.seq),
            type: r.type,
            step: r.step,
            data: JSON.parse(r.data) as Record<string, unknown>,
            at: new Date(Number(r.at)).toISOString()
          }))
        )
      ),
    list: (caller, limit, cursor) =>
      Effect.gen(function* () {
        // Newest first, keyed on (created_at, id) so a page never repeats or skips a saga created meanwhile; one row
        // more than asked tells whether another page exists.
        const after = cursor === undefined ? sql.literal("") : sql`AND (created_at < ${cursor.createdAt} OR (created_at = ${cursor.createdAt} AND id < ${cursor.id}))`
        const rows = yield* q(sql<SummaryRow>`SELECT id, pool_id, status, failed_step, error_code, created_at, updated_at,
            (SELECT COUNT(*) FROM mesh_saga_steps st WHERE st.saga_id = s.id) AS steps
          FROM mesh_sagas s WHERE caller = ${caller} ${after} ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`)
        const page = rows.slice(0, limit)
        const last = page[page.length - 1]
        return {
          items: page.map((r) => ({
            sagaId: r.id,
            status: r.status,
            poolId: r.pool_id,
            steps: Number(r.steps),
            failedStep: r.failed_step,
            errorCode: r.error_code,
            createdAt: new Date(Number(r.created_at)).toISOString(),
            updatedAt: new Date(Number(r.updated_at)).toISOString()
          })),
          nextCursor: rows.length > limit && last !== undefined ? formatCursor({ createdAt: Number(last.created_at), id: last.id }) : null
        }
      }),
    result: (id) =>
      Effect.gen(function* () {
        const row = yield* load(id)
        if (row === undefined) return undefined
        const plan = JSON.parse(row.definition) as SagaPlan
        const steps = yield* q(sql<StepRow>`SELECT * FROM mesh_saga_steps WHERE saga_id = ${id} ORDER BY idx`)
        return {
          sagaId: row.id,
          status: row.status,
          poolId: row.pool_id,
          failedStep: row.failed_step,
          errorCode: row.error_code,
          steps: steps.map((s) => {
            const p = plan.steps[Number(s.idx)]!
            return {
              name: s.name,
              agentDid: p.agentDid,
              capability: p.capability,
              status: s.status,
              budgetUsd: formatUsdString(p.budgetMicros as Micros),
              usedUsd: s.used_usd,
              allocationId: s.allocation_id,
              commitToken: s.commit_token,
              result: s.result,
              errorCode: s.error_code,
              error: s.error_message
            }
          })
        }
      })
  }
  return api
})

/** The store on SQL; needs a migrated `SqlClient`. */
export const layer: Layer.Layer<SagaStore, never, SqlClient.SqlClient> = Layer.scoped(SagaStore, make)
