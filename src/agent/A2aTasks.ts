/**
 * The A2A tasks of one agent server: each task's state, history and reply so far, the fiber running it and whoever
 * follows its stream. A task outlives the request that started it (a client that drops its stream subscribes again)
 * and lives in the agent's `A2aTaskStore` (its database: SQLite or Postgres; in memory for a `:memory:` agent), so a
 * restart or another replica on the same database answers `GetTask`, follows it with `SubscribeToTask` (from the
 * store's events, until it ends there) and takes the approval of a task waiting for input (the gate's claim picks
 * the one resume that wins). The store holds the bounds: at most `maxTasks` tasks and `maxA2aTaskBytes` of their
 * messages and replies (`maxA2aTaskBytesPerCaller` per caller: its principal, or an anonymous caller's address),
 * finished ones let go first (oldest first) and after `runRetentionMs`; while running tasks alone fill a bound, a new
 * background task is refused as busy (503 `AGENT_BUSY`), and an ended one that does not fit is not kept. A task's
 * bytes are counted when it is kept and again when it ends. A task is found only by the principal that started it,
 * so nobody learns another caller's task ids.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { AgentUnavailable } from "./AgentError.js"
import { isInterrupted, isTerminal, type Message, type StreamResult, type Task, type TaskState } from "./A2aProtocol.js"
import {
  type A2aTaskInsert,
  type A2aTaskQuery,
  type A2aTaskRecord,
  A2aTaskStore,
  type A2aTaskStoreUnavailable,
  type A2aTaskWrite,
  boundsOf,
  makeMemory
} from "../core/A2aTaskStore.js"
import { Entropy, uuidV7 } from "../core/Entropy.js"
import { clientKey } from "../core/internal/clientKey.js"

/** One task, as the server holds it. */
export interface A2aTask {
  readonly id: string
  readonly contextId: string
  readonly principal: string
  /** Whose share of the task bytes it counts against: the principal, or for an anonymous caller its address. */
  readonly holder: string
  state: TaskState
  statusMessage: Message | undefined
  timestamp: string
  readonly history: Array<Message>
  /** The reply so far (the `reply` artifact). */
  text: string
  /** The human gate's task id while the task waits for an approval. */
  gateTaskId: string | undefined
  /** Events written to the store for it so far. */
  seq: number
  /** Whether the store keeps it (a task answered in its own request is kept once it ended). */
  stored: boolean
  /** Set when it is canceled, so the interruption that follows is not taken for the server stopping. */
  canceling: boolean
  fiber: Fiber.RuntimeFiber<void> | undefined
  /** Whoever follows its stream; made on first follow (most tasks are never followed, and many are kept). */
  listeners: Set<(r: StreamResult) => void> | undefined
}

/** Whose share an A2A caller's task bytes count against: its principal, or an anonymous caller's address (an IPv6 one by its /64). */
export const holderOf = (caller: { readonly auth: string; readonly principal: string }, remoteAddress: string | undefined): string =>
  caller.auth === "none" ? `anonymous:${clientKey(remoteAddress ?? "unknown")}` : caller.principal

/** The artifact every reply is written to. */
export const REPLY_ARTIFACT = "reply"

/**
 * The task as the wire shows it: `historyLength` most recent messages, all when unset, and no `history` member at 0
 * (A2A 1.0 §3.2.4); its reply artifact unless `artifacts` is false (`ListTasks` leaves them out unless asked).
 */
export const snapshot = (t: A2aTask, historyLength?: number, artifacts = true): Task => ({
  id: t.id,
  contextId: t.contextId,
  status: { state: t.state, timestamp: t.timestamp, ...(t.statusMessage === undefined ? {} : { message: t.statusMessage }) },
  ...(artifacts ? (t.text.length === 0 ? {} : { artifacts: [{ artifactId: REPLY_ARTIFACT, name: REPLY_ARTIFACT, parts: [{ text: t.text }] }] }) : {}),
  ...(historyLength === 0 ? {} : { history: historyLength === undefined ? t.history : t.history.slice(-historyLength) })
})

/** The retention settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly runRetentionMs?: number
  /** A2A tasks kept at most (running, waiting and finished); default 10 000. */
  readonly maxA2aTasks?: number
  /** Bytes of A2A task messages and replies kept in all; default 64 MiB. */
  readonly maxA2aTaskBytes?: number
  /** Bytes of A2A task messages and replies kept for one caller (an anonymous one: per address); default 8 MiB. */
  readonly maxA2aTaskBytesPerCaller?: number
}

/** The tasks: make, keep, find, run and follow them. */
export interface A2aTasksApi {
  /**
   * A new task in the working state at `now`, started by `principal` with `message` (not kept yet); its bytes count
   * against `holder`'s share (default the principal).
   */
  readonly make: (contextId: string, principal: string, message: Message, now: number, holder?: string) => A2aTask
  /** Keeps a task that will run in the background; busy when running tasks alone fill the store. */
  readonly keep: (task: A2aTask) => Effect.Effect<void, AgentUnavailable>
  /**
   * Keeps a task that finished (or paused) in its request at `now`, for `GetTask`. Given `kept`, the effect ends at
   * once and `kept` is called when the task is in the store (or failed to be), for the answer to go out then;
   * otherwise the effect waits for that.
   */
  readonly keepEnded: (task: A2aTask, now: number, kept?: () => void) => Effect.Effect<void>
  /** The task `id` of `principal`, if it is kept (here or in the store). */
  readonly find: (id: string, principal: string) => Effect.Effect<A2aTask | undefined, AgentUnavailable>
  /**
   * One caller's kept tasks (the query's `principal` and `holder`), newest status first, a page at a time; a task
   * running here is shown as it is now (its reply so far).
   */
  readonly list: (query: A2aTaskQuery) => Effect.Effect<{ readonly tasks: ReadonlyArray<A2aTask>; readonly total: number }, AgentUnavailable>
  /** Sets the task's state (and status message) at `now`, stores it, then tells its followers. */
  readonly settle: (task: A2aTask, now: number, state: TaskState, message?: Message) => Effect.Effect<void>
  /** Tells the task's followers of an event that is not a state change (a chunk of the reply). */
  readonly publish: (task: A2aTask, r: StreamResult) => void
  /** Runs `work` for the task in the background; interrupting it (cancel, server stop) ends it. */
  readonly run: (task: A2aTask, work: Effect.Effect<void>) => Effect.Effect<void>
  /** Interrupts the task's run, if it runs here, as a cancel (it is then settled canceled by the caller). */
  readonly interrupt: (task: A2aTask) => Effect.Effect<void>
  /** The task's events from when the stream is read on, until it ends or waits for input; `first()`, taken then, comes before them. */
  readonly follow: (task: A2aTask, first: () => ReadonlyArray<StreamResult>) => Stream.Stream<StreamResult>
  /** Interrupts every running task. */
  readonly stopAll: Effect.Effect<void>
  /** The tasks kept and the bytes they were counted for. */
  readonly stats: () => { readonly a2aTasks: number; readonly a2aTaskBytes: number }
}

/** The A2A tasks of one agent server. */
export class A2aTasks extends Context.Tag("agent-mesh/agent/A2aTasks")<A2aTasks, A2aTasksApi>() {}

/** What a kept task holds: its messages, status message and reply, as UTF-8 JSON. */
const sizeOf = (t: A2aTask): number =>
  Buffer.byteLength(JSON.stringify(t.history)) + Buffer.byteLength(t.text) + (t.statusMessage === undefined ? 0 : Buffer.byteLength(JSON.stringify(t.statusMessage)))

const ended = (s: TaskState) => isTerminal(s) || isInterrupted(s)

/** Events read from the store per query while following it. */
const EVENT_PAGE = 256
/** How often a follower of the store looks for new events. */
const POLL_MS = 200

const recordOf = (t: A2aTask): A2aTaskRecord => ({
  id: t.id,
  contextId: t.contextId,
  principal: t.principal,
  holder: t.holder,
  state: t.state,
  statusMessage: t.statusMessage,
  timestamp: t.timestamp,
  history: t.history.slice(),
  text: t.text,
  gateTaskId: t.gateTaskId,
  ended: ended(t.state),
  bytes: sizeOf(t),
  seq: t.seq
})

// The store keeps what this module wrote: a record's state and messages are the wire's.
const fromRecord = (r: A2aTaskRecord): A2aTask => ({
  id: r.id,
  contextId: r.contextId,
  principal: r.principal,
  holder: r.holder,
  state: r.state as TaskState,
  statusMessage: r.statusMessage as Message | undefined,
  timestamp: r.timestamp,
  history: r.history.slice() as Array<Message>,
  text: r.text,
  gateTaskId: r.gateTaskId,
  seq: r.seq,
  stored: true,
  canceling: false,
  fiber: undefined,
  listeners: undefined
})

const unavailable = (e: A2aTaskStoreUnavailable) => new AgentUnavailable({ code: "STORE_UNAVAILABLE", message: e.message, retryAfterSeconds: 1 })

/** The status message of a task whose run stopped with the server. */
const stoppedMessage = (task: A2aTask, messageId: string): Message => ({
  messageId,
  role: "ROLE_AGENT",
  contextId: task.contextId,
  taskId: task.id,
  parts: [{ text: "the agent stopped before the task ended" }],
  metadata: { code: "AGENT_STOPPED" }
})

/** The events of a task in the store from event `from` on, polling until it ends there (or goes quiet for `quietMs`). */
const followStore = (read: (from: number) => Effect.Effect<ReadonlyArray<string> | undefined, A2aTaskStoreUnavailable>, from: number, quietMs: number) =>
  Stream.unfoldChunkEffect({ next: from, quiet: 0, end: false }, (s) =>
    s.end
      ? Effect.succeed(Option.none())
      : read(s.next).pipe(
        Effect.flatMap((events) => {
          if (events === undefined) return Effect.succeed(Option.none())
          const out: Array<StreamResult> = []
          let end = false
          for (const e of events) {
            const r = JSON.parse(e) as StreamResult
            out.push(r)
            if ("statusUpdate" in r && ended(r.statusUpdate.status.state)) {
              end = true
              break
            }
          }
          if (out.length > 0) return Effect.succeed(Option.some([Chunk.fromIterable(out), { next: s.next + out.length, quiet: 0, end }] as const))
          if (s.quiet >= quietMs) return Effect.succeed(Option.none())
          return Effect.as(Effect.sleep(Duration.millis(POLL_MS)), Option.some([Chunk.empty<StreamResult>(), { ...s, quiet: s.quiet + POLL_MS }] as const))
        }),
        // A store that stops answering ends the stream; the client subscribes again and is told then.
        Effect.catchAll(() => Effect.succeed(Option.none()))
      ))

/** The tasks with these settings, over the `A2aTaskStore` in context (else one in memory); running tasks are interrupted when the scope closes. */
export const make = (options: Options): Effect.Effect<A2aTasksApi, never, Scope.Scope> =>
  Effect.gen(function* () {
    const bounds = boundsOf(options)
    const entropy = yield* Entropy
    const provided = yield* Effect.serviceOption(A2aTaskStore)
    const store = Option.getOrElse(provided, () => makeMemory(bounds))
    // Writes reach the store in the order they were made, in batches, from one fiber; a state change waits for its own.
    const writes = yield* Queue.unbounded<{ readonly write: A2aTaskWrite; readonly done?: Deferred.Deferred<void> }>()
    yield* Queue.takeBetween(writes, 1, 512).pipe(
      Effect.flatMap((batch) => {
        const items = Chunk.toReadonlyArray(batch)
        return store.write(items.map((i) => i.write)).pipe(
          Effect.retry(Schedule.exponential(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(5)))),
          Effect.catchAll((e) => Effect.logWarning(`A2A task store write failed: ${e.message}`)),
          Effect.ensuring(Effect.forEach(items, (i) => (i.done === undefined ? Effect.void : Deferred.succeed(i.done, undefined)), { discard: true }))
        )
      }),
      Effect.forever,
      Effect.forkScoped
    )
    // New tasks are kept in a database in one transaction per turn of the event loop: every request of the turn that
    // keeps one adds it here and waits, and the batch is written once the turn's requests have all been read
    // (setImmediate runs after the loop's I/O callbacks). One commit per turn, not per request; each answer still
    // waits for its own. In memory there is nothing to batch: a task is kept at once.
    const runtime = yield* Effect.runtime<never>()
    const keeping: Array<{ readonly entry: A2aTaskInsert; readonly resume: (kept: Exit.Exit<boolean, A2aTaskStoreUnavailable>) => void }> = []
    const flush = () => {
      const batch = keeping.splice(0)
      Runtime.runCallback(runtime)(store.insertAll(batch.map((k) => k.entry)), {
        onExit: (exit) => {
          for (const [i, k] of batch.entries()) k.resume(Exit.isSuccess(exit) ? Exit.succeed(exit.value[i] ?? false) : Exit.failCause(exit.cause))
        }
      })
    }
    /** Adds a task to this turn's batch; `resume` is told whether it was kept. */
    const enqueue = (record: A2aTaskRecord, now: number, resume: (kept: Exit.Exit<boolean, A2aTaskStoreUnavailable>) => void) => {
      if (keeping.push({ entry: { record, now }, resume }) === 1) setImmediate(flush)
    }
    const batched = Option.isSome(provided)
    const insert = batched
      ? (record: A2aTaskRecord, now: number): Effect.Effect<boolean, A2aTaskStoreUnavailable> => Effect.async((resume) => enqueue(record, now, resume))
      : store.insert

    // Made after the writer, so its tasks stop (and store how they ended) before the writer does.
    const live = yield* FiberSet.make<void>()
    // The tasks running (or resumed) in this process, until they end or wait for input: their followers here are
    // told at once, and a cancel here reaches their fiber.
    const local = new Map<string, A2aTask>()

    // A task is made and settled in the same millisecond more often than not: the text is made once for both.
    let isoMs = Number.NaN
    let isoText = ""
    const iso = (ms: number) => {
      if (ms !== isoMs) {
        isoMs = ms
        isoText = new Date(ms).toISOString()
      }
      return isoText
    }

    const make: A2aTasksApi["make"] = (contextId, principal, message, now, holder = principal) => ({
      // Time-ordered, so the store's key index grows at its end.
      id: uuidV7(now, entropy),
      contextId,
      principal,
      holder,
      state: "TASK_STATE_WORKING",
      statusMessage: undefined,
      timestamp: iso(now),
      history: [message.contextId === contextId ? message : { ...message, contextId }],
      text: "",
      gateTaskId: undefined,
      seq: 0,
      stored: false,
      canceling: false,
      fiber: undefined,
      listeners: undefined
    })

    const keep: A2aTasksApi["keep"] = (task) =>
      Effect.gen(function* () {
        const fits = yield* Effect.mapError(insert(recordOf(task), yield* Clock.currentTimeMillis), unavailable)
        if (!fits) {
          return yield* Effect.fail(
            new AgentUnavailable({ code: "AGENT_BUSY", message: "the A2A tasks in progress hold this agent's bound of tasks or bytes; retry shortly", retryAfterSeconds: 1 })
          )
        }
        task.stored = true
        local.set(task.id, task)
      })

    // Its answer was given in its own request; one that does not fit (or a store that fails) leaves it unkept for GetTask.
    const notKept = (task: A2aTask, e: A2aTaskStoreUnavailable) => Effect.logWarning(`A2A task ${task.id} not kept: ${e.message}`)
    const keepEnded: A2aTasksApi["keepEnded"] = (task, now, kept) => {
      if (kept === undefined || !batched) {
        // In memory the task is kept before the request's effect ends: nothing to hold the answer for.
        kept?.()
        return insert(recordOf(task), now).pipe(
          Effect.map((fits) => void (task.stored = fits)),
          Effect.catchAll((e) => notKept(task, e))
        )
      }
      return Effect.sync(() =>
        enqueue(recordOf(task), now, (exit) => {
          if (Exit.isSuccess(exit)) task.stored = exit.value
          else Runtime.runFork(runtime)(Effect.catchAll(Effect.asVoid(exit), (e) => notKept(task, e)))
          kept()
        })
      )
    }

    const find: A2aTasksApi["find"] = (id, principal) => {
      const here = local.get(id)
      if (here !== undefined) return Effect.succeed(here.principal === principal ? here : undefined)
      return store.find(id, principal).pipe(
        Effect.map((r) => (r === undefined ? undefined : fromRecord(r))),
        Effect.mapError(unavailable)
      )
    }

    const list: A2aTasksApi["list"] = (query) =>
      store.list(query).pipe(
        Effect.map((page) => ({ tasks: page.records.map((r) => local.get(r.id) ?? fromRecord(r)), total: page.total })),
        Effect.mapError(unavailable)
      )

    const tell = (task: A2aTask, r: StreamResult) => {
      if (task.listeners !== undefined) for (const l of task.listeners) l(r)
    }

    const publish: A2aTasksApi["publish"] = (task, r) => {
      if (task.stored) Queue.unsafeOffer(writes, { write: { _tag: "Event", id: task.id, seq: task.seq++, event: JSON.stringify(r) } })
      tell(task, r)
    }

    const settle: A2aTasksApi["settle"] = (task, now, state, message) =>
      Effect.suspend(() => {
        task.state = state
        task.statusMessage = message
        task.timestamp = iso(now)
        if (message !== undefined) task.history.push(message)
        const update: StreamResult = {
          statusUpdate: { taskId: task.id, contextId: task.contextId, status: { state, timestamp: task.timestamp, ...(message === undefined ? {} : { message }) } }
        }
        if (ended(state)) local.delete(task.id)
        else if (task.stored) local.set(task.id, task)
        if (!task.stored) return Effect.sync(() => tell(task, update))
        const event: A2aTaskWrite = { _tag: "Event", id: task.id, seq: task.seq++, event: JSON.stringify(update) }
        const save: A2aTaskWrite = { _tag: "Save", record: recordOf(task), at: now }
        return Effect.flatMap(Deferred.make<void>(), (done) => {
          Queue.unsafeOffer(writes, { write: event })
          Queue.unsafeOffer(writes, { write: save, done })
          return Effect.zipRight(Deferred.await(done), Effect.sync(() => tell(task, update)))
        })
      })

    const run: A2aTasksApi["run"] = (task, work) =>
      Effect.map(
        FiberSet.run(
          live,
          work.pipe(
            // A run stopped with the server ends its task failed, so followers elsewhere are not left waiting.
            Effect.onInterrupt(() =>
              task.canceling || ended(task.state) ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) => settle(task, now, "TASK_STATE_FAILED", stoppedMessage(task, entropy.uuid())))
            ),
            Effect.ensuring(Effect.sync(() => void (task.fiber = undefined)))
          )
        ),
        (fiber) => {
          if (task.fiber === undefined && fiber.unsafePoll() === null) task.fiber = fiber
        }
      )

    const interrupt: A2aTasksApi["interrupt"] = (task) =>
      Effect.suspend(() => {
        task.canceling = true
        return task.fiber === undefined ? Effect.void : Fiber.interrupt(task.fiber)
      })

    const followHere = (task: A2aTask, first: () => ReadonlyArray<StreamResult>) =>
      Stream.async<StreamResult>((emit) => {
        for (const r of first()) void emit.single(r)
        if (ended(task.state)) {
          void emit.end()
          return
        }
        const listeners = (task.listeners ??= new Set())
        const listener = (r: StreamResult) => {
          void emit.single(r)
          if ("statusUpdate" in r && ended(r.statusUpdate.status.state)) {
            listeners.delete(listener)
            void emit.end()
          }
        }
        listeners.add(listener)
        return Effect.sync(() => void listeners.delete(listener))
      })

    const follow: A2aTasksApi["follow"] = (task, first) => {
      if (!task.stored || local.get(task.id) === task) return followHere(task, first)
      // Running elsewhere (another replica, or before a restart): the store's events from the ones this copy holds on.
      return Stream.suspend(() => {
        const head = Stream.fromIterable(first())
        return ended(task.state) ? head : Stream.concat(head, followStore((from) => store.events(task.id, from, EVENT_PAGE), task.seq, bounds.retentionMs))
      })
    }

    const stats = () => {
      const s = store.stats()
      return { a2aTasks: s.tasks, a2aTaskBytes: s.bytes }
    }
    return { make, keep, keepEnded, find, list, settle, publish, run, interrupt, follow, stopAll: FiberSet.clear(live), stats }
  })

/** `A2aTasks` with these settings, over the `A2aTaskStore` in context (else one in memory). */
export const layer = (options: Options): Layer.Layer<A2aTasks> => Layer.scoped(A2aTasks, make(options))
