/**
 * Counters behind the hard limits of mandates: uses of a capability (`actionLimits`), LLM tokens and web requests
 * (`computeLimit`), USD micros spent. Each counter belongs to a scope (a mandate's `jti`) and never passes its
 * limit: a charge is all-or-nothing over every counter it names, so many fibers racing for the last unit get
 * exactly one winner. The tag and the memory layer live here; the SQL layer (kept across restarts) is `TaskStoreSql`.
 *
 * Also tasks paused at a human gate: `pause` records one, `claim` moves it out of `paused` exactly once (of any
 * number of concurrent claims one wins), and finished tasks are kept until their mandate expires, so a second
 * claim learns TASK_ALREADY_RESUMED rather than TASK_NOT_FOUND. Approvals themselves are checked in `Approval`.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/** One increment: add `amount` to the counter (`scope`, `counter`) unless that would take it past `limit`. */
export interface CounterCharge {
  /** Whose counter: the `jti` of the mandate whose limit this is. */
  readonly scope: string
  /** Which counter, e.g. `action:send_email`, `compute:llmTokens`, `spend:usdMicros`. */
  readonly counter: string
  /** A non-negative safe integer. */
  readonly amount: number
  /** The most the counter may reach. */
  readonly limit: number
}

/**
 * A correction after the fact: move the counter (`scope`, `counter`) by `delta` (a safe integer, either sign),
 * clamped to 0 … `limit`. It settles a reservation once the real amount is known: the unused part goes back, an
 * overrun is charged as far as the limit.
 */
export interface CounterAdjustment {
  readonly scope: string
  readonly counter: string
  readonly delta: number
  readonly limit: number
}

/** The counter value after an adjustment: clamped to 0 … limit (a value already past a lowered limit only goes down). */
export const adjusted = (used: number, a: CounterAdjustment): number =>
  a.delta < 0 ? Math.max(0, used + a.delta) : Math.max(used, Math.min(a.limit, used + a.delta))

/** Whether an adjustment is well-formed (safe integers, a non-negative limit); others are ignored. */
export const isAdjustment = (a: CounterAdjustment): boolean =>
  Number.isSafeInteger(a.delta) && Number.isSafeInteger(a.limit) && a.limit >= 0

/** A charge would take a counter past its limit; nothing was charged. */
export class CounterLimitReached extends Schema.TaggedError<CounterLimitReached>()("CounterLimitReached", {
  code: Schema.Literal("COUNTER_LIMIT_REACHED"),
  scope: Schema.String,
  counter: Schema.String,
  amount: Schema.Number,
  limit: Schema.Number
}) {}

/** The store's backing database failed; the action is refused (fail closed). */
export class TaskStoreUnavailable extends Schema.TaggedError<TaskStoreUnavailable>()("TaskStoreUnavailable", {
  code: Schema.Literal("TASK_STORE_UNAVAILABLE"),
  message: Schema.String
}) {}

/** The `CounterLimitReached` for a charge. */
export const limitReached = (c: CounterCharge): CounterLimitReached =>
  new CounterLimitReached({ code: "COUNTER_LIMIT_REACHED", scope: c.scope, counter: c.counter, amount: c.amount, limit: c.limit })

/** A task paused at a human gate; `state` is the agent server's JSON (its input and journal), opaque here. */
export interface PausedTask {
  /** Names the pause: unique per pause (a fresh id each time a task stops at a gate), since approvals name it. */
  readonly taskId: string
  /** The agent DID whose server paused it (one database may serve several agents). */
  readonly owner: string
  /** The gated capability the task waits to exercise. */
  readonly capability: string
  /** The `jti` of the task mandate the task runs under. */
  readonly mandateJti: string
  /** The DID that must sign the approval. */
  readonly grantor: string
  /** The task mandate token presented by the caller, exactly as presented. */
  readonly mandate: string
  /** JSON-serializable; it comes back as `JSON.parse(JSON.stringify(state))` from either layer. */
  readonly state: unknown
  /** Epoch ms. */
  readonly createdAt: number
  /** Epoch ms (the mandate's expiry, which `Mandate` gives in seconds): from this instant the task cannot resume. */
  readonly expiresAt: number
}

/** Where a paused task stands: still waiting, or finished by the one claim that won. */
export type PausedTaskStatus = "paused" | "resumed" | "cancelled"

/** A paused task as stored, with its status. */
export interface PausedTaskRecord extends PausedTask {
  readonly status: PausedTaskStatus
}

/** Why a task could not be paused: its id is already held (resumed and cancelled ones included), or it is not storable. */
export class PauseRefused extends Schema.TaggedError<PauseRefused>()("PauseRefused", {
  code: Schema.Literal("TASK_ID_TAKEN", "INVALID_TASK"),
  message: Schema.String,
  taskId: Schema.String
}) {}

/** Why a claim lost: TASK_NOT_FOUND, TASK_ALREADY_RESUMED (left `paused` before; `status` says how), TASK_EXPIRED. */
export const TaskNotPausedCode = Schema.Literal("TASK_NOT_FOUND", "TASK_ALREADY_RESUMED", "TASK_EXPIRED")
/** Why a claim lost. */
export type TaskNotPausedCode = typeof TaskNotPausedCode.Type

/** The task is not (or no longer) waiting at its gate; nothing changed. */
export class TaskNotPaused extends Schema.TaggedError<TaskNotPaused>()("TaskNotPaused", {
  code: TaskNotPausedCode,
  message: Schema.String,
  taskId: Schema.String,
  /** For TASK_ALREADY_RESUMED: whether the winning claim resumed or cancelled the task. */
  status: Schema.optional(Schema.Literal("resumed", "cancelled"))
}) {}

/** The `TaskNotPaused` for a stored task that a claim at `now` could not take (or for none at all). */
export const notPaused = (taskId: string, found: { readonly status: PausedTaskStatus; readonly expiresAt: number } | undefined, now: number): TaskNotPaused => {
  if (found === undefined) return new TaskNotPaused({ code: "TASK_NOT_FOUND", message: `no paused task ${taskId}`, taskId })
  if (found.status !== "paused") {
    return new TaskNotPaused({ code: "TASK_ALREADY_RESUMED", message: `task ${taskId} was already ${found.status}`, taskId, status: found.status })
  }
  // Still `paused` after a claim failed: either expired, or inserted after the claim looked (a race a retry settles).
  return found.expiresAt <= now
    ? new TaskNotPaused({ code: "TASK_EXPIRED", message: `task ${taskId} expired at ${new Date(found.expiresAt).toISOString()}`, taskId })
    : new TaskNotPaused({ code: "TASK_NOT_FOUND", message: `no paused task ${taskId}`, taskId })
}

/** The task with whole-ms times and its state as JSON text, or why it cannot be stored; shared by both layers. */
export const storable = (task: PausedTask): { readonly task: PausedTask; readonly stateJson: string } | PauseRefused => {
  const refuse = (message: string) => new PauseRefused({ code: "INVALID_TASK", message, taskId: String(task.taskId) })
  for (const k of ["taskId", "owner", "capability", "mandateJti", "grantor", "mandate"] as const) {
    if (typeof task[k] !== "string" || task[k].length === 0) return refuse(`${k} must be a non-empty string`)
  }
  if (!Number.isFinite(task.createdAt) || !Number.isFinite(task.expiresAt)) return refuse("createdAt and expiresAt must be epoch ms")
  let stateJson: string | undefined
  try {
    stateJson = JSON.stringify(task.state)
  } catch (e) {
    return refuse(`state is not JSON-serializable: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (stateJson === undefined) return refuse("state is not JSON-serializable")
  return { task: { ...task, createdAt: Math.floor(task.createdAt), expiresAt: Math.floor(task.expiresAt) }, stateJson }
}

/** The operations of a task store. */
export interface TaskStoreApi {
  /**
   * Applies every charge or none: fails with the first `CounterLimitReached` when any counter would pass its limit.
   * `retainUntilMs` (epoch ms, usually the mandate's expiry) says how long the counters must be kept.
   */
  readonly charge: (
    charges: ReadonlyArray<CounterCharge>,
    retainUntilMs: number
  ) => Effect.Effect<void, CounterLimitReached | TaskStoreUnavailable>
  /**
   * Applies corrections that never fail on a limit: each counter moves by its `delta`, clamped to 0 … `limit`
   * (for settling a reservation with the amount really spent). Malformed ones are ignored.
   */
  readonly adjust: (adjustments: ReadonlyArray<CounterAdjustment>, retainUntilMs: number) => Effect.Effect<void, TaskStoreUnavailable>
  /** The current value of a counter (0 when never charged). */
  readonly used: (scope: string, counter: string) => Effect.Effect<number, TaskStoreUnavailable>
  /** Records a task paused at a human gate; refuses a `taskId` the store already holds, whatever its status. */
  readonly pause: (task: PausedTask) => Effect.Effect<void, PauseRefused | TaskStoreUnavailable>
  /** The stored task (paused, or finished and not yet purged; an expired one may still show until purged). */
  readonly paused: (taskId: string) => Effect.Effect<Option.Option<PausedTaskRecord>, TaskStoreUnavailable>
  /** Atomically moves a paused, unexpired task to `to`; exactly one of any number of concurrent claims wins. */
  readonly claim: (taskId: string, to: "resumed" | "cancelled") => Effect.Effect<PausedTask, TaskNotPaused | TaskStoreUnavailable>
}

/** The `TaskStore` service. */
export class TaskStore extends Context.Tag("agent-mesh/TaskStore")<TaskStore, TaskStoreApi>() {}

/**
 * The counter scope of a mandate: its grantor and `jti`. A `jti` is chosen by its grantor, so on its own another
 * grantor could name it and spend someone else's counters.
 */
export const counterScope = (m: { readonly grantor: string; readonly jti: string }): string => `${m.grantor} ${m.jti}`

/** Rejects an amount or limit that is not a non-negative safe integer, or an amount above the limit on its own. */
export const precheck = (c: CounterCharge): CounterLimitReached | undefined =>
  !Number.isSafeInteger(c.amount) || c.amount < 0 || !Number.isSafeInteger(c.limit) || c.amount > c.limit
    ? limitReached(c)
    : undefined

// A DID-derived jti and a counter name never contain NUL, so the joined key is unambiguous.
const keyOf = (scope: string, counter: string) => `${scope}\u0000${counter}`

/** Sweep counters whose mandates have expired once every this many charges. */
const SWEEP_EVERY = 1024

/** Purge paused tasks past their expiry (finished or not) once every this many pauses. */
export const PURGE_TASKS_EVERY = 1024

/** An in-memory store; atomic because a charge or a claim checks and applies in one synchronous step. Not durable. */
export const makeMemory = (): TaskStoreApi => {
  const counters = new Map<string, { used: number; until: number }>()
  let sinceSweep = 0
  // State is kept as JSON text, as the SQL layer keeps it, so a caller mutating its object later changes nothing.
  const tasks = new Map<string, { task: Omit<PausedTask, "state">; stateJson: string; status: PausedTaskStatus }>()
  let sinceTaskSweep = 0
  const taskOf = (e: { task: Omit<PausedTask, "state">; stateJson: string }): PausedTask => ({ ...e.task, state: JSON.parse(e.stateJson) })
  return {
    charge: (charges, retainUntilMs) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        for (const c of charges) {
          const bad = precheck(c)
          if (bad) return Effect.fail(bad)
        }
        if (++sinceSweep >= SWEEP_EVERY) {
          sinceSweep = 0
          for (const [key, entry] of counters) if (entry.until <= now) counters.delete(key)
        }
        // Sum per counter first, so two charges on one counter in the same call are checked together.
        const next = new Map<string, number>()
        for (const c of charges) {
          const key = keyOf(c.scope, c.counter)
          const after = (next.get(key) ?? counters.get(key)?.used ?? 0) + c.amount
          if (after > c.limit) return Effect.fail(limitReached(c))
          next.set(key, after)
        }
        for (const [key, used] of next) {
          const until = Math.max(counters.get(key)?.until ?? 0, retainUntilMs)
          counters.set(key, { used, until })
        }
        return Effect.void
      }),
    adjust: (adjustments, retainUntilMs) =>
      Effect.sync(() => {
        for (const a of adjustments) {
          if (!isAdjustment(a) || a.delta === 0) continue
          const key = keyOf(a.scope, a.counter)
          const entry = counters.get(key)
          counters.set(key, { used: adjusted(entry?.used ?? 0, a), until: Math.max(entry?.until ?? 0, retainUntilMs) })
        }
      }),
    used: (scope, counter) => Effect.sync(() => counters.get(keyOf(scope, counter))?.used ?? 0),
    pause: (input) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const ok = storable(input)
        if (ok instanceof PauseRefused) return Effect.fail(ok)
        if (++sinceTaskSweep >= PURGE_TASKS_EVERY) {
          sinceTaskSweep = 0
          for (const [id, entry] of tasks) if (entry.task.expiresAt <= now) tasks.delete(id)
        }
        if (tasks.has(ok.task.taskId)) {
          return Effect.fail(new PauseRefused({ code: "TASK_ID_TAKEN", message: `task ${ok.task.taskId} already exists`, taskId: ok.task.taskId }))
        }
        const { state: _state, ...rest } = ok.task
        tasks.set(ok.task.taskId, { task: rest, stateJson: ok.stateJson, status: "paused" })
        return Effect.void
      }),
    paused: (taskId) =>
      Effect.sync(() => {
        const e = tasks.get(taskId)
        return e === undefined ? Option.none() : Option.some({ ...taskOf(e), status: e.status })
      }),
    claim: (taskId, to) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const e = tasks.get(taskId)
        if (e === undefined || e.status !== "paused" || e.task.expiresAt <= now) {
          return Effect.fail(notPaused(taskId, e === undefined ? undefined : { status: e.status, expiresAt: e.task.expiresAt }, now))
        }
        e.status = to
        return Effect.succeed(taskOf(e))
      })
  }
}

/** The memory layer (also the test layer). */
export const layerMemory: Layer.Layer<TaskStore> = Layer.sync(TaskStore, makeMemory)
