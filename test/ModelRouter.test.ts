import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import { makeScripted, ModelError } from "../src/core/ModelProvider.js"
import { make as makeBudget } from "../src/model/ModelBudget.js"
import { fromCounts } from "../src/model/ModelLearner.js"
import { fromParts, ModelRouter, type ModelRouterApi, providers, type RouteRequest, layerTest } from "../src/model/ModelRouter.js"
import { scripted } from "../src/model/QualityEstimator.js"
import { catalogue } from "./support/modelSession.js"

const messages = [{ role: "user" as const, content: "why is the sky blue?" }]

/** A router whose providers `a` and `b` answer "answer from <model>" with 10 input and 20 output tokens. */
const setup = (scores: ReadonlyArray<number>, seed = 1) => {
  const a = makeScripted((r) => ({ text: `answer from ${r.model}`, inputTokens: 10, outputTokens: 20 }), { name: "a" })
  const b = makeScripted((r) => ({ text: `answer from ${r.model}`, inputTokens: 10, outputTokens: 20 }), { name: "b" })
  const learner = fromCounts()
  const router = fromParts({ catalogue, providers: providers({ a, b }), quality: scripted(scores), learner, random: Random.make(seed) })
  return { a, b, learner, router }
}

const request = (over: Partial<RouteRequest> & Pick<RouteRequest, "budget">): RouteRequest => ({
  messages,
  taskType: "REASONING",
  qualityThreshold: 0.7,
  share: { tokens: 100_000, micros: 1_000_000 },
  mode: "PROPORTIONAL",
  ...over
})

const route = (router: ModelRouterApi, over: Partial<RouteRequest> = {}, limit = { tokens: 100_000, micros: 1_000_000 }) =>
  Effect.flatMap(makeBudget(limit), (budget) => Effect.map(router.route(request({ budget, ...over })), (result) => ({ result, budget })))

describe("ModelRouter", () => {
  it.effect("escalates tier by tier while the score is below the threshold", () =>
    Effect.gen(function* () {
      const { router } = setup([0.3, 0.5, 0.9])
      const { result } = yield* route(router, { share: { tokens: 300, micros: 3 } })
      assert.strictEqual(result.modelId, "large")
      assert.strictEqual(result.nEscalations, 2)
      assert.deepStrictEqual(result.attempts.map((x) => x.modelId), ["small", "medium", "large"])
      // 10 input and 20 output tokens each: 50, 250 and 1000 micro-USD.
      assert.deepStrictEqual(result.usage, { inputTokens: 30, outputTokens: 60, costMicros: 1300 })
    }))

  it.effect("sends each model to its own provider", () =>
    Effect.gen(function* () {
      const { a, b, router } = setup([0.3, 0.5, 0.9])
      yield* route(router, { share: { tokens: 300, micros: 3 } })
      assert.deepStrictEqual(a.requests.map((r) => r.model), ["small", "medium"])
      assert.deepStrictEqual(b.requests.map((r) => r.model), ["large"])
    }))

  it.effect("stops at the first answer meeting the threshold", () =>
    Effect.gen(function* () {
      const { router } = setup([0.8])
      const { result } = yield* route(router, { share: { tokens: 300, micros: 3 } })
      assert.strictEqual(result.modelId, "small")
      assert.strictEqual(result.nEscalations, 0)
    }))

  it.effect("PROPORTIONAL starts at the strongest model whose bound fits the share", () =>
    Effect.gen(function* () {
      const { router } = setup([0.9])
      const { result } = yield* route(router, { share: { tokens: 100_000, micros: 1_000_000 } })
      assert.strictEqual(result.modelId, "large")
    }))

  it.effect("returns the best answer so far when the next tier does not fit the budget", () =>
    Effect.gen(function* () {
      const { router } = setup([0.6, 0.3])
      // small (50 micro-USD) and medium (250) leave 1000, less than large's bound with 16 answer tokens (1260).
      const { result, budget } = yield* route(router, { share: { tokens: 300, micros: 1 } }, { tokens: 100_000, micros: 1300 })
      assert.deepStrictEqual(result.attempts.map((x) => x.modelId), ["small", "medium"])
      assert.strictEqual(result.modelId, "small")
      assert.strictEqual(result.quality, 0.6)
      const s = yield* budget.state
      assert.deepStrictEqual(s.held, { tokens: 0, micros: 0 })
    }))

  it.effect("fails with BUDGET_EXHAUSTED, without calling a provider, when no model fits", () =>
    Effect.gen(function* () {
      const { a, b, router } = setup([0.9])
      const budget = yield* makeBudget({ tokens: 20, micros: 1_000_000 })
      const e = yield* Effect.flip(router.route(request({ budget })))
      assert.strictEqual(e.code, "BUDGET_EXHAUSTED")
      assert.strictEqual(a.requests.length + b.requests.length, 0)
    }))

  it.effect("asks for no more answer tokens than the budget can pay", () =>
    Effect.gen(function* () {
      const { a, router } = setup([0.9])
      yield* route(router, { share: { tokens: 200, micros: 1 } }, { tokens: 200, micros: 1_000_000 })
      const asked = a.requests[0]!
      assert.isAtMost(asked.maxTokens!, 200 - 3 - 8 - "why is the sky blue?".length)
    }))

  it.effect("releases the reservation when the provider fails", () =>
    Effect.gen(function* () {
      const failing = makeScripted([new ModelError({ code: "PROVIDER_UNAVAILABLE", message: "down" })])
      const router = fromParts({ catalogue, providers: providers({ a: failing, b: failing }), quality: scripted([1]), learner: fromCounts() })
      const budget = yield* makeBudget({ tokens: 100_000, micros: 1_000_000 })
      const e = yield* Effect.flip(router.route(request({ budget })))
      assert.strictEqual(e.code, "PROVIDER_UNAVAILABLE")
      const s = yield* budget.state
      assert.deepStrictEqual([s.held, s.spent], [{ tokens: 0, micros: 0 }, { tokens: 0, micros: 0 }])
    }))

  it.effect("records a success only for an answer at the threshold within the share", () =>
    Effect.gen(function* () {
      const { learner, router } = setup([0.3, 0.9])
      // The share fits small (50 micro-USD) and medium (250) but not large: small first, then medium.
      yield* route(router, { share: { tokens: 300, micros: 300 } })
      assert.deepStrictEqual(yield* learner.belief("small", "REASONING"), { alpha: 1, beta: 2 })
      assert.deepStrictEqual(yield* learner.belief("medium", "REASONING"), { alpha: 2, beta: 1 })
    }))

  it.effect("THOMPSON choices are the same for the same seed", () =>
    Effect.gen(function* () {
      const picks = (seed: number) => {
        const { router } = setup([0.9], seed)
        return Effect.forEach(Array.from({ length: 20 }), () =>
          Effect.map(router.choose({ messages, taskType: "CODE", qualityThreshold: 0.7, share: { tokens: 100_000, micros: 1_000_000 }, mode: "THOMPSON" }), (m) => m.id))
      }
      assert.deepStrictEqual(yield* picks(7), yield* picks(7))
    }))

  it.effect("THOMPSON learns to start at the cheap model where it succeeds", () =>
    Effect.gen(function* () {
      const { learner, router } = setup([0.9], 3)
      for (let i = 0; i < 40; i++) {
        yield* learner.record("small", "CODE", true)
        yield* learner.record("medium", "CODE", true)
        yield* learner.record("large", "CODE", true)
      }
      const picks = yield* Effect.forEach(Array.from({ length: 20 }), () =>
        Effect.map(router.choose({ messages, taskType: "CODE", qualityThreshold: 0.7, share: { tokens: 100_000, micros: 1_000_000 }, mode: "THOMPSON" }), (m) => m.id))
      assert.isAtLeast(picks.filter((p) => p === "small").length, 18)
    }))

  it.effect("THOMPSON skips a cheap model believed to fail", () =>
    Effect.gen(function* () {
      const { learner, router } = setup([0.9], 5)
      for (let i = 0; i < 40; i++) {
        yield* learner.record("small", "CODE", false)
        yield* learner.record("medium", "CODE", true)
      }
      const picks = yield* Effect.forEach(Array.from({ length: 20 }), () =>
        Effect.map(router.choose({ messages, taskType: "CODE", qualityThreshold: 0.7, share: { tokens: 100_000, micros: 1_000_000 }, mode: "THOMPSON" }), (m) => m.id))
      assert.strictEqual(picks.filter((p) => p === "small").length, 0)
    }))

  it.effect("the test layer routes deterministically over scripted providers and scores", () =>
    Effect.gen(function* () {
      const router = yield* ModelRouter
      const budget = yield* makeBudget({ tokens: 100_000, micros: 1_000_000 })
      const result = yield* router.route(request({ budget, share: { tokens: 300, micros: 3 } }))
      assert.strictEqual(result.content, "scripted answer")
      assert.strictEqual(result.nEscalations, 1)
    }).pipe(Effect.provide(layerTest({ catalogue, script: ["scripted answer"], scores: [0.1, 0.95], random: Random.make(1) }))))
})
