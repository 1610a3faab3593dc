/**
 * Counters behind the hard limits of mandates: uses of a capability (`actionLimits`), LLM tokens and web requests
 * (`computeLimit`), USD micros spent. Each counter belongs to a scope (a mandate's `jti`) and never passes its
 * limit: a charge is all-or-nothing over every counter it names, so many fibers racing for the last unit get
 * exactly one winner. The tag and the memory layer live here; the SQL layer (kept across restarts) is `TaskStoreSql`.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
  /** The current value of a counter (0 when never charged). */
  readonly used: (scope: string, counter: string) => Effect.Effect<number, TaskStoreUnavailable>
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

/** An in-memory store; atomic because a charge checks and applies in one synchronous step. Not durable. */
export const makeMemory = (): TaskStoreApi => {
  const counters = new Map<string, { used: number; until: number }>()
  let sinceSweep = 0
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
    used: (scope, counter) => Effect.sync(() => counters.get(keyOf(scope, counter))?.used ?? 0)
  }
}

/** The memory layer (also the test layer). */
export const layerMemory: Layer.Layer<TaskStore> = Layer.sync(TaskStore, makeMemory)
