/**
 * The model router: for one request it picks a model of the catalogue, calls it through its provider under an
 * atomic reservation of the budget, scores the answer with the `QualityEstimator`, and escalates tier by tier
 * while the score is below the quality threshold and the budget still fits the next tier. It answers with the
 * best answer it got (the last one when scores tie), the model that wrote it, the number of escalations and the
 * usage of every attempt together.
 *
 * First pick, by allocator (docs/models.md):
 * - PROPORTIONAL and IMPORTANCE_WEIGHTED: the strongest model whose bound fits the call's share of the budget (the
 *   share is what these allocators decide; the router spends it well), else the cheapest;
 * - THOMPSON: for each usable model a draw θ from the learner's Beta belief that it succeeds; the pick is the model
 *   fitting the share whose expected cost of a good answer, escalating on a miss as the route does
 *   (`E(m) = cost(m) + (1 − θ(m)) × E(next tier)`), is lowest, so a cheap model is tried where it is believed to
 *   succeed and skipped where it is believed to fail.
 * Every attempt is recorded in the learner (success: score ≥ threshold and cost ≤ share), whatever the allocator.
 *
 * Why not `ExecutionPlan`: Effect's plan moves to the next step when the effect *fails*, and gives neither the
 * step it succeeded on nor the earlier results. Escalation here moves on a *successful* answer that scored low,
 * must check the budget before each step (a step that does not fit ends the climb, it is not an error), and must
 * return the best answer of all steps with the count of steps taken. Bending that into a plan would turn answers
 * into errors and back; the loop below is short and says what it does.
 *
 * Providers: a catalogue names a provider per model; `ModelProviders` maps provider names to providers. Its
 * `layerFromModelProvider` serves every name with the one `ModelProvider` in context (the usual single-vendor case).
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Random from "effect/Random"
import type { TaskType } from "../core/Constraints.js"
import {
  type ChatMessage,
  type ChatRequest,
  type ChatResult,
  makeScripted,
  ModelError,
  ModelProvider,
  type ModelProviderApi,
  type Script
} from "../core/ModelProvider.js"
import { costMicros, type ModelCatalogue, type ModelSpec } from "./ModelCatalogue.js"
import { type Amount, available, type ModelBudget, ModelBudgetExhausted, promptTokenBound, type Reservation } from "./ModelBudget.js"
import { layerMemory as learnerMemory, ModelLearner, type ModelLearnerApi, seededUniform, splitMix32 } from "./ModelLearner.js"
import { layerScripted as qualityScripted, QualityEstimator, type QualityEstimatorApi, type QualityInput } from "./QualityEstimator.js"
import { traced } from "../http/Tracing.js"

/** How a session splits its budget over steps (the spec's AllocatorMode). */
export const ALLOCATOR_MODES = ["PROPORTIONAL", "IMPORTANCE_WEIGHTED", "THOMPSON"] as const
/** An allocator mode. */
export type AllocatorMode = (typeof ALLOCATOR_MODES)[number]

/** Fewest answer tokens worth asking for: a reservation that cannot hold this many does not fit. */
export const MIN_OUTPUT_TOKENS = 16

/** The providers a router calls, by the provider names of its catalogue. */
export interface ModelProvidersApi {
  readonly get: (provider: string) => ModelProviderApi | undefined
}

/** The `ModelProviders` service. */
export class ModelProviders extends Context.Tag("agent-mesh/ModelProviders")<ModelProviders, ModelProvidersApi>() {}

/** Providers by name. */
export const providers = (byName: Readonly<Record<string, ModelProviderApi>>): ModelProvidersApi => ({
  get: (name) => (Object.hasOwn(byName, name) ? byName[name] : undefined)
})

/** `ModelProviders` from a record of providers by name. */
export const layerProviders = (byName: Readonly<Record<string, ModelProviderApi>>): Layer.Layer<ModelProviders> =>
  Layer.succeed(ModelProviders, providers(byName))

/** `ModelProviders` serving every provider name with the `ModelProvider` in context. */
export const layerFromModelProvider: Layer.Layer<ModelProviders, never, ModelProvider> = Layer.effect(
  ModelProviders,
  Effect.map(ModelProvider, (provider) => ({ get: () => provider }))
)

/** One request to route; `E` is what a caller's own `call` may fail with besides the provider's errors. */
export interface RouteRequest<E = never> {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly taskType: TaskType
  readonly qualityThreshold: number
  /** The hard budget every attempt reserves from. */
  readonly budget: ModelBudget
  /** The allocator's share for this call: guides the first pick and defines a success for the learner. */
  readonly share: Amount
  readonly mode: AllocatorMode
  readonly temperature?: number
  /** Caps every attempt's answer (`maxTokens`) below the model's own bound, so the reservation is no larger. */
  readonly maxOutputTokens?: number
  /**
   * How an attempt asks its provider; default `provider.chat`. A caller wraps it to account the call elsewhere
   * too (the agent server charges it to a task mandate's compute limit), failing with `E` to refuse it.
   */
  readonly call?: (provider: ModelProviderApi, request: ChatRequest) => Effect.Effect<ChatResult, ModelError | E>
}

/** One attempt of a routed request. */
export interface Attempt {
  readonly modelId: string
  readonly quality: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costMicros: number
}

/** Usage of a routed request, all attempts together. */
export interface RouteUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costMicros: number
}

/** What a routed request answers. */
export interface RouteResult {
  readonly content: string
  readonly modelId: string
  readonly nEscalations: number
  readonly quality: number
  readonly usage: RouteUsage
  readonly attempts: ReadonlyArray<Attempt>
}

/** The operations of a router. */
export interface ModelRouterApi {
  readonly catalogue: ModelCatalogue
  /** Routes one request: pick, call, score, escalate. */
  readonly route: <E = never>(request: RouteRequest<E>) => Effect.Effect<RouteResult, ModelError | ModelBudgetExhausted | E>
  /** The provider serving a model of the catalogue, when there is one. */
  readonly providerOf: (model: ModelSpec) => ModelProviderApi | undefined
  /** The first pick alone (no call), for inspection and measurement. */
  readonly choose: (request: Omit<RouteRequest, "budget">) => Effect.Effect<ModelSpec, ModelBudgetExhausted>
}

/** The `ModelRouter` service. */
export class ModelRouter extends Context.Tag("agent-mesh/ModelRouter")<ModelRouter, ModelRouterApi>() {}

const clamp01 = (x: number): number => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0)

/** Most answer tokens model `m` may be asked for with `promptBound` prompt tokens and `left` budget; < MIN when none. */
const outputFitting = (m: ModelSpec, promptBound: number, left: Amount): number => {
  let out = Math.min(m.maxOutputTokens, m.contextWindow - promptBound, left.tokens - promptBound)
  const promptMicros = promptBound * m.inputMicrosPerMTok
  if (m.outputMicrosPerMTok > 0) out = Math.min(out, Math.floor((left.micros * 1_000_000 - promptMicros) / m.outputMicrosPerMTok))
  else if (promptMicros > left.micros * 1_000_000) out = -1
  return out
}

/** The router's parts. */
export interface RouterParts {
  readonly catalogue: ModelCatalogue
  readonly providers: ModelProvidersApi
  readonly quality: QualityEstimatorApi
  readonly learner: ModelLearnerApi
  /** Seeds the Thompson draws (one draw, on the first choice); default: the `Random` of the calling fiber. */
  readonly random?: Random.Random
}

/** A router over its parts. */
export const fromParts = (parts: RouterParts): ModelRouterApi => {
  const { catalogue, learner, quality } = parts
  const models = catalogue.models

  // Seeded once, on the first THOMPSON choice, from `parts.random` or the calling fiber's `Random`.
  let uniform: (() => number) | undefined
  const seed = parts.random === undefined ? seededUniform : Effect.map(parts.random.nextInt, splitMix32)
  const uniformSource: Effect.Effect<() => number> = Effect.suspend(() =>
    uniform !== undefined ? Effect.succeed(uniform) : Effect.map(seed, (u) => (uniform = u))
  )

  const exhausted = (message: string) => new ModelBudgetExhausted({ code: "BUDGET_EXHAUSTED", message })

  // The pick runs on every call: plain loops, no closures made per call.
  const pickIds: Array<string> = []
  const pickModels: Array<ModelSpec> = []
  const pickFits: Array<boolean> = []
  const expected: Array<number> = []

  /** The first pick, given a uniform source for THOMPSON; the error when no model holds the prompt. */
  const pick = (request: Omit<RouteRequest, "budget">, promptBound: number, uniform: () => number): ModelSpec | ModelBudgetExhausted => {
    let cheapestUsable: ModelSpec | undefined
    let strongestFitting: ModelSpec | undefined
    for (const m of models) {
      if (m.contextWindow - promptBound < MIN_OUTPUT_TOKENS) continue
      cheapestUsable ??= m
      if (outputFitting(m, promptBound, request.share) >= MIN_OUTPUT_TOKENS) strongestFitting = m
    }
    if (cheapestUsable === undefined) return exhausted(`a prompt of up to ${promptBound} tokens fits no model's context window`)
    if (request.mode !== "THOMPSON") return strongestFitting ?? cheapestUsable
    // One draw per usable model; the expected cost of a good answer starting at each, escalating on a miss as the
    // route does, computed from the strongest down; the cheapest start that fits the share wins.
    pickIds.length = 0
    pickModels.length = 0
    pickFits.length = 0
    for (const m of models) {
      if (m.contextWindow - promptBound < MIN_OUTPUT_TOKENS) continue
      pickIds.push(m.id)
      pickModels.push(m)
      pickFits.push(outputFitting(m, promptBound, request.share) >= MIN_OUTPUT_TOKENS)
    }
    const thetas = learner.sample(pickIds, request.taskType, uniform)
    const shareOut = request.share.tokens - promptBound
    const n = pickModels.length
    expected.length = n
    let best: ModelSpec | undefined
    let bestCost = Infinity
    let fallback = pickModels[0]!
    let fallbackCost = Infinity
    for (let i = n - 1; i >= 0; i--) {
      const m = pickModels[i]!
      let next = i + 1
      while (next < n && pickModels[next]!.tier <= m.tier) next++
      const own = costMicros(m, promptBound, Math.max(MIN_OUTPUT_TOKENS, Math.min(m.maxOutputTokens, shareOut)))
      const e = own + (next < n ? (1 - thetas[i]!) * expected[next]! : 0)
      expected[i] = e
      if (e < fallbackCost) {
        fallback = m
        fallbackCost = e
      }
      if (e < bestCost && pickFits[i]!) {
        best = m
        bestCost = e
      }
    }
    return best ?? fallback
  }

  const noUniform = (): number => {
    throw new Error("a THOMPSON pick before the draws were seeded")
  }

  /** `pick` as an effect, seeding the draws first when a THOMPSON pick needs them and they are not yet seeded. */
  const choose = (request: Omit<RouteRequest, "budget">, promptBound: number): Effect.Effect<ModelSpec, ModelBudgetExhausted> => {
    const done = (m: ModelSpec | ModelBudgetExhausted) => (m instanceof ModelBudgetExhausted ? Effect.fail(m) : Effect.succeed(m))
    if (request.mode !== "THOMPSON") return done(pick(request, promptBound, noUniform))
    if (uniform !== undefined) return done(pick(request, promptBound, uniform))
    return Effect.flatMap(uniformSource, (u) => done(pick(request, promptBound, u)))
  }

  const nextTier = (m: ModelSpec, promptBound: number): ModelSpec | undefined => {
    for (const n of models) if (n.tier > m.tier && n.contextWindow - promptBound >= MIN_OUTPUT_TOKENS) return n
    return undefined
  }

  /** Reserves for `m` within what is left; undefined when its bound with MIN_OUTPUT_TOKENS does not fit. */
  const reserveFor = (request: RouteRequest, m: ModelSpec, promptBound: number) =>
    request.budget.unsafeTryReserve((left) => {
      const fitting = outputFitting(m, promptBound, left)
      const out = request.maxOutputTokens === undefined ? fitting : Math.min(fitting, request.maxOutputTokens)
      return out < MIN_OUTPUT_TOKENS ? undefined : [{ tokens: promptBound + out, micros: costMicros(m, promptBound, out) }, out] as const
    })

  /** One attempt on `m` under `reservation`: call, settle, score, record in the learner. */
  const attempt = (
    request: RouteRequest,
    m: ModelSpec,
    [reservation, maxTokens]: readonly [Reservation, number]
  ): Effect.Effect<readonly [ChatResult, Attempt], ModelError> => {
    const provider = parts.providers.get(m.provider)
    if (provider === undefined) {
      reservation.unsafeSettle({ tokens: 0, micros: 0 })
      return Effect.fail(new ModelError({ code: "PROVIDER_REJECTED", message: `no provider named ${JSON.stringify(m.provider)} for model ${m.id}` }))
    }
    const chatRequest: ChatRequest = request.temperature === undefined
      ? { model: m.id, messages: request.messages, maxTokens }
      : { model: m.id, messages: request.messages, maxTokens, temperature: request.temperature }
    return Effect.flatMap(
      Effect.onError(
        traced("model.chat", { kind: "client", attributes: { "gen_ai.request.model": m.id, "mesh.model.provider": m.provider, "mesh.model.tier": m.tier } })(
          request.call === undefined ? provider.chat(chatRequest) : request.call(provider, chatRequest)
        ),
        () => reservation.release
      ),
      (result) => {
        const used = result.usage.inputTokens + result.usage.outputTokens
        const micros = costMicros(m, result.usage.inputTokens, result.usage.outputTokens)
        reservation.unsafeSettle({ tokens: used, micros })
        const over = used > reservation.amount.tokens || micros > reservation.amount.micros
        const input: QualityInput = {
          messages: request.messages,
          answer: result.text,
          finishReason: result.finishReason,
          modelId: m.id,
          taskType: request.taskType
        }
        return Effect.flatMap(quality.score(input), (score) => {
          const a: Attempt = {
            modelId: m.id,
            quality: clamp01(score),
            inputTokens: result.usage.inputTokens,
            outputTokens: result.usage.outputTokens,
            costMicros: micros
          }
          const success = a.quality >= request.qualityThreshold && micros <= request.share.micros
          const learnt = Effect.catchAll(
            learner.record(m.id, request.taskType, success),
            (e) => Effect.logWarning(`the learner could not record an outcome: ${e.message}`)
          )
          const logged = over
            ? Effect.zipRight(Effect.logWarning(`${m.id} used ${used} tokens (${micros} micro-USD), more than the ${reservation.amount.tokens} reserved`), learnt)
            : learnt
          return Effect.as(logged, [result, a] as const)
        })
      }
    )
  }

  const summed = (attempts: ReadonlyArray<Attempt>): RouteUsage => {
    let inputTokens = 0
    let outputTokens = 0
    let micros = 0
    for (const a of attempts) {
      inputTokens += a.inputTokens
      outputTokens += a.outputTokens
      micros += a.costMicros
    }
    return { inputTokens, outputTokens, costMicros: micros }
  }

  /** Escalates from `current` while the last score is below the threshold and the next tier fits; then answers the best. */
  const climb = (
    request: RouteRequest,
    promptBound: number,
    current: ModelSpec,
    attempts: Array<Attempt>,
    best: readonly [ChatResult, Attempt]
  ): Effect.Effect<RouteResult, ModelError> => {
    const last = attempts[attempts.length - 1]!
    const next = last.quality < request.qualityThreshold ? nextTier(current, promptBound) : undefined
    const reserved = next === undefined ? undefined : reserveFor(request, next, promptBound)
    if (next === undefined || reserved === undefined) {
      const [result, a] = best
      return Effect.succeed({
        content: result.text,
        modelId: a.modelId,
        nEscalations: attempts.length - 1,
        quality: a.quality,
        usage: summed(attempts),
        attempts
      })
    }
    return Effect.flatMap(attempt(request, next, reserved), (got) => {
      attempts.push(got[1])
      return climb(request, promptBound, next, attempts, got[1].quality >= best[1].quality ? got : best)
    })
  }

  const start = (request: RouteRequest, promptBound: number, first: ModelSpec): Effect.Effect<RouteResult, ModelError | ModelBudgetExhausted> => {
    let current = first
    let reserved = reserveFor(request, first, promptBound)
    // When the pick does not fit what is left, fall back to cheaper models before giving up.
    for (let i = 0; reserved === undefined && i < models.length; i++) {
      const m = models[i]!
      if (m === first || m.tier > first.tier || m.contextWindow - promptBound < MIN_OUTPUT_TOKENS) continue
      reserved = reserveFor(request, m, promptBound)
      current = m
    }
    if (reserved === undefined) {
      const left = available(request.budget.unsafeState())
      return Effect.fail(exhausted(`no model fits what is left: ${left.tokens} tokens, ${left.micros} micro-USD`))
    }
    const model = current
    return Effect.flatMap(attempt(request, model, reserved), (got) => climb(request, promptBound, model, [got[1]], got))
  }

  const routeAny = (request: RouteRequest): Effect.Effect<RouteResult, ModelError | ModelBudgetExhausted> =>
    Effect.suspend(() => {
      const promptBound = promptTokenBound(request.messages)
      if (request.mode === "THOMPSON" && uniform === undefined) {
        return Effect.flatMap(choose(request, promptBound), (first) => start(request, promptBound, first))
      }
      const first = pick(request, promptBound, uniform ?? noUniform)
      return first instanceof ModelBudgetExhausted ? Effect.fail(first) : start(request, promptBound, first)
    })

  // A caller's `call` errors travel inside as if they were ModelError: they are only passed through, never inspected.
  const route = <E>(request: RouteRequest<E>) =>
    routeAny(request as unknown as RouteRequest) as Effect.Effect<RouteResult, ModelError | ModelBudgetExhausted | E>

  return {
    catalogue,
    route,
    providerOf: (m) => parts.providers.get(m.provider),
    choose: (request) => Effect.suspend(() => choose(request, promptTokenBound(request.messages)))
  }
}

/** The router over the catalogue, with `ModelProviders`, `QualityEstimator` and `ModelLearner` from context. */
export const make = (catalogue: ModelCatalogue): Effect.Effect<ModelRouterApi, never, ModelProviders | QualityEstimator | ModelLearner> =>
  Effect.map(
    Effect.all([ModelProviders, QualityEstimator, ModelLearner]),
    ([providers, quality, learner]) => fromParts({ catalogue, providers, quality, learner })
  )

/** The live router layer. */
export const layer = (catalogue: ModelCatalogue): Layer.Layer<ModelRouter, never, ModelProviders | QualityEstimator | ModelLearner> =>
  Layer.effect(ModelRouter, make(catalogue))

/**
 * A deterministic router for tests: every provider of the catalogue scripted with `script`, quality scores
 * scripted with `scores`, an in-memory learner and Thompson draws from `random` (seed it with `Random.make`).
 */
export const layerTest = (options: {
  readonly catalogue: ModelCatalogue
  readonly script: Script
  readonly scores: ReadonlyArray<number> | ((input: QualityInput) => number)
  readonly random: Random.Random
}): Layer.Layer<ModelRouter | ModelLearner> => {
  const names = [...new Set(options.catalogue.models.map((m) => m.provider))]
  const scripted = makeScripted(options.script)
  const parts = Layer.mergeAll(
    layerProviders(Object.fromEntries(names.map((n) => [n, scripted]))),
    qualityScripted(options.scores),
    learnerMemory
  )
  return Layer.provideMerge(
    Layer.effect(
      ModelRouter,
      Effect.map(Effect.all([ModelProviders, QualityEstimator, ModelLearner]), ([providers, quality, learner]) =>
        fromParts({ catalogue: options.catalogue, providers, quality, learner, random: options.random }))
    ),
    parts
  ).pipe(Layer.map((ctx) => Context.omit(ModelProviders, QualityEstimator)(ctx)))
}
