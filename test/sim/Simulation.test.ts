import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Sim from "../../src/sim/Simulation.js"

/** The example mesh with the bug planted in its shop: it ignores its nonce store and forgets its stored replies. */
const planted = Sim.withFlaws(Sim.exampleMesh, "shop", ["ignores-nonces", "forgets-replies"])

/**
 * Seeds whose schedules hold faults of every kind on the example mesh (drops, duplicates, delays, crashes between
 * actions, jumps, and, in seed 10, the hub crashing in the middle of the first saga).
 */
const FIXED_SEEDS = [5, 8, 10]

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
        "5 Chat: chat answered by large",
        "6 Gated: gated call approve, resume answered",
        "7 Gated: gated call forged, resume failed APPROVAL_WRONG_SIGNER"
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
      // Request 10 is the workload's first direct call, to the shop (requests 0–9 are the first saga's: each step's call, the
      // runner's key, and the agent's check of the payment mandate's chain: the buyer's key and both links' revocations).
      const schedule: Sim.Schedule = [{ _tag: "Net", request: 10, fault: { _tag: "Duplicate" } }]
      const flawed = yield* Sim.run(planted, schedule)
      assert.strictEqual(flawed.violation?.invariant, "replay")
      const sound = yield* Sim.run(Sim.exampleMesh, schedule)
      assert.strictEqual(sound.violation, undefined)
      assert.isTrue(sound.network.some((l) => l.faults.includes("Duplicate")))
    }), 180_000)

  it.live("a failing schedule with the planted bug is shrunk to the event it needs, and the shrunk schedule replays the failure", () =>
    Effect.gen(function* () {
      // Faults of every kind, one of which (request 10, the direct call to the shop, delivered twice) breaks the planted shop.
      const schedule: Sim.Schedule = [
        { _tag: "ClockJump", before: 1, millis: 1_000 },
        { _tag: "Net", request: 10, fault: { _tag: "Duplicate" } },
        { _tag: "Crash", target: "bank", before: 3 },
        { _tag: "ProviderError", call: 0, code: "PROVIDER_UNAVAILABLE" }
      ]
      const found = yield* Sim.run(planted, schedule)
      assert.strictEqual(found.violation?.invariant, "replay")
      const shrunk = yield* Sim.shrink(planted, schedule, found)
      assert.deepStrictEqual(shrunk.schedule, [{ _tag: "Net", request: 10, fault: { _tag: "Duplicate" } }])
      const replayed = yield* Sim.run(planted, shrunk.schedule)
      assert.deepStrictEqual(replayed.violation, shrunk.report.violation)
      assert.strictEqual(replayed.digest, shrunk.report.digest)
    }), 300_000)

  it.live("an agent that skips its task guard runs a gated capability without approval; the run reports it", () =>
    Effect.gen(function* () {
      // Action 6 is the bank's gated call: the bank answers it at once, before any approval was asked for.
      const report = yield* Sim.run(Sim.withFlaws(Sim.exampleMesh, "bank", ["skips-gates"]), [])
      assert.strictEqual(report.violation?.invariant, "gate")
      assert.strictEqual(report.violation?.action, 6)
    }), 180_000)

  it("the schedule of a seed is the same every time, and seeds differ", () => {
    assert.deepStrictEqual(Sim.scheduleOf(42, Sim.exampleMesh), Sim.scheduleOf(42, Sim.exampleMesh))
    assert.notDeepEqual(Sim.scheduleOf(42, Sim.exampleMesh), Sim.scheduleOf(43, Sim.exampleMesh))
  })
})

/** A seed whose schedule (crashes of the shop, duplicates, a dropped response) the sound example mesh survives. */
const GATE_SEED = 4

/** The example mesh with a shop that runs its gated capabilities without asking the task guard. */
const skipsGates = Sim.withFlaws(Sim.exampleMesh, "shop", ["skips-gates"])

/** A mesh whose workload is gated calls only, one for each thing the human may do with the approval request. */
const gatedOnly: Sim.MeshSpec = {
  ...Sim.exampleMesh,
  workload: [
    { _tag: "Gated", agent: "bank", capability: "wire", approval: "approve" },
    { _tag: "Gated", agent: "bank", capability: "wire", approval: "deny" },
    { _tag: "Gated", agent: "shop", capability: "refund", approval: "forged" },
    { _tag: "Gated", agent: "shop", capability: "refund", approval: "withheld" }
  ]
}

describe("Simulation: human gates", () => {
  it.live("a gated capability pauses for its approval and runs only once the grantor approves", () =>
    Effect.gen(function* () {
      const report = yield* Sim.run(gatedOnly, [])
      assert.strictEqual(report.violation, undefined)
      assert.deepStrictEqual(report.actions, [
        "0 Gated: gated call approve, resume answered",
        "1 Gated: gated call deny, resume failed HUMAN_GATE_DENIED",
        "2 Gated: gated call forged, resume failed APPROVAL_WRONG_SIGNER",
        "3 Gated: gated call paused, approval withheld"
      ])
    }), 60_000)

  it.live("an agent that skips its gates is found, the schedule shrunk to no fault at all, and the replay fails the same", () =>
    Effect.gen(function* () {
      const schedule = Sim.scheduleOf(GATE_SEED, skipsGates, { requests: 40 })
      assert.isAbove(schedule.length, 0)
      const found = yield* Sim.run(skipsGates, schedule)
      assert.strictEqual(found.violation?.invariant, "gate")
      // The flaw needs no fault: every event of the schedule goes.
      const shrunk = yield* Sim.shrink(skipsGates, schedule, found)
      assert.deepStrictEqual(shrunk.schedule, [])
      assert.strictEqual(shrunk.report.violation?.invariant, "gate")
      const replayed = yield* Sim.run(skipsGates, shrunk.schedule)
      assert.deepStrictEqual(replayed.violation, shrunk.report.violation)
      assert.strictEqual(replayed.digest, shrunk.report.digest)
      // The sound shop pauses at the same gate and breaks nothing.
      const sound = yield* Sim.run(Sim.exampleMesh, schedule)
      assert.strictEqual(sound.violation, undefined)
    }), 120_000)
})

describe("Simulation: one run at a time", () => {
  it.live("a run started while another is in progress in the process dies instead of sharing its seeded globals", () =>
    Effect.gen(function* () {
      const [first, second] = yield* Effect.all([Effect.exit(Sim.run(Sim.exampleMesh, [])), Effect.exit(Sim.run(Sim.exampleMesh, []))], { concurrency: 2 })
      assert.isTrue(Exit.isSuccess(first))
      assert.isTrue(Exit.isFailure(second) && Cause.isDie(second.cause))
      // The guard is released with the run: the next run proceeds.
      const after = yield* Sim.run(Sim.exampleMesh, [])
      assert.strictEqual(after.violation, undefined)
    }), 180_000)
})

/** What the example mesh's workload reports with no fault at all: a crash of the hub must change none of it. */
const UNFAULTED = [
  "0 Saga: saga committed",
  "1 Call: call answered",
  "2 Chat: chat answered by large",
  "3 Saga: saga compensated",
  "4 Call: call answered",
  "5 Chat: chat answered by large",
  "6 Gated: gated call approve, resume answered",
  "7 Gated: gated call forged, resume failed APPROVAL_WRONG_SIGNER"
]

describe("Simulation: the hub crashes mid-saga", () => {
  it.live("each saga resumes in the restarted hub and ends final, each step's work runs once, each pool balances to the micro-dollar", () =>
    Effect.gen(function* () {
      // Request 3 is the shop's look-up at the hub while it runs the first saga's first step (the hub dies with the step
      // call unanswered, and the shop finishes it for nobody); request 18 is the second saga's compensation of its
      // first step, sent by the hub (it dies as the call goes out, and the next hub compensates again).
      const schedule: Sim.Schedule = [
        { _tag: "CrashDuring", target: "hub", request: 3 },
        { _tag: "CrashDuring", target: "hub", request: 18 }
      ]
      const report = yield* Sim.run(Sim.exampleMesh, schedule)
      assert.strictEqual(report.violation, undefined, report.violation?.message)
      assert.deepStrictEqual(report.crashes, ["hub crashed on request 3 with 1 saga(s) in flight", "hub crashed on request 18 with 1 saga(s) in flight"])
      assert.deepStrictEqual(report.actions, UNFAULTED)
      const again = yield* Sim.run(Sim.exampleMesh, schedule)
      assert.strictEqual(again.digest, report.digest)
    }), 120_000)

  it.live("a shop that forgets its stored replies runs the resumed step's work a second time; the run reports it", () =>
    Effect.gen(function* () {
      // The hub dies while the shop runs the first step; the next hub calls the step again under the same key.
      const schedule: Sim.Schedule = [{ _tag: "CrashDuring", target: "hub", request: 3 }]
      const report = yield* Sim.run(Sim.withFlaws(Sim.exampleMesh, "shop", ["forgets-replies"]), schedule)
      assert.strictEqual(report.violation?.invariant, "saga")
      assert.strictEqual(report.violation?.action, 0)
      assert.match(report.violation?.message ?? "", /s0-reserve\|reserve/)
    }), 120_000)

  it("generated schedules crash the hub as a request goes out", () => {
    const crashes = Array.from({ length: 40 }, (_, i) => Sim.scheduleOf(i + 1, Sim.exampleMesh, { requests: 40 }))
      .flat()
      .filter((e) => e._tag === "CrashDuring" && e.target === "hub")
    assert.isAbove(crashes.length, 5)
  })

  it.live("a generated schedule whose hub crash lands in a saga holds every invariant (seed 34: two crashes, in both sagas)", () =>
    Effect.gen(function* () {
      const report = yield* Sim.runSeed(Sim.exampleMesh, 34, { requests: 40 })
      assert.strictEqual(report.violation, undefined, report.violation?.message)
      assert.deepStrictEqual(report.crashes, ["hub crashed on request 14 with 1 saga(s) in flight", "hub crashed on request 21 with 1 saga(s) in flight"])
    }), 120_000)
})
