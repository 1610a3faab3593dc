import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Scope from "effect/Scope"
import * as fc from "effect/FastCheck"
import { usdMicros } from "../src/core/Constraints.js"
import { issueTaskMandate, verifyMandate } from "../src/core/Mandate.js"
import { type ChatRequest, type ChatResult, makeScripted, type ModelProviderApi } from "../src/core/ModelProvider.js"
import { MandateCache } from "../src/core/MandateCache.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { layerMemory, ModelLearner } from "../src/model/ModelLearner.js"
import { fromParts, ModelRouter, providers } from "../src/model/ModelRouter.js"
import { make as makeSession } from "../src/model/ModelSession.js"
import { scripted } from "../src/model/QualityEstimator.js"
import { resolverFor } from "./support/mandates.js"
import { catalogue, holderMandate } from "./support/modelSession.js"

/** A provider that yields before answering (so concurrent calls interleave) and answers `outputTokens(request, i)` tokens. */
const yielding = (outputTokens: (request: ChatRequest, index: number) => number): ModelProviderApi => {
  const scripted = makeScripted((request, index) => ({
    text: "an answer of some length",
    inputTokens: Math.ceil(request.messages.reduce((n, m) => n + m.content.length, 0) / 4),
    outputTokens: outputTokens(request, index)
  }))
  return { ...scripted, chat: (request) => Effect.zipRight(Effect.yieldNow(), scripted.chat(request)) as Effect.Effect<ChatResult, never> }
}

/** A router over `provider` for both provider names, scores from `scores`, seeded Thompson draws. */
const routerLayer = (provider: ModelProviderApi, scores: ReadonlyArray<number> = [0.9]) =>
  Layer.provideMerge(
    Layer.effect(ModelRouter, Effect.map(ModelLearner, (learner) =>
      fromParts({ catalogue, providers: providers({ a: provider, b: provider }), quality: scripted(scores), learner, random: Random.make(11) }))),
    layerMemory
  )

const layer = (provider: ModelProviderApi = yielding((r) => Math.min(r.maxTokens ?? 0, 20)), scores?: ReadonlyArray<number>) =>
  Layer.merge(routerLayer(provider, scores), KeysNative.layer)

describe("ModelSession", () => {
  it.effect("chat answers content, model id and escalations; summary adds the calls up", () =>
    Effect.gen(function* () {
      // 400 micro-USD over 4 steps: the share (100) fits only small; medium then fits what is left, large not.
      const { bob, mandate } = yield* holderMandate({ cost_budget_usd: 0.0004 })
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      const reply = yield* session.chat("why is the sky blue?")
      assert.strictEqual(reply.content, "an answer of some length")
      assert.strictEqual(reply.modelId, "small")
      assert.strictEqual(reply.nEscalations, 1)
      const summary = yield* session.summary
      assert.strictEqual(summary.nCalls, 2)
      assert.deepStrictEqual(summary.modelsUsed, ["small", "medium"])
      assert.strictEqual(summary.totalTokens, reply.usage.inputTokens + reply.usage.outputTokens)
      assert.strictEqual(summary.tokensRemaining, 100_000 - summary.totalTokens)
      assert.strictEqual(usdMicros(summary.totalCostUsd), 270)
      assert.strictEqual(usdMicros(summary.totalCostUsd) + usdMicros(summary.costRemaining), 400)
    }).pipe(Effect.provide(layer(undefined, [0.6, 0.5, 0.4]))))

  it.effect.prop(
    "100 concurrent chats never spend more than the token or the cost budget",
    { tokens: fc.integer({ min: 0, max: 20_000 }), micros: fc.integer({ min: 0, max: 200_000 }), salt: fc.integer({ min: 1, max: 1000 }) },
    ({ micros, salt, tokens }) =>
      Effect.gen(function* () {
        const { bob, mandate } = yield* holderMandate({ token_budget: tokens, cost_budget_usd: micros / 1_000_000, expected_steps: 10 })
        const session = yield* makeSession({ mandate, privateKey: bob.key, allocatorMode: "THOMPSON" })
        const results = yield* Effect.forEach(
          Array.from({ length: 100 }, (_, i) => `question ${i} ${"x".repeat((i * salt) % 300)}`),
          (prompt) => Effect.either(session.chat(prompt)),
          { concurrency: "unbounded" }
        )
        for (const r of results) if (r._tag === "Left") assert.strictEqual(r.left.code, "BUDGET_EXHAUSTED")
        const summary = yield* session.summary
        assert.isAtMost(summary.totalTokens, tokens)
        assert.isAtMost(usdMicros(summary.totalCostUsd), micros)
        assert.isAtLeast(summary.tokensRemaining, 0)
      }).pipe(Effect.provide(layer(yielding((r, i) => (r.maxTokens ?? 0) - (i % 3)), [0.5, 0.8, 0.2]))),
    { fastCheck: { numRuns: 25 } }
  )

  it.effect("a step issues a child model-budget mandate within the session's, verifiable as a chain", () =>
    Effect.gen(function* () {
      const { alice, bob, carol, mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      const step = yield* Effect.scoped(session.step("research", 1, 4, { granteeDid: carol.did }))
      const verified = yield* verifyMandate(step.mandate.token, resolverFor([alice, bob, carol]), { expectedGrantee: carol.did, kinds: ["model-budget"] })
      assert.strictEqual(verified.parent?.jti, mandate.jti)
      assert.deepStrictEqual(verified.constraints, {
        token_budget: 25_000,
        cost_budget_usd: 0.25,
        quality_threshold: 0.7,
        task_type: "REASONING",
        expected_steps: 1
      })
    }).pipe(Effect.provide(layer())))

  it.effect("calls with a step's mandate draw on the step; closing the step returns what it did not spend", () =>
    Effect.gen(function* () {
      const { bob, mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      const scope = yield* Scope.make()
      const step = yield* Scope.extend(session.step("draft"), scope)
      assert.strictEqual((yield* session.summary).tokensRemaining, 75_000)
      const reply = yield* session.chat("write the draft", step.mandate)
      const used = reply.usage.inputTokens + reply.usage.outputTokens
      yield* Scope.close(scope, Exit.void)
      const summary = yield* session.summary
      assert.strictEqual(summary.tokensRemaining, 100_000 - used)
      assert.strictEqual(summary.totalTokens, used)
      const e = yield* Effect.flip(session.chat("again", step.mandate))
      assert.strictEqual(e.code, "STEP_NOT_OPEN")
    }).pipe(Effect.provide(layer())))

  it.effect("a step's token is parsed once through the runtime's mandate cache, not on every call", () =>
    Effect.gen(function* () {
      const { bob, mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      const cache = yield* MandateCache
      yield* Effect.scoped(Effect.flatMap(session.step("draft"), (step) =>
        Effect.gen(function* () {
          assert.isUndefined(cache.chains.get(step.mandate.token))
          yield* session.chat("first", step.mandate.token)
          const parsed = cache.chains.get(step.mandate.token)
          assert.isDefined(parsed)
          yield* session.chat("second", step.mandate.token)
          assert.strictEqual(cache.chains.get(step.mandate.token), parsed)
        })))
    }).pipe(Effect.provide(layer())))

  it.effect("a call within a step cannot spend more than the step's budget", () =>
    Effect.gen(function* () {
      const { bob, mandate } = yield* holderMandate({ token_budget: 400, expected_steps: 4 })
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      const e = yield* Effect.flip(
        Effect.scoped(Effect.flatMap(session.step("tiny"), (step) => session.chat("y".repeat(200), step.mandate)))
      )
      assert.strictEqual(e.code, "BUDGET_EXHAUSTED")
      assert.strictEqual((yield* session.summary).tokensRemaining, 400)
    }).pipe(Effect.provide(layer())))

  it.effect("IMPORTANCE_WEIGHTED gives a step budget × weight ÷ total weight", () =>
    Effect.gen(function* () {
      const { bob, mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate, privateKey: bob.key, allocatorMode: "IMPORTANCE_WEIGHTED" })
      const step = yield* Effect.scoped(session.step("key part", 3, 10))
      assert.strictEqual(step.tokenBudget, 30_000)
      assert.strictEqual(step.costBudgetUsd, 0.3)
    }).pipe(Effect.provide(layer())))

  it.effect("PROPORTIONAL splits what is left over the steps still expected", () =>
    Effect.gen(function* () {
      const { bob, mandate } = yield* holderMandate({ expected_steps: 2 })
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      const budgets = yield* Effect.scoped(Effect.all([session.step("one"), session.step("two")]))
      assert.deepStrictEqual(budgets.map((s) => s.tokenBudget), [50_000, 50_000])
    }).pipe(Effect.provide(layer())))

  it.effect("a step handed to another agent opens that agent's own session", () =>
    Effect.gen(function* () {
      const { bob, carol, mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      yield* Effect.scoped(
        Effect.gen(function* () {
          const step = yield* session.step("delegated", 1, 4, { granteeDid: carol.did })
          const carolSession = yield* makeSession({ mandate: step.mandate.token, privateKey: carol.key })
          yield* carolSession.chat("sub-question")
          assert.isAtMost((yield* carolSession.summary).tokensRemaining, step.tokenBudget)
          const sub = yield* Effect.scoped(carolSession.step("deeper"))
          assert.isAtMost(sub.tokenBudget, step.tokenBudget)
        })
      )
    }).pipe(Effect.provide(layer())))

  it.effect("steps need the holder's key", () =>
    Effect.gen(function* () {
      const { mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate })
      const e = yield* Effect.flip(Effect.scoped(session.step("unsigned")))
      assert.strictEqual(e.code, "SIGNING_KEY_REQUIRED")
    }).pipe(Effect.provide(layer())))

  it.effect("a closed session refuses calls", () =>
    Effect.gen(function* () {
      const { bob, mandate } = yield* holderMandate()
      const session = yield* makeSession({ mandate, privateKey: bob.key })
      yield* session.close
      const e = yield* Effect.flip(session.chat("hello"))
      assert.strictEqual(e.code, "SESSION_CLOSED")
    }).pipe(Effect.provide(layer())))

  it.effect("a mandate of another kind is refused", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* holderMandate()
      const task = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["x"], maxDelegationDepth: 1 } })
      const e = yield* Effect.flip(makeSession({ mandate: task.token }))
      assert.strictEqual(e.reason, "KIND_MISMATCH")
    }).pipe(Effect.provide(layer())))
})
