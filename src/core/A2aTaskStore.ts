/**
 * Where an agent's A2A tasks are kept: each task's state, history, reply and pending gate, and the events its
 * followers are sent, so `GetTask`, `SubscribeToTask` and the approval of a task waiting for input are answered by
 * whichever replica a request reaches, and after a restart (docs/scaling.md). The store holds the bounds: at most
 * `maxTasks` tasks and `maxBytes` of their messages and replies (`maxBytesPerCaller` per holder), ended tasks let go
 * first (oldest first) and after `retentionMs`; a task that does not fit is not kept. The memory layer lives here; the
 * SQL layer (kept across restarts, shared by replicas) is `A2aTaskStoreSql`.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The store cannot be read or written (`STORE_UNAVAILABLE`). */
export class A2aTaskStoreUnavailable extends Data.TaggedError("A2aTaskStoreUnavailable")<{ readonly code: "STORE_UNAVAILABLE"; readonly message: string }> {}

/** One task as the store keeps it; messages are kept as the wire has them (opaque here). */
export interface A2aTaskRecord {
  readonly id: string
  readonly contextId: string
  readonly principal: string
  /** Whose share of the bytes it counts against. */
  readonly holder: string
  readonly state: string
  readonly statusMessage: unknown
  readonly timestamp: string
  readonly history: ReadonlyArray<unknown>
  /** The reply so far. */
  readonly text: string
  /** The human gate's task id while the task waits for an approval. */
  readonly gateTaskId: string | undefined
  /** Whether the task ended (or waits for input): only such tasks are let go to make room. */
  readonly ended: boolean
  /** What its messages and reply weigh. */
  readonly bytes: number
  /** Events written for it so far: a follower reading this record goes on from event `seq`. */
  readonly seq: number
}

/** A new task to keep at `now`. */
export interface A2aTaskInsert {
  readonly record: A2aTaskRecord
  readonly now: number
}

/** One write, applied in order with the others of its batch. */
export type A2aTaskWrite =
  | { readonly _tag: "Save"; readonly record: A2aTaskRecord; readonly at: number }
  | { readonly _tag: "Event"; readonly id: string; readonly seq: number; readonly event: string }

/** Which tasks a listing is after: one caller's (`principal` and `holder` both match), newest status first. */
export interface A2aTaskQuery {
  readonly principal: string
  readonly holder: string
  readonly contextId?: string | undefined
  readonly state?: string | undefined
  /** Epoch ms: only tasks whose status changed at or after it. */
  readonly updatedAfter?: number | undefined
  /** The last task of the previous page: only tasks after it in the order (updated time, then id, both descending). */
  readonly after?: A2aTaskCursor | undefined
  readonly limit: number
}

/** A place in a listing: a task's status time (epoch ms) and id. */
export interface A2aTaskCursor {
  readonly updated: number
  readonly id: string
}

/** A page of a listing, and how many tasks match the query without its cursor and limit. */
export interface A2aTaskPage {
  readonly records: ReadonlyArray<A2aTaskRecord>
  readonly total: number
}

/** When a record's status last changed, in epoch ms (its `timestamp`; `fallback` for one that does not parse). */
export const updatedOf = (r: { readonly timestamp: string }, fallback: number): number => {
  const t = Date.parse(r.timestamp)
  return Number.isFinite(t) ? t : fallback
}

/** The bounds a store keeps (the agent's `maxA2aTasks`, `maxA2aTaskBytes`, `maxA2aTaskBytesPerCaller`, `runRetentionMs`). */
export interface A2aTaskBounds {
  readonly maxTasks: number
  readonly maxBytes: number
  readonly maxBytesPerCaller: number
  readonly retentionMs: number
}

/** The operations of a task store. */
export interface A2aTaskStoreApi {
  /** Keeps a new task at `now` if it fits once ended tasks are let go; whether it was kept. */
  readonly insert: (record: A2aTaskRecord, now: number) => Effect.Effect<boolean, A2aTaskStoreUnavailable>
  /**
   * `insert` of each entry in order, as one transaction where the store can (several requests' tasks, one commit);
   * whether each was kept.
   */
  readonly insertAll: (entries: ReadonlyArray<A2aTaskInsert>) => Effect.Effect<ReadonlyArray<boolean>, A2aTaskStoreUnavailable>
  /**
   * Applies writes in order (one transaction where the store can); a task no longer kept is not brought back, and
   * a canceled one stays canceled (its run may still be going on another replica).
   */
  readonly write: (writes: ReadonlyArray<A2aTaskWrite>) => Effect.Effect<void, A2aTaskStoreUnavailable>
  /** The task `id` of `principal`, if kept. */
  readonly find: (id: string, principal: string) => Effect.Effect<A2aTaskRecord | undefined, A2aTaskStoreUnavailable>
  /** One caller's tasks, newest status first, a page at a time (keyset on status time and id, so pages neither repeat nor skip a task that did not change). */
  readonly list: (query: A2aTaskQuery) => Effect.Effect<A2aTaskPage, A2aTaskStoreUnavailable>
  /** The task's events from `from` on (at most `limit`); undefined when the task is no longer kept. */
  readonly events: (id: string, from: number, limit: number) => Effect.Effect<ReadonlyArray<string> | undefined, A2aTaskStoreUnavailable>
  /** The tasks kept and their bytes, as this process last saw them. */
  readonly stats: () => { readonly tasks: number; readonly bytes: number }
}

/** The `A2aTaskStore` service. */
export class A2aTaskStore extends Context.Tag("agent-mesh/A2aTaskStore")<A2aTaskStore, A2aTaskStoreApi>() {}

/** Default bounds: 10 000 tasks, 64 MiB, 8 MiB per holder, ended tasks kept 5 minutes. */
export const DEFAULT_BOUNDS: A2aTaskBounds = { maxTasks: 10_000, maxBytes: 64 * 1024 * 1024, maxBytesPerCaller: 8 * 1024 * 1024, retentionMs: 5 * 60_000 }

/** Whether `holder`'s share, of which it holds `held` bytes, has room for `need` more. */
export const shareFits = (bounds: A2aTaskBounds, held: number, need: number): boolean => held + need <= bounds.maxBytesPerCaller

/** Whether the store, holding `tasks` tasks of `bytes` bytes, has room for `count` more tasks of `need` more bytes. */
export const totalFits = (bounds: A2aTaskBounds, tasks: number, bytes: number, count: number, need: number): boolean =>
  tasks + count <= bounds.maxTasks && bytes + need <= bounds.maxBytes

const CANCELED = "TASK_STATE_CANCELED"

/** A store in this process's memory, with these bounds. */
export const makeMemory = (bounds: A2aTaskBounds = DEFAULT_BOUNDS): A2aTaskStoreApi => {
  const max = Math.max(1, bounds.maxTasks)
  const tasks = new Map<string, { record: A2aTaskRecord; events: Array<string> }>()
  const byHolder = new Map<string, number>()
  let bytes = 0
  const held = (holder: string) => byHolder.get(holder) ?? 0
  const count = (holder: string, delta: number) => {
    bytes += delta
    const left = held(holder) + delta
    if (left <= 0) byHolder.delete(holder)
    else byHolder.set(holder, left)
  }
  // When each ended task ended, and the order they ended in (oldest first). A queue of its own, not the Map's
  // insertion order: V8 skips a Map's deleted entries one by one when iterating from its start, so a Map used as a
  // queue costs more per request the more it holds. An entry whose task ended again later is stale and skipped.
  const endedAt = new Map<string, number>()
  const order: Array<{ readonly id: string; readonly at: number }> = []
  let head = 0
  const forget = (id: string) => {
    const t = tasks.get(id)
    if (t === undefined) return
    tasks.delete(id)
    endedAt.delete(id)
    count(t.record.holder, -t.record.bytes)
  }
  const prune = (now: number, room: number, roomBytes: number) => {
    while (head < order.length) {
      const { at, id } = order[head]!
      if (endedAt.get(id) === at) {
        if (now - at <= bounds.retentionMs && tasks.size + room <= max && bytes + roomBytes <= bounds.maxBytes) break
        forget(id)
      }
      head++
    }
    if (head > 1024 && head * 2 > order.length) {
      order.splice(0, head)
      head = 0
    }
  }
  /** Lets `holder`'s ended tasks go, oldest first, until `need` more bytes fit its share. */
  const pruneOwn = (holder: string, need: number) => {
    for (let i = head; i < order.length && held(holder) + need > bounds.maxBytesPerCaller; i++) {
      const { at, id } = order[i]!
      if (endedAt.get(id) === at && tasks.get(id)?.record.holder === holder) forget(id)
    }
  }
  const markEnded = (id: string, at: number) => {
    endedAt.set(id, at)
    order.push({ id, at })
  }

  const insert = (record: A2aTaskRecord, now: number) => {
    prune(now, 1, record.bytes)
    pruneOwn(record.holder, record.bytes)
    if (!(tasks.size < max && bytes + record.bytes <= bounds.maxBytes && held(record.holder) + record.bytes <= bounds.maxBytesPerCaller)) return false
    tasks.set(record.id, { record, events: [] })
    count(record.holder, record.bytes)
    if (record.ended) {
      markEnded(record.id, now)
      prune(now, 0, 0)
    }
    return true
  }

  const save = (record: A2aTaskRecord, at: number) => {
    const t = tasks.get(record.id)
    if (t === undefined || t.record.state === CANCELED) return
    count(record.holder, record.bytes - t.record.bytes)
    t.record = record
    // Kept by when it ended; a task that goes on again (an approval resumed it) is not let go while it runs.
    endedAt.delete(record.id)
    if (record.ended) {
      markEnded(record.id, at)
      prune(at, 0, 0)
      pruneOwn(record.holder, 0)
    }
  }

  return {
    insert: (record, now) => Effect.sync(() => insert(record, now)),
    insertAll: (entries) => Effect.sync(() => entries.map((e) => insert(e.record, e.now))),
    write: (writes) =>
      Effect.sync(() => {
        for (const w of writes) {
          if (w._tag === "Save") save(w.record, w.at)
          else {
            const t = tasks.get(w.id)
            if (t !== undefined && t.events.length === w.seq) t.events.push(w.event)
          }
        }
      }),
    find: (id, principal) =>
      Effect.sync(() => {
        const t = tasks.get(id)
        return t !== undefined && t.record.principal === principal ? t.record : undefined
      }),
    list: (q) =>
      Effect.sync(() => {
        const matching: Array<{ readonly record: A2aTaskRecord; readonly updated: number }> = []
        for (const { record } of tasks.values()) {
          if (record.principal !== q.principal || record.holder !== q.holder) continue
          if (q.contextId !== undefined && record.contextId !== q.contextId) continue
          if (q.state !== undefined && record.state !== q.state) continue
          const updated = updatedOf(record, 0)
          if (q.updatedAfter !== undefined && updated < q.updatedAfter) continue
          matching.push({ record, updated })
        }
        matching.sort((a, b) => b.updated - a.updated || (a.record.id < b.record.id ? 1 : a.record.id > b.record.id ? -1 : 0))
        const after = q.after
        const rest = after === undefined ? matching : matching.filter((m) => m.updated < after.updated || (m.updated === after.updated && m.record.id < after.id))
        return { records: rest.slice(0, q.limit).map((m) => m.record), total: matching.length }
      }),
    events: (id, from, limit) => Effect.sync(() => tasks.get(id)?.events.slice(from, from + limit)),
    stats: () => ({ tasks: tasks.size, bytes })
  }
}

/** `A2aTaskStore` in memory, with these bounds. */
export const layerMemory = (bounds: A2aTaskBounds = DEFAULT_BOUNDS): Layer.Layer<A2aTaskStore> => Layer.sync(A2aTaskStore, () => makeMemory(bounds))

/** The bounds the agent options of the same names give (defaults where unset). */
export const boundsOf = (options: {
  readonly maxA2aTasks?: number
  readonly maxA2aTaskBytes?: number
  readonly maxA2aTaskBytesPerCaller?: number
  readonly runRetentionMs?: number
}): A2aTaskBounds => ({
  maxTasks: Math.max(1, options.maxA2aTasks ?? DEFAULT_BOUNDS.maxTasks),
  maxBytes: options.maxA2aTaskBytes ?? DEFAULT_BOUNDS.maxBytes,
  maxBytesPerCaller: options.maxA2aTaskBytesPerCaller ?? DEFAULT_BOUNDS.maxBytesPerCaller,
  retentionMs: options.runRetentionMs ?? DEFAULT_BOUNDS.retentionMs
})
