/**
 * Enforces task mandates before an action runs: the chain must verify for the presenter, the capability must be
 * permitted, reversibility, sandbox, data scopes and human gates must hold, and the action's uses, LLM tokens and
 * web requests are charged against the limits of every link of the chain at once (all or nothing, in `TaskStore`).
 *
 * A runtime's own model calls spend compute without exercising a capability: `reserveCompute` charges an upper
 * bound before the call (so concurrent calls cannot together pass a limit) and `settleCompute` corrects it to what
 * the provider reported, giving back the rest or charging an overrun up to the limit.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { TaskConstraints } from "./Constraints.js"
import { Keys } from "./Keys.js"
import { KeyResolver } from "./KeyResolver.js"
import { chainOf, type Mandate, MandateInvalidReason, verifyMandate } from "./Mandate.js"
import { type CounterAdjustment, type CounterCharge, counterScope, TaskStore, type TaskStoreUnavailable } from "./TaskStore.js"

/** The codes of a refused action. */
export const TaskViolationCode = Schema.Literal(
  "MANDATE_INVALID",
  "CAPABILITY_NOT_PERMITTED",
  "REVERSIBILITY_VIOLATION",
  "HUMAN_GATE_REQUIRED",
  "ACTION_LIMIT_EXCEEDED",
  "COMPUTE_LIMIT_EXCEEDED",
  "DATA_ACCESS_VIOLATION",
  "SANDBOX_REQUIRED",
  "DELEGATION_DEPTH_EXCEEDED"
)
/** The codes of a refused action. */
export type TaskViolationCode = typeof TaskViolationCode.Type

/** An action refused under its mandate; for MANDATE_INVALID, `reason` is the verification reason. */
export class TaskConstraintViolation extends Schema.TaggedError<TaskConstraintViolation>()("TaskConstraintViolation", {
  code: TaskViolationCode,
  message: Schema.String,
  reason: Schema.optional(MandateInvalidReason)
}) {}

/** An action about to run under a task mandate. */
export interface TaskAction {
  /** The DID presenting the mandate: it must be the grantee. */
  readonly presenter: string
  /** The capability exercised. */
  readonly capability: string
  /** Whether the action can be undone. */
  readonly reversible: boolean
  /** Data scopes the action touches. */
  readonly dataScopes?: ReadonlyArray<string>
  /** Whether the runtime executing the action is sandboxed. */
  readonly sandboxed: boolean
  /** LLM tokens the action will spend. */
  readonly llmTokens?: number
  /** Web requests the action will make. */
  readonly webRequests?: number
  /** Set by the runtime only after recording a human approval for this very action (human gates). */
  readonly humanApproved?: boolean
}

/** Counter names in `TaskStore`. */
export const actionCounter = (capability: string) => `action:${capability}`
/** Counter names in `TaskStore`. */
export const computeCounter = (resource: "llmTokens" | "webRequests") => `compute:${resource}`

/** LLM tokens and web requests, as charged against `computeLimit`. */
export interface ComputeAmount {
  readonly llmTokens?: number
  readonly webRequests?: number
}

/** The operations of the task guard. */
export interface TaskGuardApi {
  /** Checks the action against the mandate and charges its limits; fails with the code of the first rule broken. */
  readonly check: (
    token: string,
    action: TaskAction
  ) => Effect.Effect<Mandate<"task">, TaskConstraintViolation | TaskStoreUnavailable>
  /**
   * Reserves compute the presenter is about to spend on its own account (its model calls: compute, not a
   * capability, so no capability, gate or scope rule applies): the mandate must verify for the presenter, and the
   * amounts are charged against `computeLimit` of every link at once, all or nothing (COMPUTE_LIMIT_EXCEEDED).
   */
  readonly reserveCompute: (
    token: string,
    presenter: string,
    amount: ComputeAmount
  ) => Effect.Effect<Mandate<"task">, TaskConstraintViolation | TaskStoreUnavailable>
  /**
   * Settles a reservation with what was really spent: the unused part goes back; an overrun (more than reserved)
   * is charged as far as each link's limit and no further, so the next reservation is refused.
   */
  readonly settleCompute: (
    mandate: Mandate<"task">,
    reserved: ComputeAmount,
    spent: ComputeAmount
  ) => Effect.Effect<void, TaskStoreUnavailable>
}

const violation = (code: TaskViolationCode, message: string) => new TaskConstraintViolation({ code, message })

const isCount = (n: number | undefined): boolean => n === undefined || (Number.isSafeInteger(n) && n >= 0)

/** A guard on the given key resolver and task store. */
export const make: Effect.Effect<TaskGuardApi, never, Keys | KeyResolver | TaskStore> = Effect.gen(function* () {
  const keys = yield* Keys
  const resolver = yield* KeyResolver
  const store = yield* TaskStore

  const verify = (token: string, presenter: string) =>
    verifyMandate(token, resolver, { expectedGrantee: presenter, kinds: ["task"] }).pipe(
      Effect.provideService(Keys, keys),
      Effect.mapError((e) =>
        new TaskConstraintViolation({
          code: e.reason === "DEPTH_EXCEEDED" ? "DELEGATION_DEPTH_EXCEEDED" : "MANDATE_INVALID",
          message: `${e.reason}: ${e.message}`,
          reason: e.reason
        })
      ),
      Effect.map((m) => m as Mandate<"task">)
    )

  /** Counters of every link must last as long as any of them can verify: until the root expires. */
  const retainUntil = (mandate: Mandate<"task">) => chainOf(mandate)[0]!.expiresAt * 1000

  const computeCharges = (mandate: Mandate<"task">, amount: ComputeAmount): Array<CounterCharge> => {
    const charges: Array<CounterCharge> = []
    for (const m of chainOf(mandate)) {
      const t = m.constraints as TaskConstraints
      for (const r of ["llmTokens", "webRequests"] as const) {
        const l = t.computeLimit?.[r]
        const n = amount[r] ?? 0
        if (l !== undefined && n > 0) charges.push({ scope: counterScope(m), counter: computeCounter(r), amount: n, limit: l })
      }
    }
    return charges
  }

  const charge = (mandate: Mandate<"task">, charges: ReadonlyArray<CounterCharge>, cap: string | undefined) =>
    charges.length === 0
      ? Effect.void
      : store.charge(charges, retainUntil(mandate)).pipe(
        Effect.catchTag("CounterLimitReached", (e) =>
          Effect.fail(
            e.counter.startsWith("action:")
              ? violation("ACTION_LIMIT_EXCEEDED", `${cap} would exceed its limit of ${e.limit} (mandate ${e.scope})`)
              : violation("COMPUTE_LIMIT_EXCEEDED", `${e.counter.slice("compute:".length)} would exceed its limit of ${e.limit} (mandate ${e.scope})`)
          )
        )
      )

  return {
    check: (token, action) =>
      Effect.gen(function* () {
        const mandate = yield* verify(token, action.presenter)
        // The verified chain narrows link by link, so the leaf's lists decide; only counters need every link.
        const c: TaskConstraints = mandate.constraints
        const cap = action.capability
        if ((c.blocked ?? []).includes(cap)) return yield* Effect.fail(violation("CAPABILITY_NOT_PERMITTED", `${cap} is blocked`))
        if (!c.allowed.includes(cap)) return yield* Effect.fail(violation("CAPABILITY_NOT_PERMITTED", `${cap} is not allowed`))
        if (c.reversibleOnly === true && !action.reversible) {
          return yield* Effect.fail(violation("REVERSIBILITY_VIOLATION", `${cap} is irreversible and the mandate allows reversible actions only`))
        }
        if (c.sandbox === true && !action.sandboxed) {
          return yield* Effect.fail(violation("SANDBOX_REQUIRED", "the mandate requires a sandboxed runtime"))
        }
        const granted = c.dataAccess ?? []
        for (const scope of action.dataScopes ?? []) {
          if (!granted.includes(scope)) return yield* Effect.fail(violation("DATA_ACCESS_VIOLATION", `data scope ${JSON.stringify(scope)} is not granted`))
        }
        if ((c.humanGates ?? []).includes(cap) && action.humanApproved !== true) {
          return yield* Effect.fail(violation("HUMAN_GATE_REQUIRED", `${cap} needs a human approval`))
        }
        if (!isCount(action.llmTokens) || !isCount(action.webRequests)) {
          return yield* Effect.fail(violation("COMPUTE_LIMIT_EXCEEDED", "llmTokens and webRequests must be non-negative integers"))
        }
        const charges: Array<CounterCharge> = []
        for (const m of chainOf(mandate)) {
          const t = m.constraints as TaskConstraints
          // Own properties only: a capability named "toString" must not read Object.prototype.
          const limit = t.actionLimits !== undefined && Object.hasOwn(t.actionLimits, cap) ? t.actionLimits[cap] : undefined
          if (limit !== undefined) charges.push({ scope: counterScope(m), counter: actionCounter(cap), amount: 1, limit })
        }
        charges.push(...computeCharges(mandate, action))
        yield* charge(mandate, charges, cap)
        return mandate
      }),
    reserveCompute: (token, presenter, amount) =>
      Effect.gen(function* () {
        const mandate = yield* verify(token, presenter)
        if (!isCount(amount.llmTokens) || !isCount(amount.webRequests)) {
          return yield* Effect.fail(violation("COMPUTE_LIMIT_EXCEEDED", "llmTokens and webRequests must be non-negative integers"))
        }
        yield* charge(mandate, computeCharges(mandate, amount), undefined)
        return mandate
      }),
    settleCompute: (mandate, reserved, spent) =>
      Effect.suspend(() => {
        const adjustments: Array<CounterAdjustment> = []
        for (const m of chainOf(mandate)) {
          const t = m.constraints as TaskConstraints
          for (const r of ["llmTokens", "webRequests"] as const) {
            const l = t.computeLimit?.[r]
            const delta = Math.max(0, Math.ceil(spent[r] ?? 0)) - (reserved[r] ?? 0)
            if (l !== undefined && delta !== 0) adjustments.push({ scope: counterScope(m), counter: computeCounter(r), delta, limit: l })
          }
        }
        return adjustments.length === 0 ? Effect.void : store.adjust(adjustments, retainUntil(mandate))
      })
  }
})

/** The task guard service. */
export class TaskGuard extends Context.Tag("agent-mesh/TaskGuard")<TaskGuard, TaskGuardApi>() {
  /** The guard on the `KeyResolver` and `TaskStore` in context. */
  static readonly layer: Layer.Layer<TaskGuard, never, Keys | KeyResolver | TaskStore> = Layer.effect(TaskGuard, make)
  /** Checks an action with the guard in context. */
  static readonly check = (
    token: string,
    action: TaskAction
  ): Effect.Effect<Mandate<"task">, TaskConstraintViolation | TaskStoreUnavailable, TaskGuard> =>
    Effect.flatMap(TaskGuard, (g) => g.check(token, action))
}

/** The guard on the `KeyResolver` and `TaskStore` in context. */
export const layer = TaskGuard.layer
