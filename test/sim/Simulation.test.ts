import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Sim from "../../src/sim/Simulation.js"

describe("Simulation", () => {
  it.live("the example mesh runs its workload with no faults and every invariant holding", () =>
    Effect.gen(function* () {
      const report = yield* Sim.run(Sim.exampleMesh, [])
      assert.strictEqual(report.violation, undefined)
      assert.deepStrictEqual(report.actions, [
        "0 Saga: saga committed",
        "1 Call: call answered",
        "2 Chat: chat answered by large",
        "3 Saga: saga compensated",
        "4 Call: call answered",
        "5 Chat: chat answered by large"
      ])
    }), 30_000)
})
