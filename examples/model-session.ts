/**
 * A model session under a model-budget mandate: alice grants bob 20 000 tokens and 0.05 USD for a reasoning task;
 * bob's calls are routed over a three-tier catalogue, escalating while an answer scores below the 0.7 threshold,
 * and one step gets its own child mandate whose unused budget flows back when it ends.
 *
 *   npx tsx examples/model-session.ts
 *
 * The provider here is scripted (no network): the cheap model hedges on a reasoning question, the stronger ones
 * answer. Swap in `ModelProviderOpenAi.make({ baseUrl, apiKey })` for a real server.
 */
import { pathToFileURL } from "node:url"
import { makeScripted } from "../src/core/ModelProvider.js"
import { issueModelBudgetMandate } from "../src/promise/MandatePromise.js"
import { create } from "../src/promise/ModelSessionPromise.js"
import { generateKey } from "../src/promise/Promise.js"

const catalogue = {
  models: [
    { id: "mini", provider: "local", tier: 1, inputUsdPerMTok: 0.15, outputUsdPerMTok: 0.6, contextWindow: 128_000 },
    { id: "standard", provider: "local", tier: 2, inputUsdPerMTok: 0.4, outputUsdPerMTok: 1.6, contextWindow: 128_000 },
    { id: "frontier", provider: "local", tier: 3, inputUsdPerMTok: 2, outputUsdPerMTok: 8, contextWindow: 128_000 }
  ]
}

const provider = makeScripted((request) =>
  request.model === "mini"
    ? "I'm not sure."
    : `Rayleigh scattering: air molecules scatter short (blue) wavelengths of sunlight far more than long ones (answered by ${request.model}).`
)

/** Opens the session, asks twice (once inside a step), and returns the replies and the summary. */
export const main = async () => {
  const alice = await generateKey()
  const bob = await generateKey()
  const mandate = await issueModelBudgetMandate({
    grantorDid: "did:mesh:alice",
    granteeDid: "did:mesh:bob",
    privateKey: alice,
    constraints: { token_budget: 20_000, cost_budget_usd: 0.05, quality_threshold: 0.7, task_type: "REASONING", expected_steps: 4 }
  })
  const session = await create({ mandate, privateKey: bob, provider, catalogue, allocatorMode: "THOMPSON" })
  try {
    const reply = await session.chat("Why is the sky blue?")
    console.log(`${reply.modelId} answered after ${reply.nEscalations} escalation(s): ${reply.content}`)
    const stepped = await session.withStep("explain sunsets", 1, 4, async (step) => {
      console.log(`step "${step.name}": ${step.tokenBudget} tokens, ${step.costBudgetUsd} USD, mandate ${step.mandate.jti}`)
      return session.chat("And why are sunsets red?", step.mandate)
    })
    console.log(`${stepped.modelId} answered inside the step`)
    const summary = await session.summary()
    console.log(`summary: ${JSON.stringify(summary)}`)
    return { reply, stepped, summary }
  } finally {
    await session.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e: unknown) => {
    console.error(e)
    process.exitCode = 1
  })
}
