import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Sim from "../../src/sim/Simulation.js"

/** The example mesh with the bug planted in its shop: it ignores its nonce store and forgets its stored replies. */
const planted = Sim.withFlaws(Sim.exampleMesh, "shop", ["ignores-nonces", "forgets-replies"])

/** Seeds whose schedules hold faults of every kind on the example mesh (drops, duplicates, delays, crashes, jumps). */
const FIXED_SEEDS = [5, 8]

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
        "5 GatedCall: gated call paused for approval",
        "6 Chat: chat answered by large"
      ])
    }), 180_000)

  it.live("fixed seeds: every invariant holds under their faults", () =>
    Effect.gen(function* () {
      for (const seed of FIXED_SEEDS) {
        const schedule = Sim.scheduleOf(seed, Sim.exampleMesh, { requests: 40 })
        assert.isAbove(schedule.length, 0)
        const report = yield* Sim.run(Sim.exampleMesh, schedule)
        assert.strictEqual(report.violation, undefined, `seed ${seed}:\n${Sim.describeSchedule(schedule)}`)
      }
    }), 300_000)

  it.live("one schedule run twice gives the same trace (seed 3: two dropped responses, a clock jump, a crash)", () =>
    Effect.gen(function* () {
      const schedule = Sim.scheduleOf(3, Sim.exampleMesh, { requests: 40 })
      const a = yield* Sim.run(Sim.exampleMesh, schedule)
      const b = yield* Sim.run(Sim.exampleMesh, schedule)
      assert.strictEqual(a.violation, undefined)
      assert.isAbove(a.network.length, 20)
      assert.deepStrictEqual(b.network, a.network)
      assert.strictEqual(b.digest, a.digest)
    }), 180_000)

  it.live("a duplicated signed request to an agent that ignores its nonces is a replay accepted; a sound agent refuses it", () =>
    Effect.gen(function* () {
      // Request 4 is the workload's first direct call, to the shop (requests 0–3 are the first saga's).
      const schedule: Sim.Schedule = [{ _tag: "Net", request: 4, fault: { _tag: "Duplicate" } }]
      const flawed = yield* Sim.run(planted, schedule)
      assert.strictEqual(flawed.violation?.invariant, "replay")
      const sound = yield* Sim.run(Sim.exampleMesh, schedule)
      assert.strictEqual(sound.violation, undefined)
      assert.isTrue(sound.network.some((l) => l.faults.includes("Duplicate")))
    }), 180_000)

  it.live("a failing schedule with the planted bug is shrunk to the event it needs, and the shrunk schedule replays the failure", () =>
    Effect.gen(function* () {
      // Faults of every kind, one of which (request 4, the direct call to the shop, delivered twice) breaks the planted shop.
      const schedule: Sim.Schedule = [
        { _tag: "ClockJump", before: 1, millis: 1_000 },
        { _tag: "Net", request: 4, fault: { _tag: "Duplicate" } },
        { _tag: "Crash", target: "bank", before: 3 },
        { _tag: "ProviderError", call: 0, code: "PROVIDER_UNAVAILABLE" }
      ]
      const found = yield* Sim.run(planted, schedule)
      assert.strictEqual(found.violation?.invariant, "replay")
      const shrunk = yield* Sim.shrink(planted, schedule, found)
      assert.deepStrictEqual(shrunk.schedule, [{ _tag: "Net", request: 4, fault: { _tag: "Duplicate" } }])
      const replayed = yield* Sim.run(planted, shrunk.schedule)
      assert.deepStrictEqual(replayed.violation, shrunk.report.violation)
      assert.strictEqual(replayed.digest, shrunk.report.digest)
    }), 300_000)

  it.live("an agent that skips its task guard runs a gated capability without approval; the run reports it", () =>
    Effect.gen(function* () {
      const report = yield* Sim.run(Sim.withFlaws(Sim.exampleMesh, "bank", ["skips-gates"]), [])
      assert.strictEqual(report.violation?.invariant, "gate")
      assert.strictEqual(report.violation?.action, 5)
    }), 180_000)

  it("the schedule of a seed is the same every time, and seeds differ", () => {
    assert.deepStrictEqual(Sim.scheduleOf(42, Sim.exampleMesh), Sim.scheduleOf(42, Sim.exampleMesh))
    assert.notDeepEqual(Sim.scheduleOf(42, Sim.exampleMesh), Sim.scheduleOf(43, Sim.exampleMesh))
  })
})
