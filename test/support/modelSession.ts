/**
 * Fixtures for model routing tests: a three-tier catalogue over two providers and model-budget mandates from fixed keys.
 */
import * as Effect from "effect/Effect"
import type { ModelBudgetConstraints } from "../../src/core/Constraints.js"
import { issueModelBudgetMandate } from "../../src/core/Mandate.js"
import { fromSpecs } from "../../src/model/ModelCatalogue.js"
import { party } from "./mandates.js"

/** small (tier 1, $1/$2 per M), medium (tier 2, $5/$10), large (tier 3, $20/$40); large on provider `b`. */
export const catalogue = fromSpecs([
  { id: "small", provider: "a", tier: 1, inputMicrosPerMTok: 1_000_000, outputMicrosPerMTok: 2_000_000, contextWindow: 8192, maxOutputTokens: 256 },
  { id: "medium", provider: "a", tier: 2, inputMicrosPerMTok: 5_000_000, outputMicrosPerMTok: 10_000_000, contextWindow: 8192, maxOutputTokens: 256 },
  { id: "large", provider: "b", tier: 3, inputMicrosPerMTok: 20_000_000, outputMicrosPerMTok: 40_000_000, contextWindow: 8192, maxOutputTokens: 256 }
])

/** Default constraints: 100 000 tokens, 1 USD, threshold 0.7, REASONING, 4 steps. */
export const constraints = (over: Partial<ModelBudgetConstraints> = {}): ModelBudgetConstraints => ({
  token_budget: 100_000,
  cost_budget_usd: 1,
  quality_threshold: 0.7,
  task_type: "REASONING",
  expected_steps: 4,
  ...over
})

/** alice grants bob a model-budget mandate; bob holds the session. */
export const holderMandate = (over: Partial<ModelBudgetConstraints> = {}) =>
  Effect.gen(function* () {
    const alice = yield* party("alice", 1)
    const bob = yield* party("bob", 2)
    const carol = yield* party("carol", 3)
    const mandate = yield* issueModelBudgetMandate({
      grantorDid: alice.did,
      granteeDid: bob.did,
      privateKey: alice.key,
      constraints: constraints(over)
    })
    return { alice, bob, carol, mandate }
  })
