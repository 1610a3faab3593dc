/**
 * A saga: steps run in order, each on one agent under a payment mandate attenuated from the caller's spending
 * mandate, each with an optional compensating capability on the same agent. This module holds what a saga is (the
 * input as accepted, the result and the progress events) and the checks made before anything runs, so a refused saga
 * has touched neither the ledger nor any agent: duplicate step names, an agent the hub does not know, a step budget
 * above the mandate's limit, a mandate that does not verify (expired, revoked, wrong kind, not granted to the runner).
 *
 * The scheduler (`SagaScheduler`) runs what this module accepted; `SagaApi` maps these errors to HTTP.
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { didHash, normalizeDid } from "../core/Did.js"
import type { KeyResolverApi } from "../core/KeyResolver.js"
import type { Keys } from "../core/Keys.js"
import { type Mandate, verifyMandate } from "../core/Mandate.js"
import { type Micros, parseUsd } from "../core/Money.js"

/** At most this many steps in one saga. */
export const MAX_STEPS = 32

const StepName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100), Schema.pattern(/^[A-Za-z0-9._-]+$/))
const Capability = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const Params = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * What undoes a step: a capability on the same agent. It takes no params of the submitter's choosing: the call carries
 * the forward step's commit token and result, so the agent undoes what it did, not what a submitter names.
 */
export const Compensation = Schema.Struct({ capability: Capability }).annotations({ parseOptions: { onExcessProperty: "error" } })
/** What undoes a step. */
export type Compensation = typeof Compensation.Type

/** One step as submitted: the agent by `agentDid` or `didHash`, the capability, its params and the step's budget. */
export const SagaStep = Schema.Struct({
  name: StepName,
  agentDid: Schema.optional(Schema.String),
  didHash: Schema.optional(Schema.String),
  capability: Capability,
  params: Schema.optional(Params),
  // USD as a JSON number or the decimal string Money reads (docs/protocol.md §9.2); planning reads either exactly.
  budgetUsd: Schema.Union(Schema.Number, Schema.String),
  compensation: Schema.optional(Compensation)
})
/** One step as submitted. */
export type SagaStep = typeof SagaStep.Type

/** A saga as submitted: the caller's spending mandate (granted to the runner) and the steps, in order. */
export const SagaInput = Schema.Struct({
  mandate: Schema.String,
  steps: Schema.Array(SagaStep).pipe(Schema.minItems(1), Schema.maxItems(MAX_STEPS))
})
/** A saga as submitted. */
export type SagaInput = typeof SagaInput.Type

/** A step as accepted: its agent resolved, its budget in micro-dollars. */
export interface PlannedStep {
  readonly name: string
  readonly agentDid: string
  readonly didHash: string
  readonly endpointUrl: string
  readonly capability: string
  readonly params: Readonly<Record<string, unknown>>
  readonly budgetMicros: number
  readonly compensation: Compensation | undefined
}

/** A saga as accepted: what the workflow runs, stored as is. */
export interface SagaPlan {
  readonly mandate: string
  readonly grantor: string
  readonly steps: ReadonlyArray<PlannedStep>
}

/** Where a saga is. */
export const SagaStatus = Schema.Literal("running", "committed", "compensated", "compensation_failed")
/** Where a saga is. */
export type SagaStatus = typeof SagaStatus.Type

/** Where a step is. */
export const StepStatus = Schema.Literal("pending", "committed", "failed", "compensated", "compensation_failed")
/** Where a step is. */
export type StepStatus = typeof StepStatus.Type

/** A step in a saga's result; `commitToken` is the agent's signed receipt, for billing reconciliation. */
export const StepResult = Schema.Struct({
  name: Schema.String,
  agentDid: Schema.String,
  capability: Schema.String,
  status: StepStatus,
  budgetUsd: Schema.String,
  usedUsd: Schema.NullOr(Schema.String),
  allocationId: Schema.NullOr(Schema.String),
  commitToken: Schema.NullOr(Schema.String),
  result: Schema.NullOr(Schema.String),
  errorCode: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String)
})
/** A step in a saga's result. */
export type StepResult = typeof StepResult.Type

/** A saga's state: `failedStep` names the step that failed (or, for `compensation_failed`, whose compensation did). */
export const SagaResult = Schema.Struct({
  sagaId: Schema.String,
  status: SagaStatus,
  poolId: Schema.String,
  failedStep: Schema.NullOr(Schema.String),
  errorCode: Schema.NullOr(Schema.String),
  steps: Schema.Array(StepResult)
})
/** A saga's state. */
export type SagaResult = typeof SagaResult.Type

/** A saga as `GET /v1/sagas` lists it: its state without its steps (`GET /v1/sagas/:sagaId` has them). */
export const SagaSummary = Schema.Struct({
  sagaId: Schema.String,
  status: SagaStatus,
  poolId: Schema.String,
  /** How many steps it has. */
  steps: Schema.Number,
  failedStep: Schema.NullOr(Schema.String),
  errorCode: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})
/** A saga as `GET /v1/sagas` lists it. */
export type SagaSummary = typeof SagaSummary.Type

/** One page of a caller's sagas, newest first; `nextCursor` asks for the next page, null on the last. */
export const SagaPage = Schema.Struct({ items: Schema.Array(SagaSummary), nextCursor: Schema.NullOr(Schema.String) })
/** One page of a caller's sagas. */
export type SagaPage = typeof SagaPage.Type

/** Most sagas one page lists, and how many when not told. */
export const MAX_SAGA_PAGE = 200
/** Most sagas one page lists, and how many when not told. */
export const DEFAULT_SAGA_PAGE = 50

/** What a progress event reports. */
export const SagaEventType = Schema.Literal(
  "saga_started",
  "step_started",
  "step_committed",
  "step_failed",
  "step_compensating",
  "step_compensated",
  "step_compensation_failed",
  "saga_committed",
  "saga_compensated",
  "saga_compensation_failed"
)
/** What a progress event reports. */
export type SagaEventType = typeof SagaEventType.Type

/** One progress event; `seq` counts from 1 per saga (the SSE event id). */
export const SagaEvent = Schema.Struct({
  sagaId: Schema.String,
  seq: Schema.Number,
  type: SagaEventType,
  step: Schema.NullOr(Schema.String),
  data: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  at: Schema.String
})
/** One progress event. */
export type SagaEvent = typeof SagaEvent.Type

/** The event types that end a saga. */
export const isFinal = (type: SagaEventType): boolean =>
  type === "saga_committed" || type === "saga_compensated" || type === "saga_compensation_failed"

/** The saga input is malformed: no steps, two steps with one name, a step naming no agent (`INVALID_REQUEST`). */
export class SagaInvalid extends Data.TaggedError("SagaInvalid")<{ readonly code: "INVALID_REQUEST"; readonly message: string }> {}

/** A step names an agent the hub does not know (`AGENT_NOT_FOUND`). */
export class SagaAgentNotFound extends Data.TaggedError("SagaAgentNotFound")<{
  readonly code: "AGENT_NOT_FOUND"
  readonly message: string
  readonly step: string
}> {}

/** A step's budget is not a valid amount or is above the mandate's spend limit (`LIMIT_EXCEEDED`, `INVALID_AMOUNT`). */
export class SagaBudgetRefused extends Data.TaggedError("SagaBudgetRefused")<{
  readonly code: "LIMIT_EXCEEDED" | "INVALID_AMOUNT"
  readonly message: string
  readonly step: string
}> {}

/** The caller's mandate does not verify, is not a spending mandate, or is not granted to the runner (`MANDATE_INVALID`). */
export class SagaMandateRefused extends Data.TaggedError("SagaMandateRefused")<{
  readonly code: "MANDATE_INVALID"
  readonly reason: string
  readonly message: string
}> {}

/** The request is not signed by the mandate's grantor: only the grantor starts a saga on its mandate (`MANDATE_GRANTOR_MISMATCH`). */
export class SagaGrantorMismatch extends Data.TaggedError("SagaGrantorMismatch")<{ readonly code: "MANDATE_GRANTOR_MISMATCH"; readonly message: string }> {}

/**
 * Too many sagas running: the caller's own bound (`RATE_LIMITED`) or the scheduler's (`OVERLOADED`); come back after
 * `retryAfterSeconds`.
 */
export class SagaBusy extends Data.TaggedError("SagaBusy")<{
  readonly code: "RATE_LIMITED" | "OVERLOADED"
  readonly message: string
  readonly retryAfterSeconds: number
}> {}

/** No saga under that id, or not the caller's (`NOT_FOUND`). */
export class SagaNotFound extends Data.TaggedError("SagaNotFound")<{ readonly code: "NOT_FOUND"; readonly message: string }> {}

/** The saga store or a resolver could not answer (`STORE_UNAVAILABLE`; retry). */
export class SagaUnavailable extends Data.TaggedError("SagaUnavailable")<{ readonly code: "STORE_UNAVAILABLE"; readonly message: string }> {}

/**
 * The hub's runner cannot sign for sagas others can verify: its DID's key does not resolve on the hub (or was
 * revoked), so every step would fail (`SAGA_RUNNER_UNAVAILABLE`; the hub's operator must register the runner).
 */
export class SagaRunnerUnavailable extends Data.TaggedError("SagaRunnerUnavailable")<{ readonly code: "SAGA_RUNNER_UNAVAILABLE"; readonly message: string }> {}

/** Every refusal of a saga before it runs. */
export type SagaRefused = SagaInvalid | SagaAgentNotFound | SagaBudgetRefused | SagaMandateRefused | SagaGrantorMismatch | SagaBusy | SagaUnavailable | SagaRunnerUnavailable

/** An agent as the scheduler needs it. */
export interface AgentEntry {
  readonly did: string
  readonly didHash: string
  readonly endpointUrl: string
}

/** How the scheduler finds agents: by didHash, undefined when the hub knows none. */
export type FindAgent = (didHash: string) => Effect.Effect<AgentEntry | undefined, SagaUnavailable>

const invalid = (message: string) => new SagaInvalid({ code: "INVALID_REQUEST", message })

/** The spend limit of an intent or cart mandate, in micro-dollars. */
const limitOf = (m: Mandate): number | undefined => (m.constraints as { readonly spendLimitUsd?: number }).spendLimitUsd

/**
 * Checks a saga before it runs, in an order that reads nothing it does not need: the shape and names first, then the
 * mandate (for the runner, unexpired, not revoked, granted by the caller), then each budget against the mandate's
 * limit, then each agent. A refusal names a step by its position and repeats nothing the caller sent.
 */
export const plan = (
  input: SagaInput,
  options: { readonly caller: string; readonly runner: string; readonly resolver: KeyResolverApi; readonly findAgent: FindAgent }
): Effect.Effect<SagaPlan, SagaRefused, Keys> =>
  Effect.gen(function* () {
    const seen = new Set<string>()
    for (const [i, s] of input.steps.entries()) {
      if (seen.has(s.name)) return yield* Effect.fail(invalid(`step ${i + 1} has the name of an earlier step`))
      seen.add(s.name)
      if (s.agentDid === undefined && s.didHash === undefined) return yield* Effect.fail(invalid(`step ${i + 1} names no agent (agentDid or didHash)`))
      if (s.agentDid !== undefined && normalizeDid(s.agentDid) === undefined) return yield* Effect.fail(invalid(`step ${i + 1}: agentDid is not a DID`))
    }
    // Every step's payment mandate is signed by the runner and verified by its agent against the runner's registered
    // key: without one, the saga would fail at its first step, after its pool was opened.
    yield* options.resolver.resolve(options.runner).pipe(
      Effect.catchTags({
        KeyResolverUnavailable: (e) => Effect.fail(new SagaUnavailable({ code: "STORE_UNAVAILABLE", message: e.message })),
        KeyNotFound: () => Effect.fail(new SagaRunnerUnavailable({ code: "SAGA_RUNNER_UNAVAILABLE", message: `the hub's saga runner ${options.runner} has no key on this hub, so no step could verify its mandates; the hub's operator registers it (mesh register --identity <runner identity>)` })),
        KeyRevoked: () => Effect.fail(new SagaRunnerUnavailable({ code: "SAGA_RUNNER_UNAVAILABLE", message: `the key of the hub's saga runner ${options.runner} is revoked on this hub` }))
      })
    )
    const mandate = yield* verifyMandate(input.mandate, options.resolver, { kinds: ["intent", "cart"], expectedGrantee: options.runner }).pipe(
      Effect.mapError((e) =>
        e.reason === "RESOLVER_UNAVAILABLE"
          ? new SagaUnavailable({ code: "STORE_UNAVAILABLE", message: e.message })
          : new SagaMandateRefused({ code: "MANDATE_INVALID", reason: e.reason, message: `${e.reason}: ${e.message}` })
      )
    )
    // The mandate travels downstream (each step's payment mandate carries it in `prf`): holding it proves nothing.
    if ((normalizeDid(mandate.grantor) ?? mandate.grantor) !== (normalizeDid(options.caller) ?? options.caller)) {
      return yield* Effect.fail(new SagaGrantorMismatch({ code: "MANDATE_GRANTOR_MISMATCH", message: "a saga is started only by its mandate's grantor, signing the request" }))
    }
    const limit = limitOf(mandate)
    const limitMicros = limit === undefined ? undefined : Either.getOrUndefined(parseUsd(limit))
    const budgets: Array<Micros> = []
    for (const [i, s] of input.steps.entries()) {
      const b = parseUsd(s.budgetUsd)
      if (Either.isLeft(b)) return yield* Effect.fail(new SagaBudgetRefused({ code: "INVALID_AMOUNT", message: `step ${i + 1}: budgetUsd is not a USD amount`, step: s.name }))
      if (limitMicros !== undefined && b.right > limitMicros) {
        return yield* Effect.fail(new SagaBudgetRefused({ code: "LIMIT_EXCEEDED", message: `step ${i + 1} budgets more than the mandate's spend limit`, step: s.name }))
      }
      budgets.push(b.right)
    }
    const steps: Array<PlannedStep> = []
    for (const [i, s] of input.steps.entries()) {
      const hash = s.didHash ?? didHash(normalizeDid(s.agentDid)!)
      const agent = yield* options.findAgent(hash)
      if (agent === undefined || (s.agentDid !== undefined && agent.did !== normalizeDid(s.agentDid))) {
        return yield* Effect.fail(new SagaAgentNotFound({ code: "AGENT_NOT_FOUND", message: `step ${i + 1}: the hub knows no such agent`, step: s.name }))
      }
      steps.push({
        name: s.name,
        agentDid: agent.did,
        didHash: agent.didHash,
        endpointUrl: agent.endpointUrl,
        capability: s.capability,
        params: s.params ?? {},
        budgetMicros: budgets[i]!,
        compensation: s.compensation
      })
    }
    return { mandate: input.mandate, grantor: mandate.grantor, steps }
  })
