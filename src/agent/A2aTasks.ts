/**
 * The A2A tasks of one agent server: each task's state, history and reply so far, the fiber running it and whoever
 * follows its stream. A task outlives the request that started it (a client that drops its stream subscribes again),
 * and memory stays bounded: at most `maxTasks` are kept, and at most `maxA2aTaskBytes` of their messages and replies
 * (`maxA2aTaskBytesPerCaller` per caller: its principal, or an anonymous caller's address), finished ones let go first (oldest first) and after `runRetentionMs`;
 * while running tasks alone fill a bound, a new background task is refused as busy (503 `AGENT_BUSY`), and an ended
 * one that does not fit is not kept. A task's bytes are counted when it is kept and again when it ends. A task is found only by
 * the principal that started it, so nobody learns another caller's task ids.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { AgentUnavailable } from "./AgentError.js"
import { isInterrupted, isTerminal, type Message, type StreamResult, type Task, type TaskState } from "./A2aProtocol.js"
import { Entropy } from "../core/Entropy.js"
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
  fiber: Fiber.RuntimeFiber<void> | undefined
  /** Whoever follows its stream; made on first follow (most tasks are never followed, and many are kept). */
  listeners: Set<(r: StreamResult) => void> | undefined
}

/** Whose share an A2A caller's task bytes count against: its principal, or an anonymous caller's address (an IPv6 one by its /64). */
export const holderOf = (caller: { readonly auth: string; readonly principal: string }, remoteAddress: string | undefined): string =>
  caller.auth === "none" ? `anonymous:${clientKey(remoteAddress ?? "unknown")}` : caller.principal

/** The artifact every reply is written to. */
export const REPLY_ARTIFACT = "reply"

/** The task as the wire shows it (`historyLength` most recent messages, all when unset). */
export const snapshot = (t: A2aTask, historyLength?: number): Task => ({
  id: t.id,
  contextId: t.contextId,
  status: { state: t.state, timestamp: t.timestamp, ...(t.statusMessage === undefined ? {} : { message: t.statusMessage }) },
  ...(t.text.length === 0 ? {} : { artifacts: [{ artifactId: REPLY_ARTIFACT, name: REPLY_ARTIFACT, parts: [{ text: t.text }] }] }),
  history: historyLength === undefined ? t.history : historyLength <= 0 ? [] : t.history.slice(-historyLength)
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
  /** Keeps a task that finished (or paused) in its request at `now`, for `GetTask`. */
  readonly keepEnded: (task: A2aTask, now: number) => void
  /** The task `id` of `principal`, if it is kept. */
  readonly find: (id: string, principal: string) => A2aTask | undefined
  /** Sets the task's state (and status message) at `now`, tells its followers, and records when it ended. */
  readonly settle: (task: A2aTask, now: number, state: TaskState, message?: Message) => void
  /** Tells the task's followers of an event that is not a state change (a chunk of the reply). */
  readonly publish: (task: A2aTask, r: StreamResult) => void
  /** Runs `work` for the task in the background; interrupting it (cancel, server stop) ends it. */
  readonly run: (task: A2aTask, work: Effect.Effect<void>) => Effect.Effect<void>
  /** The task's events from when the stream is read on, until it ends or waits for input; `first()`, taken then, comes before them. */
  readonly follow: (task: A2aTask, first: () => ReadonlyArray<StreamResult>) => Stream.Stream<StreamResult>
  /** Interrupts every running task. */
  readonly stopAll: Effect.Effect<void>
  /** The tasks kept and the bytes they were counted for. */
  readonly stats: () => { readonly a2aTasks: number; readonly a2aTaskBytes: number }
}

/** The A2A tasks of one agent server. */
export class A2aTasks extends Context.Tag("agent-mesh/agent/A2aTasks")<A2aTasks, A2aTasksApi>() {}

const DEFAULT_RETENTION_MS = 5 * 60_000
const DEFAULT_MAX_TASKS = 10_000
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024
const DEFAULT_MAX_BYTES_PER_CALLER = 8 * 1024 * 1024

const encoder = new TextEncoder()
/** What a kept task holds: its messages, status message and reply, as UTF-8 JSON. */
const sizeOf = (t: A2aTask): number =>
  encoder.encode(JSON.stringify(t.history)).length + encoder.encode(t.text).length + (t.statusMessage === undefined ? 0 : encoder.encode(JSON.stringify(t.statusMessage)).length)

const ended = (s: TaskState) => isTerminal(s) || isInterrupted(s)

/** The tasks with these settings; running tasks are interrupted when the scope closes. */
export const make = (options: Options): Effect.Effect<A2aTasksApi, never, Scope.Scope> =>
  Effect.gen(function* () {
    const retention = options.runRetentionMs ?? DEFAULT_RETENTION_MS
    const entropy = yield* Entropy
    const max = Math.max(1, options.maxA2aTasks ?? DEFAULT_MAX_TASKS)
    const maxBytes = options.maxA2aTaskBytes ?? DEFAULT_MAX_BYTES
    const maxBytesPerCaller = options.maxA2aTaskBytesPerCaller ?? DEFAULT_MAX_BYTES_PER_CALLER
    const tasks = new Map<string, A2aTask>()
    // Bytes each kept task was counted for, in all and per holder.
    const sizes = new Map<string, number>()
    const byHolder = new Map<string, number>()
    let bytes = 0
    const held = (holder: string) => byHolder.get(holder) ?? 0
    const count = (task: A2aTask, size: number) => {
      const before = sizes.get(task.id) ?? 0
      sizes.set(task.id, size)
      bytes += size - before
      byHolder.set(task.holder, held(task.holder) + size - before)
    }
    const forget = (id: string) => {
      const t = tasks.get(id)
      tasks.delete(id)
      const size = sizes.get(id)
      if (t === undefined || size === undefined) return
      sizes.delete(id)
      bytes -= size
      const left = held(t.holder) - size
      if (left <= 0) byHolder.delete(t.holder)
      else byHolder.set(t.holder, left)
    }
    // When each ended task ended, and the order they ended in (oldest first). A queue of its own, not the Map's
    // insertion order: V8 skips a Map's deleted entries one by one when iterating from its start, so a Map used as a
    // queue costs more per request the more it holds. An entry whose task ended again later is stale and skipped.
    const endedAt = new Map<string, number>()
    const order: Array<{ readonly id: string; readonly at: number }> = []
    let head = 0
    const markEnded = (id: string, at: number) => {
      endedAt.set(id, at)
      order.push({ id, at })
    }
    const live = yield* FiberSet.make<void>()

    const prune = (now: number, room: number, roomBytes = 0) => {
      while (head < order.length) {
        const { at, id } = order[head]!
        if (endedAt.get(id) === at) {
          if (now - at <= retention && tasks.size + room <= max && bytes + roomBytes <= maxBytes) break
          endedAt.delete(id)
          forget(id)
        }
        head++
      }
      if (head > 1024 && head * 2 > order.length) {
        order.splice(0, head)
        head = 0
      }
    }

    const iso = (ms: number) => new Date(ms).toISOString()

    const make: A2aTasksApi["make"] = (contextId, principal, message, now, holder = principal) => ({
        id: entropy.uuid(),
        contextId,
        principal,
        holder,
        state: "TASK_STATE_WORKING",
        statusMessage: undefined,
        timestamp: iso(now),
        history: [message.contextId === contextId ? message : { ...message, contextId }],
        text: "",
        gateTaskId: undefined,
        fiber: undefined,
        listeners: undefined
      })

    /** Lets `holder`'s ended tasks go, oldest first, until `need` more bytes fit its share. */
    const pruneOwn = (holder: string, need: number) => {
      for (let i = head; i < order.length && held(holder) + need > maxBytesPerCaller; i++) {
        const { at, id } = order[i]!
        if (endedAt.get(id) === at && tasks.get(id)?.holder === holder) {
          endedAt.delete(id)
          forget(id)
        }
      }
    }

    /** Makes room for `task` (ended tasks let go); whether it fits every bound. */
    const room = (task: A2aTask, size: number, now: number) => {
      prune(now, 1, size)
      pruneOwn(task.holder, size)
      return tasks.size < max && bytes + size <= maxBytes && held(task.holder) + size <= maxBytesPerCaller
    }

    const keep: A2aTasksApi["keep"] = (task) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const size = sizeOf(task)
        if (!room(task, size, now)) {
          return Effect.fail(
            new AgentUnavailable({ code: "AGENT_BUSY", message: "the A2A tasks in progress hold this agent's bound of tasks or bytes; retry shortly", retryAfterSeconds: 1 })
          )
        }
        tasks.set(task.id, task)
        count(task, size)
        return Effect.void
      })

    const keepEnded: A2aTasksApi["keepEnded"] = (task, now) => {
      const size = sizeOf(task)
      // Its answer was given in its own request; one that does not fit is not kept for GetTask.
      if (!room(task, size, now)) return
      tasks.set(task.id, task)
      count(task, size)
      markEnded(task.id, now)
      prune(now, 0)
    }

    const find: A2aTasksApi["find"] = (id, principal) => {
      const t = tasks.get(id)
      return t !== undefined && t.principal === principal ? t : undefined
    }

    const publish: A2aTasksApi["publish"] = (task, r) => {
      if (task.listeners !== undefined) for (const l of task.listeners) l(r)
    }

    const settle: A2aTasksApi["settle"] = (task, now, state, message) => {
        task.state = state
        task.statusMessage = message
        task.timestamp = iso(now)
        if (message !== undefined) task.history.push(message)
        // Kept by when it ended; a task that goes on again (an approval resumed it) is not let go while it runs.
        endedAt.delete(task.id)
        if (ended(state) && tasks.get(task.id) === task) {
          // Its reply grew while it ran: counted again, and room made for it.
          count(task, sizeOf(task))
          markEnded(task.id, now)
          prune(now, 0)
          pruneOwn(task.holder, 0)
        }
        if (task.listeners !== undefined && task.listeners.size > 0) {
          publish(task, { statusUpdate: { taskId: task.id, contextId: task.contextId, status: { state, timestamp: task.timestamp, ...(message === undefined ? {} : { message }) } } })
        }
    }

    const run: A2aTasksApi["run"] = (task, work) =>
      Effect.map(FiberSet.run(live, Effect.ensuring(work, Effect.sync(() => void (task.fiber = undefined)))), (fiber) => {
        if (task.fiber === undefined && fiber.unsafePoll() === null) task.fiber = fiber
      })

    const follow: A2aTasksApi["follow"] = (task, first) =>
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

    const stats = () => ({ a2aTasks: tasks.size, a2aTaskBytes: bytes })
    return { make, keep, keepEnded, find, settle, publish, run, follow, stopAll: FiberSet.clear(live), stats }
  })

/** `A2aTasks` with these settings. */
export const layer = (options: Options): Layer.Layer<A2aTasks> => Layer.scoped(A2aTasks, make(options))
