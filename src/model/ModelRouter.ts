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
 * - THOMPSON: for each model that fits the share, a draw θ from the learner's Beta belief that it succeeds; the
 *   pick minimises the expected cost of a good answer, `cost + (1 − θ) × cost of the strongest`, so a cheap model
 *   is tried where it is believed to succeed and skipped where it is believed to fail.
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
import * as Option from "effect/Option"
import type * as Random from "effect/Random"
import type { TaskType } from "../core/Constraints.js"
import {
  type ChatMessage,
  type ChatResult,
  makeScripted,
  ModelError,
  ModelProvider,
  type ModelProviderApi,
  type Script
} from "../core/ModelProvider.js"
import { costMicros, type ModelCatalogue, type ModelSpec } from "./ModelCatalogue.js"
import { type Amount, type ModelBudget, ModelBudgetExhausted, promptTokenBound } from "./ModelBudget.js"
import { layerMemory as learnerMemory, ModelLearner, type ModelLearnerApi } from "./ModelLearner.js"
import { layerScripted as qualityScripted, QualityEstimator, type QualityEstimatorApi, type QualityInput } from "./QualityEstimator.js"

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

/** One request to route. */
export interface RouteRequest {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly taskType: TaskType
  readonly qualityThreshold: number
  /** The hard budget every attempt reserves from. */
  readonly budget: ModelBudget
  /** The allocator's share for this call: guides the first pick and defines a success for the learner. */
  readonly share: Amount
  readonly mode: AllocatorMode
  readonly temperature?: number
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
  readonly route: (request: RouteRequest) => Effect.Effect<RouteResult, ModelError | ModelBudgetExhausted>
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
  /** A fixed random source for Thompson draws; default: the `Random` of the calling fiber. */
  readonly random?: Random.Random
}

/** A router over its parts. */
export const fromParts = (parts: RouterParts): ModelRouterApi => {
  const { catalogue, learner, quality } = parts
  const models = catalogue.models
  const top = models[models.length - 1]!

  const exhausted = (message: string) => new ModelBudgetExhausted({ code: "BUDGET_EXHAUSTED", message })

  const choose = (request: Omit<RouteRequest, "budget">, promptBound: number): Effect.Effect<ModelSpec, ModelBudgetExhausted> => {
    const usable = models.filter((m) => m.contextWindow - promptBound >= MIN_OUTPUT_TOKENS)
    if (usable.length === 0) return Effect.fail(exhausted(`a prompt of up to ${promptBound} tokens fits no model's context window`))
    const fitsShare = usable.filter((m) => outputFitting(m, promptBound, request.share) >= MIN_OUTPUT_TOKENS)
    if (request.mode !== "THOMPSON") return Effect.succeed(fitsShare.length > 0 ? fitsShare[fitsShare.length - 1]! : usable[0]!)
    const pool = fitsShare.length > 0 ? fitsShare : usable
    const draw = learner.sample(pool.map((m) => m.id), request.taskType)
    const seeded = parts.random === undefined ? draw : Effect.withRandom(draw, parts.random)
    return Effect.map(seeded, (thetas) => {
      const expectedOut = (m: ModelSpec) => Math.max(MIN_OUTPUT_TOKENS, Math.min(m.maxOutputTokens, request.share.tokens - promptBound))
      const strongest = costMicros(top, promptBound, expectedOut(top))
      let best = pool[0]!
      let bestScore = Infinity
      for (let i = 0; i < pool.length; i++) {
        const m = pool[i]!
        const score = costMicros(m, promptBound, expectedOut(m)) + (1 - thetas[i]!) * strongest
        if (score < bestScore) {
          best = m
          bestScore = score
        }
      }
      return best
    })
  }

  const nextTier = (m: ModelSpec, promptBound: number): ModelSpec | undefined => {
    for (const n of models) if (n.tier > m.tier && n.contextWindow - promptBound >= MIN_OUTPUT_TOKENS) return n
    return undefined
  }

  const call = (request: RouteRequest, m: ModelSpec, promptBound: number) =>
    Effect.flatMap(
      request.budget.tryReserve((left) => {
        const out = outputFitting(m, promptBound, left)
        return out < MIN_OUTPUT_TOKENS ? undefined : [{ tokens: promptBound + out, micros: costMicros(m, promptBound, out) }, out] as const
      }),
      Option.match({
        onNone: () => Effect.succeed(Option.none<readonly [ChatResult, Attempt]>()),
        onSome: ([reservation, maxTokens]) => {
          const provider = parts.providers.get(m.provider)
          if (provider === undefined) {
            return Effect.zipRight(
              reservation.release,
              Effect.fail(new ModelError({ code: "PROVIDER_REJECTED", message: `no provider named ${JSON.stringify(m.provider)} for model ${m.id}` }))
            )
          }
          return provider.chat({
            model: m.id,
            messages: request.messages,
            maxTokens,
            ...(request.temperature === undefined ? {} : { temperature: request.temperature })
          }).pipe(
            Effect.onError(() => reservation.release),
            Effect.flatMap((result) => {
              const used = result.usage.inputTokens + result.usage.outputTokens
              const micros = costMicros(m, result.usage.inputTokens, result.usage.outputTokens)
              const over = used > reservation.amount.tokens || micros > reservation.amount.micros
              const settled = reservation.settle({ tokens: used, micros })
              return Effect.as(
                over
                  ? Effect.zipRight(
                    settled,
                    Effect.logWarning(`${m.id} used ${used} tokens (${micros} micro-USD), more than the ${reservation.amount.tokens} reserved`)
                  )
                  : settled,
                result
              )
            }),
            Effect.flatMap((result) => {
              const input: QualityInput = {
                messages: request.messages,
                answer: result.text,
                finishReason: result.finishReason,
                modelId: m.id,
                taskType: request.taskType
              }
              return Effect.map(quality.score(input), (score) =>
                Option.some([result, {
                  modelId: m.id,
                  quality: clamp01(score),
                  inputTokens: result.usage.inputTokens,
                  outputTokens: result.usage.outputTokens,
                  costMicros: costMicros(m, result.usage.inputTokens, result.usage.outputTokens)
                }] as const)
              )
            })
          )
        }
      })
    )

  const learn = (request: RouteRequest, attempt: Attempt) =>
    learner.record(attempt.modelId, request.taskType, attempt.quality >= request.qualityThreshold && attempt.costMicros <= request.share.micros).pipe(
      Effect.catchAll((e) => Effect.logWarning(`the learner could not record an outcome: ${e.message}`))
    )

  const route = (request: RouteRequest): Effect.Effect<RouteResult, ModelError | ModelBudgetExhausted> =>
    Effect.gen(function* () {
      const promptBound = promptTokenBound(request.messages)
      const first = yield* choose(request, promptBound)
      // When the pick does not fit what is left, fall back to cheaper models before giving up.
      let current: ModelSpec | undefined = first
      let got = yield* call(request, first, promptBound)
      if (Option.isNone(got)) {
        for (const m of models) {
          if (m === first || m.tier > first.tier || m.contextWindow - promptBound < MIN_OUTPUT_TOKENS) continue
          got = yield* call(request, m, promptBound)
          if (Option.isSome(got)) {
            current = m
            break
          }
        }
      }
      if (Option.isNone(got)) {
        const s = yield* request.budget.state
        return yield* Effect.fail(
          exhausted(`no model fits what is left: ${s.limit.tokens - s.spent.tokens - s.held.tokens} tokens, ${s.limit.micros - s.spent.micros - s.held.micros} micro-USD`)
        )
      }
      const attempts: Array<Attempt> = []
      let [bestResult, bestAttempt] = got.value
      attempts.push(bestAttempt)
      yield* learn(request, bestAttempt)
      let last = bestAttempt
      while (last.quality < request.qualityThreshold) {
        const next = nextTier(current!, promptBound)
        if (next === undefined) break
        const again = yield* call(request, next, promptBound)
        if (Option.isNone(again)) break
        const [result, attempt] = again.value
        attempts.push(attempt)
        yield* learn(request, attempt)
        if (attempt.quality >= bestAttempt.quality) {
          bestResult = result
          bestAttempt = attempt
        }
        current = next
        last = attempt
      }
      let inputTokens = 0
      let outputTokens = 0
      let micros = 0
      for (const a of attempts) {
        inputTokens += a.inputTokens
        outputTokens += a.outputTokens
        micros += a.costMicros
      }
      return {
        content: bestResult.text,
        modelId: bestAttempt.modelId,
        nEscalations: attempts.length - 1,
        quality: bestAttempt.quality,
        usage: { inputTokens, outputTokens, costMicros: micros },
        attempts
      }
    })

  return {
    catalogue,
    route,
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
