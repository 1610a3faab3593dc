import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { lift } from "../src/core/internal/lift.js"

describe("lift", () => {
  it.effect("a plain value, a Promise, a thenable and an Effect all succeed with their value", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* lift(() => 1), 1)
      assert.strictEqual(yield* lift(() => Promise.resolve(2)), 2)
      assert.strictEqual(yield* lift(() => ({ then: (ok: (n: number) => void) => ok(3) }) as PromiseLike<number>), 3)
      assert.strictEqual(yield* lift(() => Effect.succeed(4)), 4)
    }))

  it.effect("a throw, a rejection and a failed Effect are failures carrying the thrown value, not defects", () =>
    Effect.gen(function* () {
      const boom = new Error("boom")
      for (const thunk of [
        () => {
          throw boom
        },
        () => Promise.reject(boom),
        () => Effect.fail(boom)
      ]) {
        const exit = yield* Effect.exit(lift(thunk))
        assert.deepStrictEqual(exit, Exit.fail(boom))
      }
    }))

  it.effect("the callback runs once per run of the effect, not when the effect is made", () =>
    Effect.gen(function* () {
      let calls = 0
      const effect = lift(() => ++calls)
      assert.strictEqual(calls, 0)
      yield* effect
      yield* effect
      assert.strictEqual(calls, 2)
    }))
})
