import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program } from "../examples/a2a-bridge.js"

describe("examples", () => {
  it.live("a2a-bridge: the SDK's client verifies a mesh agent's card and gets its reply; a mesh caller reaches an SDK agent registered in the hub", () =>
    Effect.gen(function* () {
      const result = yield* program
      assert.strictEqual(result.cardName, "translator")
      assert.isTrue(result.verified)
      assert.strictEqual(result.translated, "«good morning» in French: «bonjour»")
      assert.strictEqual(result.registered.name, "shouter")
      assert.strictEqual(result.message, "HELLO FROM THE MESH!")
    }))
})
