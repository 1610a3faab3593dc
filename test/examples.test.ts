import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program } from "../examples/envelope-exchange.js"
import { main as modelSession } from "../examples/model-session.js"

describe("examples", () => {
  it.effect("envelope-exchange: request accepted, answer accepted, replay and tampering refused", () =>
    Effect.gen(function* () {
      const result = yield* program
      assert.strictEqual(result.replayCode, "REPLAYED")
      assert.strictEqual(result.tamperedCode, "SIGNATURE_INVALID")
      assert.strictEqual(result.response.correlationId, result.request.correlationId)
    }))

  it.effect("model-session: escalates past a hedging model, runs a step, and stays within the budget", () =>
    Effect.gen(function* () {
      const { reply, stepped, summary } = yield* Effect.promise(() => modelSession())
      assert.notStrictEqual(reply.modelId, "mini")
      assert.include(reply.content, "Rayleigh")
      assert.include(stepped.content, "Rayleigh")
      assert.isAtMost(summary.totalTokens, 20_000)
      assert.isAtMost(summary.totalCostUsd, 0.05)
      assert.strictEqual(summary.tokensRemaining, 20_000 - summary.totalTokens)
    }))
})
