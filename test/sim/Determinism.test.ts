import { createHook } from "node:async_hooks"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Sim from "../../src/sim/Simulation.js"

/**
 * Async resources a run may make outside the microtask queue: the driver's turns of the event loop (`Immediate`),
 * the digests it counts as outside work (`HASHREQUEST`), and native calls that run on the calling thread.
 */
const EXPECTED = new Set(["Immediate", "HASHREQUEST", "SIGNREQUEST", "VERIFYREQUEST"])

/** Kinds that are only ever queued on the microtask queue or are promises: the driver sees them through its turn. */
const MICROTASK = new Set(["PROMISE", "Microtask", "TickObject"])

/** Frames of the mesh's or Effect's code: async resources made by the test runner itself are not the run's. */
const ours = (stack: string) => /\/src\/|node_modules\/(effect|@effect)\//.test(stack)

/** The example mesh's agents with a shop whose handler never answers, called once. */
const hanging: Sim.MeshSpec = {
  ...Sim.exampleMesh,
  agents: [{ name: "shop", handler: () => new Promise<string>(() => {}) }, { name: "bank", failing: ["decline"] }],
  workload: [{ _tag: "Call", agent: "shop", capability: "quote" }]
}

describe("Simulation: determinism", () => {
  it.live("a run sets no real timer and leaves the microtask queue only for what the driver waits on by count", () =>
    Effect.gen(function* () {
      const seen = new Map<string, string>()
      const hook = createHook({
        init: (_id, type) => {
          if (MICROTASK.has(type) || seen.has(type)) return
          const stack = new Error().stack ?? ""
          if (ours(stack)) seen.set(type, stack)
        }
      })
      // Seed 3: dropped responses, a crash and a clock jump, so every kind of wait of the driver comes up.
      const schedule = Sim.scheduleOf(3, Sim.exampleMesh, { requests: 40 })
      const report = yield* Effect.acquireUseRelease(
        Effect.sync(() => hook.enable()),
        () => Sim.run(Sim.exampleMesh, schedule),
        () => Effect.sync(() => void hook.disable())
      )
      assert.strictEqual(report.violation, undefined)
      const unexpected = [...seen].filter(([type]) => !EXPECTED.has(type))
      assert.deepStrictEqual(unexpected.map(([type, stack]) => `${type}\n${stack}`), [])
      assert.isTrue(seen.has("Immediate"))
    }), 60_000)

  it.live("a run does not depend on the runs before it in the process (the prepared mesh keeps nothing of a run)", () =>
    Effect.gen(function* () {
      const planted = Sim.withFlaws(Sim.exampleMesh, "shop", ["ignores-nonces", "forgets-replies"])
      const schedule: Sim.Schedule = [{ _tag: "Net", request: 10, fault: { _tag: "Duplicate" } }]
      const before = yield* Sim.run(planted, schedule)
      // Runs that leave a clock hours ahead, keys looked up and cached, a hub crashed mid-saga.
      for (const seed of [5, 10, 34]) yield* Sim.runSeed(Sim.exampleMesh, seed, { requests: 40 })
      // A run that ends with the shop still at work on a call it never answers: that shop is not the next run's.
      const stuck = yield* Sim.run(hanging, [])
      assert.strictEqual(stuck.violation?.invariant, "progress")
      const after = yield* Sim.run(planted, schedule)
      assert.strictEqual(after.violation?.invariant, "replay")
      assert.deepStrictEqual(after.network, before.network)
      assert.strictEqual(after.digest, before.digest)
    }), 120_000)

  it.live("two runs of one schedule agree while other fibers of the process keep the event loop busy", () =>
    Effect.gen(function* () {
      const schedule = Sim.scheduleOf(8, Sim.exampleMesh, { requests: 40 })
      const quiet = yield* Sim.run(Sim.exampleMesh, schedule)
      // Timers and immediates that fire throughout the second run: the driver must not take their turns for quiet.
      let ticks = 0
      const noise = setInterval(() => ticks++, 1)
      const churn = () => void setImmediate(() => (ticks < 1e9 && busy ? churn() : undefined))
      let busy = true
      churn()
      const busyRun = yield* Effect.ensuring(Sim.run(Sim.exampleMesh, schedule), Effect.sync(() => {
        busy = false
        clearInterval(noise)
      }))
      assert.isAbove(ticks, 0)
      assert.deepStrictEqual(busyRun.network, quiet.network)
      assert.strictEqual(busyRun.digest, quiet.digest)
    }), 60_000)
})
