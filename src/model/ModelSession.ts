/**
 * A model session: model calls under one `model-budget` mandate. The mandate's `token_budget` and
 * `cost_budget_usd` are hard limits held in an atomic `ModelBudget`; every call reserves its upper bound first,
 * so concurrent calls never overrun them (BUDGET_EXHAUSTED instead). Calls go through the `ModelRouter`, which
 * picks, scores and escalates; the session adds the allocator's share, the steps and the summary.
 *
 * A step is a scoped resource: opening it reserves its share of the session's budget (the allocator decides how
 * much) and issues a real child `model-budget` mandate attenuated from the session's, signed with the session
 * holder's key, so the narrowing rules of every mandate apply and the step can be handed to another agent, which
 * verifies it and opens a session of its own from it. Calls made with the step's mandate draw on the step's budget.
 * When the step's scope closes, what it did not spend returns to the session.
 *
 * Allocators (the spec's AllocatorMode), for a step and for a call made outside any step:
 * - PROPORTIONAL (default): what is left ÷ the steps still expected (`expected_steps` less those begun);
 * - IMPORTANCE_WEIGHTED: the session's whole budget × importanceWeight ÷ totalWeight, capped by what is left;
 * - THOMPSON: the proportional share; the model within it is chosen by the learner (see `ModelRouter`).
 *
 * The mandate given is trusted as the holder's own: `make` decodes it but checks no signature. An agent handed a
 * mandate by someone else verifies it first (`verifyMandate`), as the agent server does.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { usdMicros } from "../core/Constraints.js"
import { Keys, type MalformedKey, type PrivateKeyInput } from "../core/Keys.js"
import { attenuateModelBudgetMandate, decodeUnverified, type Mandate, MandateInvalid, type MandateIssueError } from "../core/Mandate.js"
import { MandateCache } from "../core/MandateCache.js"
import type { ChatMessage, ModelError } from "../core/ModelProvider.js"
import { formatUsd, type Micros } from "../core/Money.js"
import type { PersistenceError } from "../sql/SqlFailure.js"
import { fetchStats, publishStats, type PublishResult, RegistryUnreachable } from "./LearnerRegistry.js"
import { type Amount, available, make as makeBudget, type ModelBudget, ModelBudgetExhausted } from "./ModelBudget.js"
import { ModelLearner } from "./ModelLearner.js"
import { type AllocatorMode, MIN_OUTPUT_TOKENS, ModelRouter, type RouteUsage } from "./ModelRouter.js"

/** Why a session refused a request that is not about budget. */
export const ModelSessionErrorCode = Schema.Literal("SESSION_CLOSED", "STEP_NOT_OPEN", "SIGNING_KEY_REQUIRED", "REGISTRY_NOT_CONFIGURED")
/** A `ModelSessionErrorCode` value. */
export type ModelSessionErrorCode = typeof ModelSessionErrorCode.Type

/**
 * SESSION_CLOSED: the session was closed; STEP_NOT_OPEN: a step mandate this session did not open or already
 * closed; SIGNING_KEY_REQUIRED: steps need the holder's key to sign their mandates; REGISTRY_NOT_CONFIGURED: no
 * registry URL (or, to publish, no API key).
 */
export class ModelSessionError extends Schema.TaggedError<ModelSessionError>()("ModelSessionError", {
  code: ModelSessionErrorCode,
  message: Schema.String
}) {}

/** What opening a session takes. */
export interface SessionOptions {
  /** The session's `model-budget` mandate, or its token. */
  readonly mandate: Mandate<"model-budget"> | string
  /** The mandate grantee's key, to sign step mandates; without it the session can chat but not open steps. */
  readonly privateKey?: PrivateKeyInput
  /** The grantee's current key version (default 1). */
  readonly keyVersion?: number
  /** Default PROPORTIONAL. */
  readonly allocatorMode?: AllocatorMode
  /** The hub to read (and publish) learner statistics at. */
  readonly registryUrl?: string
  /** The API key publishing needs. */
  readonly registryApiKey?: string | Redacted.Redacted
  readonly temperature?: number
}

/** What a call answers. */
export interface ChatReply {
  readonly content: string
  readonly modelId: string
  readonly nEscalations: number
  /** The estimator's score of the answer returned. */
  readonly quality: number
  /** Every attempt together; `costUsd` as a decimal number. */
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly costUsd: number }
}

/** An open step: its name and its mandate, to pass to `chat` or to hand on. */
export interface Step {
  readonly name: string
  readonly mandate: Mandate<"model-budget">
  readonly tokenBudget: number
  readonly costBudgetUsd: number
}

/** The session's usage (the spec's tracker summary). */
export interface Summary {
  readonly totalTokens: number
  /** What is left to reserve (open steps hold their budgets until they close). */
  readonly tokensRemaining: number
  readonly totalCostUsd: number
  readonly costRemaining: number
  /** Provider calls made, escalations included. */
  readonly nCalls: number
  readonly modelsUsed: ReadonlyArray<string>
}

/** A session. */
export interface ModelSession {
  readonly mandate: Mandate<"model-budget">
  readonly allocatorMode: AllocatorMode
  /** Replaces the learner's priors with the hub's aggregated counts; answers how many pairs it got. */
  readonly warmFromRegistry: Effect.Effect<number, ModelSessionError | RegistryUnreachable | PersistenceError>
  /** Publishes what this session's learner observed to the hub under the API key. */
  readonly publishToRegistry: Effect.Effect<PublishResult, ModelSessionError | RegistryUnreachable>
  /** One routed call; with a step's mandate it draws on that step's budget. */
  readonly chat: (
    prompt: string | ReadonlyArray<ChatMessage>,
    stepMandate?: Mandate | string
  ) => Effect.Effect<ChatReply, ModelError | ModelBudgetExhausted | ModelSessionError>
  /** A step as a scoped resource: its budget returns to the session when the scope closes. */
  readonly step: (
    name: string,
    importanceWeight?: number,
    totalWeight?: number,
    options?: { readonly granteeDid?: string; readonly ttlSeconds?: number }
  ) => Effect.Effect<Step, ModelBudgetExhausted | ModelSessionError | MandateIssueError | MalformedKey, Scope.Scope>
  /** Refuses every later call and step. */
  readonly close: Effect.Effect<void>
  readonly summary: Effect.Effect<Summary>
}

interface OpenStep {
  readonly budget: ModelBudget
  readonly limit: Amount
}

interface Usage {
  tokens: number
  micros: number
  nCalls: number
  readonly models: Array<string>
}

/** The decoded mandate, or MALFORMED / KIND_MISMATCH. */
const sessionMandate = (m: Mandate<"model-budget"> | string): Either.Either<Mandate<"model-budget">, MandateInvalid> => {
  const decoded = typeof m === "string" ? decodeUnverified(m) : Either.right<Mandate>(m)
  return Either.flatMap(decoded, (d) =>
    d.kind === "model-budget"
      ? Either.right(d as Mandate<"model-budget">)
      : Either.left(new MandateInvalid({ code: "MANDATE_INVALID", reason: "KIND_MISMATCH", message: `a ${d.kind} mandate where model-budget was expected` }))
  )
}

/** Opens a session on the `ModelRouter` and `ModelLearner` in context; `Keys` signs step mandates. */
export const make = (options: SessionOptions): Effect.Effect<ModelSession, MandateInvalid, ModelRouter | ModelLearner | Keys> =>
  Effect.gen(function* () {
    const mandate = yield* sessionMandate(options.mandate)
    const router = yield* ModelRouter
    const learner = yield* ModelLearner
    const keys = yield* Keys
    const httpClient = yield* Effect.serviceOption(HttpClient.HttpClient)
    // A step's token comes back with every call made under it: parsed once, through the runtime's cache.
    const mandateCache = Option.getOrUndefined(yield* Effect.serviceOption(MandateCache))
    const mode: AllocatorMode = options.allocatorMode ?? "PROPORTIONAL"
    const cns = mandate.constraints
    const limit: Amount = { tokens: cns.token_budget, micros: usdMicros(cns.cost_budget_usd) }
    const expectedSteps = Math.max(1, cns.expected_steps)
    const budget = yield* makeBudget(limit)
    const steps = new Map<string, OpenStep>()
    // Counters changed only by synchronous code inside this session's effects (atomic on one JavaScript thread),
    // so a call pays no effect of its own for its bookkeeping.
    let begun = 0
    let closed = false
    const usage: Usage = { tokens: 0, micros: 0, nCalls: 0, models: [] }

    const refuse = (code: ModelSessionErrorCode, message: string) => Effect.fail(new ModelSessionError({ code, message }))
    const closedError = () => new ModelSessionError({ code: "SESSION_CLOSED", message: "the session is closed" })
    const ifOpen = Effect.suspend(() => (closed ? Effect.fail(closedError()) : Effect.void))

    /** The allocator's share of `left` for the next step or call, `begunBefore` steps having begun. */
    const share = (left: Amount, begunBefore: number, importanceWeight: number, totalWeight: number): Amount => {
      if (mode === "IMPORTANCE_WEIGHTED") {
        const w = totalWeight > 0 ? Math.min(1, Math.max(0, importanceWeight / totalWeight)) : 0
        return { tokens: Math.min(left.tokens, Math.floor(limit.tokens * w)), micros: Math.min(left.micros, Math.floor(limit.micros * w)) }
      }
      const remaining = Math.max(1, expectedSteps - begunBefore)
      return { tokens: Math.floor(left.tokens / remaining), micros: Math.floor(left.micros / remaining) }
    }

    const withHttp = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>): Effect.Effect<A, E> =>
      Option.match(httpClient, {
        onNone: () => Effect.provide(effect, FetchHttpClient.layer),
        onSome: (client) => Effect.provideService(effect, HttpClient.HttpClient, client)
      })

    const messagesOf = (prompt: string | ReadonlyArray<ChatMessage>): ReadonlyArray<ChatMessage> =>
      typeof prompt === "string" ? [{ role: "user", content: prompt }] : prompt

    const record = (u: RouteUsage, attempts: ReadonlyArray<{ readonly modelId: string }>) => {
      usage.tokens += u.inputTokens + u.outputTokens
      usage.micros += u.costMicros
      usage.nCalls += attempts.length
      for (const a of attempts) if (!usage.models.includes(a.modelId)) usage.models.push(a.modelId)
    }

    const chat: ModelSession["chat"] = (prompt, stepMandate) =>
      Effect.suspend((): Effect.Effect<ChatReply, ModelError | ModelBudgetExhausted | ModelSessionError> => {
        if (closed) return Effect.fail(closedError())
        let target: ModelBudget = budget
        let callShare: Amount
        if (stepMandate !== undefined) {
          const jti = typeof stepMandate === "string" ? Either.getOrUndefined(Either.map(decodeUnverified(stepMandate, mandateCache), (m) => m.jti)) : stepMandate.jti
          const step = jti === undefined ? undefined : steps.get(jti)
          if (step === undefined) return refuse("STEP_NOT_OPEN", "this step mandate is not open in this session")
          target = step.budget
          callShare = available(step.budget.unsafeState())
        } else {
          callShare = share(available(budget.unsafeState()), begun++, 1, expectedSteps)
        }
        return Effect.map(
          router.route({
            messages: messagesOf(prompt),
            taskType: cns.task_type,
            qualityThreshold: cns.quality_threshold,
            budget: target,
            share: callShare,
            mode,
            ...(options.temperature === undefined ? {} : { temperature: options.temperature })
          }),
          (result): ChatReply => {
            record(result.usage, result.attempts)
            return {
              content: result.content,
              modelId: result.modelId,
              nEscalations: result.nEscalations,
              quality: result.quality,
              usage: {
                inputTokens: result.usage.inputTokens,
                outputTokens: result.usage.outputTokens,
                costUsd: formatUsd(result.usage.costMicros as Micros)
              }
            }
          }
        )
      })

    const step: ModelSession["step"] = (name, importanceWeight = 1, totalWeight = expectedSteps, stepOptions = {}) =>
      Effect.gen(function* () {
        yield* ifOpen
        const key = options.privateKey
        if (key === undefined) return yield* refuse("SIGNING_KEY_REQUIRED", "opening a step signs a mandate: give the session the holder's privateKey")
        const n = begun++
        const acquire = Effect.gen(function* () {
          const reserved = yield* budget.tryReserve((left) => {
            const s = share(left, n, importanceWeight, totalWeight)
            return s.tokens < MIN_OUTPUT_TOKENS || s.micros < 0 ? undefined : [s, s] as const
          })
          if (Option.isNone(reserved)) {
            const left = available(yield* budget.state)
            return yield* Effect.fail(
              new ModelBudgetExhausted({ code: "BUDGET_EXHAUSTED", message: `step ${name}: ${left.tokens} tokens and ${left.micros} micro-USD are left, too little for a step` })
            )
          }
          const [reservation, amount] = reserved.value
          const child = yield* attenuateModelBudgetMandate({
            parent: mandate,
            granteeDid: stepOptions.granteeDid ?? mandate.grantee,
            grantorPrivateKey: key,
            ...(stepOptions.ttlSeconds === undefined ? {} : { ttlSeconds: stepOptions.ttlSeconds }),
            ...(options.keyVersion === undefined ? {} : { keyVersion: options.keyVersion }),
            constraints: {
              token_budget: amount.tokens,
              cost_budget_usd: formatUsd(amount.micros as Micros),
              quality_threshold: cns.quality_threshold,
              task_type: cns.task_type,
              expected_steps: Math.min(1, cns.expected_steps)
            }
          }).pipe(Effect.provideService(Keys, keys), Effect.onError(() => reservation.release))
          const stepBudget = yield* makeBudget(amount)
          steps.set(child.jti, { budget: stepBudget, limit: amount })
          return { child, reservation, stepBudget, amount }
        })
        const { amount, child } = yield* Effect.acquireRelease(acquire, ({ child, reservation, stepBudget }) =>
          Effect.flatMap(stepBudget.state, (s) => {
            steps.delete(child.jti)
            // What calls still in flight hold counts as spent: the step is gone, so it cannot flow back later.
            return reservation.settle({ tokens: s.spent.tokens + s.held.tokens, micros: s.spent.micros + s.held.micros })
          }))
        return { name, mandate: child, tokenBudget: amount.tokens, costBudgetUsd: formatUsd(amount.micros as Micros) }
      })

    const registryUrl = options.registryUrl
    return {
      mandate,
      allocatorMode: mode,
      warmFromRegistry:
        registryUrl === undefined
          ? refuse("REGISTRY_NOT_CONFIGURED", "the session has no registryUrl")
          : Effect.flatMap(withHttp(fetchStats(registryUrl)), (stats) => Effect.as(learner.setPriors(stats.stats), stats.stats.length)),
      publishToRegistry:
        registryUrl === undefined || options.registryApiKey === undefined
          ? refuse("REGISTRY_NOT_CONFIGURED", "publishing needs a registryUrl and a registryApiKey")
          : Effect.flatMap(learner.observed, (stats) => withHttp(publishStats(registryUrl, options.registryApiKey!, { stats }))),
      chat,
      step,
      close: Effect.sync(() => {
        closed = true
      }),
      summary: Effect.sync(() => {
        const left = available(budget.unsafeState())
        return {
          totalTokens: usage.tokens,
          tokensRemaining: left.tokens,
          totalCostUsd: formatUsd(usage.micros as Micros),
          costRemaining: formatUsd(Math.max(0, left.micros) as Micros),
          nCalls: usage.nCalls,
          modelsUsed: [...usage.models]
        }
      })
    }
  })
