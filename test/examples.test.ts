import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program } from "../examples/envelope-exchange.js"
import { program as sagaTrip } from "../examples/saga-trip.js"
import { main as modelSession } from "../examples/model-session.js"

describe("examples", () => {
  it.effect("envelope-exchange: request accepted, answer accepted, replay and tampering refused", () =>
    Effect.gen(function* () {
      const result = yield* program
      assert.strictEqual(result.replayCode, "REPLAYED")
      assert.strictEqual(result.tamperedCode, "SIGNATURE_INVALID")
      assert.strictEqual(result.response.correlationId, result.request.correlationId)
    }))

  it.live("saga-trip: the car fails, so the hotel and then the flight are cancelled; the saga ends compensated", () =>
    Effect.gen(function* () {
      const { ended, log } = yield* sagaTrip
      assert.deepStrictEqual([ended.status, ended.failedStep], ["compensated", "car"])
      assert.deepStrictEqual(ended.steps.map((s) => s.status), ["compensated", "compensated", "failed"])
      assert.deepStrictEqual(ended.steps.map((s) => s.usedUsd), ["420", "310", "0"])
      const agents = log.filter((l) => !l.startsWith("hub:"))
      assert.deepStrictEqual(agents, ["airline: book-flight", "hotel: book-hotel", "hotel: cancel-book-hotel", "airline: cancel-book-flight"])
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
