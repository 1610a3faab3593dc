import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import { assert, describe, it } from "vitest"
import { makeScripted } from "../src/core/ModelProvider.js"
import { issueModelBudgetMandate } from "../src/promise/MandatePromise.js"
import { create } from "../src/promise/ModelSessionPromise.js"
import { importPrivateKey } from "../src/promise/Promise.js"

const catalogue = {
  models: [
    { id: "small", provider: "p", tier: 1, inputUsdPerMTok: 1, outputUsdPerMTok: 2, contextWindow: 8192 },
    { id: "large", provider: "p", tier: 2, inputUsdPerMTok: 10, outputUsdPerMTok: 20, contextWindow: 8192 }
  ]
}

const setup = async () => {
  const alice = await importPrivateKey(new Uint8Array(32).fill(1))
  const bob = await importPrivateKey(new Uint8Array(32).fill(2))
  const mandate = await issueModelBudgetMandate({
    grantorDid: "did:mesh:alice",
    granteeDid: "did:mesh:bob",
    privateKey: alice,
    constraints: { token_budget: 10_000, cost_budget_usd: 0.1, quality_threshold: 0.7, task_type: "EXTRACTION", expected_steps: 2 }
  })
  return { bob, mandate }
}

describe("ModelSessionPromise", () => {
  it("a step released by its callback returns its unused budget", async () => {
    const { bob, mandate } = await setup()
    const session = await create({ mandate, privateKey: bob, provider: makeScripted(["an answer"]), catalogue, qualityEstimator: () => 0.9 })
    try {
      const inside = await session.withStep("part", 1, 2, async (step) => {
        assert.strictEqual(step.tokenBudget, 5000)
        assert.strictEqual((await session.summary()).tokensRemaining, 5000)
        return session.chat("extract the date", step.mandate)
      })
      const summary = await session.summary()
      assert.strictEqual(summary.tokensRemaining, 10_000 - inside.usage.inputTokens - inside.usage.outputTokens)
    } finally {
      await session.close()
    }
  })

  it("a disposed step returns its budget too", async () => {
    const { bob, mandate } = await setup()
    const session = await create({ mandate, privateKey: bob, provider: makeScripted(["an answer"]), catalogue })
    try {
      const step = await session.step("part")
      await step[Symbol.asyncDispose]()
      assert.strictEqual((await session.summary()).tokensRemaining, 10_000)
    } finally {
      await session.close()
    }
  })

  it("what the learner saw is in the file at learnerPath after the session closed", async () => {
    const { bob, mandate } = await setup()
    const learnerPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-session-")), "learner.db")
    const session = await create({ mandate, privateKey: bob, provider: makeScripted(["an answer"]), catalogue, learnerPath, qualityEstimator: () => 0.9 })
    const reply = await session.chat("extract the name")
    await session.close()
    const db = new BetterSqlite3(learnerPath, { readonly: true })
    try {
      const rows = db.prepare("SELECT model, task_type, successes, failures FROM mesh_model_learner").all()
      assert.deepStrictEqual(rows, [{ model: reply.modelId, task_type: "EXTRACTION", successes: 1, failures: 0 }])
    } finally {
      db.close()
    }
  })

  it("a closed session rejects with SESSION_CLOSED", async () => {
    const { bob, mandate } = await setup()
    const session = await create({ mandate, privateKey: bob, provider: makeScripted(["x"]), catalogue })
    await session.close()
    const e = await session.chat("hello").then(() => undefined, (err: { code: string }) => err)
    assert.strictEqual(e?.code, "SESSION_CLOSED")
  })
})
