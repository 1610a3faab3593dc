import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import { available, make, promptTokenBound } from "../src/model/ModelBudget.js"

describe("ModelBudget", () => {
  it.effect("settling charges what was used and releases the rest of the hold", () =>
    Effect.gen(function* () {
      const budget = yield* make({ tokens: 1000, micros: 500 })
      const r = yield* budget.reserve({ tokens: 600, micros: 300 }, "call")
      assert.deepStrictEqual(available(yield* budget.state), { tokens: 400, micros: 200 })
      yield* r.settle({ tokens: 100, micros: 50 })
      assert.deepStrictEqual(available(yield* budget.state), { tokens: 900, micros: 450 })
    }))

  it.effect("a second settle or release of one reservation changes nothing", () =>
    Effect.gen(function* () {
      const budget = yield* make({ tokens: 1000, micros: 500 })
      const r = yield* budget.reserve({ tokens: 600, micros: 300 }, "call")
      yield* r.settle({ tokens: 100, micros: 50 })
      yield* r.settle({ tokens: 100, micros: 50 })
      yield* r.release
      assert.deepStrictEqual((yield* budget.state).spent, { tokens: 100, micros: 50 })
    }))

  it.effect("a reservation that does not fit fails with BUDGET_EXHAUSTED and holds nothing", () =>
    Effect.gen(function* () {
      const budget = yield* make({ tokens: 1000, micros: 500 })
      const e = yield* Effect.flip(budget.reserve({ tokens: 10, micros: 501 }, "call"))
      assert.strictEqual(e.code, "BUDGET_EXHAUSTED")
      assert.deepStrictEqual((yield* budget.state).held, { tokens: 0, micros: 0 })
    }))

  it("the prompt bound is never below the UTF-8 length of the prompt", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: "grapheme" }), { maxLength: 5 }), (texts) => {
        const messages = texts.map((content) => ({ role: "user" as const, content }))
        const bytes = texts.reduce((n, t) => n + new TextEncoder().encode(t).length, 0)
        return promptTokenBound(messages) >= bytes
      })
    )
  })
})
