import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program } from "../examples/envelope-exchange.js"

describe("examples", () => {
  it.effect("envelope-exchange: request accepted, answer accepted, replay and tampering refused", () =>
    Effect.gen(function* () {
      const result = yield* program
      assert.strictEqual(result.replayCode, "REPLAYED")
      assert.strictEqual(result.tamperedCode, "SIGNATURE_INVALID")
      assert.strictEqual(result.response.correlationId, result.request.correlationId)
    }))
})
