import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid } from "../../src/core/Did.js"
import { issueModelBudgetMandate } from "../../src/core/Mandate.js"
import type { ModelBudgetConstraints } from "../../src/core/Constraints.js"
import { makeScripted } from "../../src/core/ModelProvider.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { post } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const catalogue = {
  models: [
    { id: "mini", provider: "local", tier: 1, inputUsdPerMTok: 1, outputUsdPerMTok: 2, contextWindow: 8192, maxOutputTokens: 64 },
    { id: "frontier", provider: "local", tier: 2, inputUsdPerMTok: 10, outputUsdPerMTok: 20, contextWindow: 8192, maxOutputTokens: 64 }
  ]
}

/** A user, and an agent routing over mini (which hedges) and frontier (which answers). */
const setup = Effect.gen(function* () {
  const user = yield* generateDid("user")
  const agentId = yield* generateDid("router-agent")
  const stranger = yield* generateDid("stranger")
  const provider = makeScripted((r) => (r.model === "mini" ? "I'm not sure." : "Because of Rayleigh scattering of sunlight."))
  const agent = yield* AgentServer.make({
    name: "router-agent",
    did: agentId.did,
    privateKey: agentId.privateKey,
    database: ":memory:",
    provider,
    catalogue,
    resolveCallerKey: (did) => (did === user.did ? user.publicKey : did === stranger.did ? stranger.publicKey : null)
  })
  const mandate = (over: Partial<ModelBudgetConstraints> = {}, grantee = agentId.did) =>
    Effect.map(
      issueModelBudgetMandate({
        grantorDid: user.did,
        granteeDid: grantee,
        privateKey: user.privateKey,
        constraints: { token_budget: 10_000, cost_budget_usd: 1, quality_threshold: 0.7, task_type: "REASONING", expected_steps: 4, ...over }
      }),
      (m) => m.token
    )
  return { agent, provider, mandate, stranger }
})

describe("LLM agent through the ModelRouter", () => {
  it.live("without a mandate the strongest model answers", () =>
    provide(
      Effect.gen(function* () {
        const { agent, provider } = yield* setup
        const r = yield* post(`${agent.url}/v1/run`, { message: "why is the sky blue?" })
        assert.strictEqual(r.status, 200)
        assert.deepStrictEqual(provider.requests.map((q) => q.model), ["frontier"])
      })
    ))

  it.live("under a caller's model-budget mandate it starts cheap and escalates past a hedging answer", () =>
    provide(
      Effect.gen(function* () {
        const { agent, mandate, provider } = yield* setup
        // A share (250 µUSD) below frontier's least call (16 output tokens alone cost 320 µUSD), so whatever the
        // THOMPSON draw, mini is the only first pick; frontier then answers within the whole budget.
        const token = yield* mandate({ cost_budget_usd: 0.002, expected_steps: 8 })
        const r = yield* post(`${agent.url}/v1/run`, { message: "why is the sky blue?", context: { modelBudgetMandate: token } })
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.body.message, "Because of Rayleigh scattering of sunlight.")
        assert.deepStrictEqual(provider.requests.map((q) => q.model), ["mini", "frontier"])
      })
    ))

  it.live("a mandate's budget is spent across runs, then refused with 409 BUDGET_EXHAUSTED", () =>
    provide(
      Effect.gen(function* () {
        const { agent, mandate, provider } = yield* setup
        const token = yield* mandate({ token_budget: 140, quality_threshold: 0 })
        const first = yield* post(`${agent.url}/v1/run`, { message: "one", context: { modelBudgetMandate: token } })
        assert.strictEqual(first.status, 200)
        const calls = provider.requests.length
        const second = yield* post(`${agent.url}/v1/run`, { message: "x".repeat(120), context: { modelBudgetMandate: token } })
        assert.strictEqual(second.status, 409)
        assert.strictEqual(second.body.code, "BUDGET_EXHAUSTED")
        assert.strictEqual(provider.requests.length, calls)
      })
    ))

  it.live("a mandate granted to another agent is refused with 403 MANDATE_INVALID", () =>
    provide(
      Effect.gen(function* () {
        const { agent, mandate, provider, stranger } = yield* setup
        const token = yield* mandate({}, stranger.did)
        const r = yield* post(`${agent.url}/v1/run`, { message: "hello", context: { modelBudgetMandate: token } })
        assert.strictEqual(r.status, 403)
        assert.strictEqual(r.body.code, "MANDATE_INVALID")
        assert.strictEqual(provider.requests.length, 0)
      })
    ))
})
