import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Database from "../src/sql/Database.js"
import { type PausedTask, TaskStore, type TaskStoreApi, layerMemory } from "../src/core/TaskStore.js"
import * as TaskStoreSql from "../src/sql/TaskStoreSql.js"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-task-")), "mesh.db")
const sqlStore = (filename: string) => TaskStoreSql.layer.pipe(Layer.provideMerge(Database.layerSqlite(filename)))

/** A paused task at a gate; expires at `expiresAt` (epoch ms). */
const task = (taskId: string, over: Partial<PausedTask> = {}): PausedTask => ({
  taskId,
  owner: "did:mesh:agent",
  capability: "send_email",
  mandateJti: "jti-1",
  grantor: "did:mesh:alice",
  mandate: "header.payload.signature",
  state: { input: { to: "bob@example.com" }, journal: [{ step: 1, result: "drafted" }] },
  createdAt: 0,
  expiresAt: 1e12,
  ...over
})

// One contract, every layer: what a caller of `TaskStore` may rely on whichever store is behind it.
const contract = (name: string, layer: () => Layer.Layer<TaskStore, unknown>) =>
  describe(`TaskStore contract (${name})`, () => {
    const withStore = <A, E>(f: (store: TaskStoreApi) => Effect.Effect<A, E>) =>
      Effect.flatMap(TaskStore, f).pipe(Effect.provide(layer()))

    it.effect("charges up to the limit and no further; a charge is all or nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          yield* store.charge([{ scope: "m1", counter: "action:x", amount: 2, limit: 3 }], 1e12)
          yield* store.charge([{ scope: "m1", counter: "action:x", amount: 1, limit: 3 }], 1e12)
          const e = yield* Effect.flip(store.charge([{ scope: "m1", counter: "action:x", amount: 1, limit: 3 }], 1e12))
          assert.strictEqual(e._tag, "CounterLimitReached")
          // Two counters: the second is full, so the first does not move either.
          yield* store.charge([{ scope: "m2", counter: "compute:llmTokens", amount: 10, limit: 10 }], 1e12)
          const both = yield* Effect.flip(store.charge([
            { scope: "m1", counter: "compute:llmTokens", amount: 5, limit: 100 },
            { scope: "m2", counter: "compute:llmTokens", amount: 1, limit: 10 }
          ], 1e12))
          assert.strictEqual(both._tag, "CounterLimitReached")
          assert.strictEqual(yield* store.used("m1", "compute:llmTokens"), 0)
          assert.strictEqual(yield* store.used("m1", "action:x"), 3)
          // An amount above its limit, or not an integer, is refused outright.
          assert.strictEqual((yield* Effect.flip(store.charge([{ scope: "m3", counter: "c", amount: 11, limit: 10 }], 1e12)))._tag, "CounterLimitReached")
          assert.strictEqual((yield* Effect.flip(store.charge([{ scope: "m3", counter: "c", amount: 0.5, limit: 10 }], 1e12)))._tag, "CounterLimitReached")
          assert.strictEqual(yield* store.used("m3", "c"), 0)
        })))

    it.effect("counters are apart per scope and per counter name; an unknown counter has used 0", () =>
      withStore((store) =>
        Effect.gen(function* () {
          assert.strictEqual(yield* store.used("m1", "action:x"), 0)
          yield* store.charge([{ scope: "m1", counter: "action:x", amount: 2, limit: 2 }], 1e12)
          yield* store.charge([{ scope: "m2", counter: "action:x", amount: 1, limit: 2 }], 1e12)
          yield* store.charge([{ scope: "m1", counter: "action:y", amount: 1, limit: 2 }], 1e12)
          const counts = yield* Effect.all([store.used("m1", "action:x"), store.used("m2", "action:x"), store.used("m1", "action:y")])
          assert.deepStrictEqual(counts, [2, 1, 1])
        })))

    it.effect("counters of expired mandates are swept eventually, live ones never", () =>
      withStore((store) =>
        Effect.gen(function* () {
          yield* store.charge([{ scope: "old", counter: "c", amount: 1, limit: 1 }], 1_000)
          yield* store.charge([{ scope: "live", counter: "c", amount: 1, limit: 1 }], 10_000)
          yield* TestClock.setTime(5_000)
          // Sweeps run every 1024 charges.
          for (let i = 0; i < 1024; i++) yield* store.charge([{ scope: `filler-${i}`, counter: "c", amount: 1, limit: 1 }], 10_000)
          assert.strictEqual(yield* store.used("old", "c"), 0)
          assert.strictEqual(yield* store.used("live", "c"), 1)
        })))

    it.effect("many fibers racing for the last units: exactly `limit` charges win", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const results = yield* Effect.forEach(
            Array.from({ length: 200 }, (_, i) => i),
            () => Effect.either(store.charge([{ scope: "race", counter: "action:send", amount: 1, limit: 7 }], 1e12)),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r._tag === "Right").length, 7)
          assert.strictEqual(yield* store.used("race", "action:send"), 7)
          const last = yield* Effect.forEach(
            Array.from({ length: 50 }, (_, i) => i),
            () => Effect.either(store.charge([{ scope: "race", counter: "last", amount: 1, limit: 1 }], 1e12)),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(last.filter((r) => r._tag === "Right").length, 1)
        })))

    it.effect("adjust gives back down to 0 and charges an overrun up to the limit, never failing on it", () =>
      withStore((store) =>
        Effect.gen(function* () {
          yield* store.charge([{ scope: "m1", counter: "compute:llmTokens", amount: 80, limit: 100 }], 1e12)
          yield* store.adjust([{ scope: "m1", counter: "compute:llmTokens", delta: -30, limit: 100 }], 1e12)
          assert.strictEqual(yield* store.used("m1", "compute:llmTokens"), 50)
          yield* store.adjust([{ scope: "m1", counter: "compute:llmTokens", delta: 70, limit: 100 }], 1e12)
          assert.strictEqual(yield* store.used("m1", "compute:llmTokens"), 100)
          yield* store.adjust([{ scope: "m1", counter: "compute:llmTokens", delta: -500, limit: 100 }], 1e12)
          assert.strictEqual(yield* store.used("m1", "compute:llmTokens"), 0)
          // A counter never charged starts from 0; malformed adjustments are ignored.
          yield* store.adjust([{ scope: "m2", counter: "c", delta: 7, limit: 5 }, { scope: "m3", counter: "c", delta: 0.5, limit: 5 }], 1e12)
          assert.deepStrictEqual(yield* Effect.all([store.used("m2", "c"), store.used("m3", "c")]), [5, 0])
          // What was given back can be charged again, up to the limit.
          yield* store.charge([{ scope: "m2", counter: "c", amount: 5, limit: 10 }], 1e12)
          assert.strictEqual((yield* Effect.flip(store.charge([{ scope: "m2", counter: "c", amount: 1, limit: 10 }], 1e12)))._tag, "CounterLimitReached")
        })))

    it.effect("concurrent reservations and settlements never take a counter past its limit", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const limit = 1_000
          // Each call reserves 60, then settles at 10..69: some give back, some overrun.
          yield* Effect.forEach(Array.from({ length: 60 }, (_, i) => i), (i) =>
            store.charge([{ scope: "m", counter: "t", amount: 60, limit }], 1e12).pipe(
              Effect.zipRight(store.adjust([{ scope: "m", counter: "t", delta: 10 + i - 60, limit }], 1e12)),
              Effect.zipRight(Effect.flatMap(store.used("m", "t"), (used) => Effect.sync(() => assert.isAtMost(used, limit)))),
              Effect.ignore
            ), { concurrency: "unbounded", discard: true })
          assert.isAtMost(yield* store.used("m", "t"), limit)
        })))

    it.effect("paused tasks: pause, look up, claim once; a second claim is TASK_ALREADY_RESUMED", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const t = task("t-1")
          yield* store.pause(t)
          const found = yield* store.paused("t-1")
          assert.deepStrictEqual(found, Option.some({ ...t, status: "paused" as const }))
          const claimed = yield* store.claim("t-1", "resumed")
          assert.deepStrictEqual(claimed, t)
          assert.strictEqual(Option.getOrThrow(yield* store.paused("t-1")).status, "resumed")
          const again = yield* Effect.flip(store.claim("t-1", "resumed"))
          assert.strictEqual(again._tag, "TaskNotPaused")
          assert.strictEqual(again.code, "TASK_ALREADY_RESUMED")
          assert.strictEqual(again._tag === "TaskNotPaused" ? again.status : undefined, "resumed")
          // Cancelling is the other way out, equally final.
          yield* store.pause(task("t-2"))
          yield* store.claim("t-2", "cancelled")
          const afterCancel = yield* Effect.flip(store.claim("t-2", "resumed"))
          assert.deepStrictEqual([afterCancel.code, afterCancel._tag === "TaskNotPaused" ? afterCancel.status : undefined], ["TASK_ALREADY_RESUMED", "cancelled"])
          assert.strictEqual((yield* Effect.flip(store.claim("nope", "resumed"))).code, "TASK_NOT_FOUND")
          assert.isTrue(Option.isNone(yield* store.paused("nope")))
        })))

    it.effect("a task id is never reused, even once finished; a task that is not JSON is refused", () =>
      withStore((store) =>
        Effect.gen(function* () {
          yield* store.pause(task("t-1"))
          assert.strictEqual((yield* Effect.flip(store.pause(task("t-1", { capability: "other" })))).code, "TASK_ID_TAKEN")
          yield* store.claim("t-1", "resumed")
          assert.strictEqual((yield* Effect.flip(store.pause(task("t-1")))).code, "TASK_ID_TAKEN")
          assert.strictEqual(Option.getOrThrow(yield* store.paused("t-1")).status, "resumed")
          const cyclic: Record<string, unknown> = {}
          cyclic.self = cyclic
          for (const bad of [task("t-2", { state: cyclic }), task("t-3", { state: 1n }), task("t-4", { state: undefined }), task("", {}), task("t-5", { expiresAt: NaN })]) {
            assert.strictEqual((yield* Effect.flip(store.pause(bad))).code, "INVALID_TASK")
          }
          assert.isTrue(Option.isNone(yield* store.paused("t-2")))
        })))

    it.effect("state is stored as JSON: later changes to the caller's object do not leak in", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const state = { journal: [1, 2], when: new Date(0), gone: undefined }
          yield* store.pause(task("t-1", { state }))
          state.journal.push(3)
          const stored = Option.getOrThrow(yield* store.paused("t-1")).state
          assert.deepStrictEqual(stored, { journal: [1, 2], when: "1970-01-01T00:00:00.000Z" })
          assert.deepStrictEqual((yield* store.claim("t-1", "resumed")).state, stored)
        })))

    it.effect("concurrent claims on one task: exactly one wins", () =>
      withStore((store) =>
        Effect.gen(function* () {
          yield* store.pause(task("race"))
          const results = yield* Effect.forEach(
            Array.from({ length: 100 }, (_, i) => i),
            (i) => Effect.either(store.claim("race", i % 3 === 0 ? "cancelled" : "resumed")),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r._tag === "Right").length, 1)
          const codes = new Set(results.flatMap((r) => (r._tag === "Left" ? [r.left.code] : [])))
          assert.deepStrictEqual([...codes], ["TASK_ALREADY_RESUMED"])
        })))

    it.effect("a task cannot be claimed from its expiry on; expired rows are purged eventually, live ones never", () =>
      withStore((store) =>
        Effect.gen(function* () {
          yield* store.pause(task("soon", { expiresAt: 10_000 }))
          yield* store.pause(task("done", { expiresAt: 10_000 }))
          yield* store.pause(task("live", { expiresAt: 1e12 }))
          yield* TestClock.setTime(9_999)
          yield* store.claim("done", "resumed")
          yield* TestClock.setTime(10_000)
          const e = yield* Effect.flip(store.claim("soon", "resumed"))
          assert.strictEqual(e.code, "TASK_EXPIRED")
          // Expired but not purged yet: still shown, still refused, and a finished one still says so.
          assert.strictEqual(Option.getOrThrow(yield* store.paused("soon")).status, "paused")
          assert.strictEqual((yield* Effect.flip(store.claim("done", "resumed"))).code, "TASK_ALREADY_RESUMED")
          for (let i = 0; i < 1024; i++) yield* store.pause(task(`filler-${i}`, { expiresAt: 20_000 }))
          assert.isTrue(Option.isNone(yield* store.paused("soon")))
          assert.isTrue(Option.isNone(yield* store.paused("done")))
          assert.strictEqual((yield* Effect.flip(store.claim("soon", "resumed"))).code, "TASK_NOT_FOUND")
          assert.deepStrictEqual(yield* store.claim("live", "resumed"), task("live", { expiresAt: 1e12 }))
        })))
  })

contract("memory", () => layerMemory)
contract("SQL", () => sqlStore(":memory:"))

describe("TaskStore (sql, restart)", () => {
  it.effect("counters survive closing and reopening the database file", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const charge = (amount: number) =>
        Effect.flatMap(TaskStore, (s) => Effect.either(s.charge([{ scope: "m", counter: "action:pay", amount, limit: 5 }], 1e12)))
      // Each Effect.provide builds the layer in its own scope and closes it (and the database) afterwards.
      const first = yield* Effect.provide(Effect.all([charge(3), charge(1)]), sqlStore(file))
      assert.deepStrictEqual(first.map((r) => r._tag), ["Right", "Right"])
      const second = yield* Effect.provide(
        Effect.all([Effect.flatMap(TaskStore, (s) => s.used("m", "action:pay")), charge(2), charge(1), charge(1)]),
        sqlStore(file)
      )
      assert.strictEqual(second[0], 4)
      assert.deepStrictEqual(second.slice(1).map((r) => (typeof r === "number" ? r : r._tag)), ["Left", "Right", "Left"])
    }))
})

describe("TaskStore (sql, restart): paused tasks", () => {
  it.effect("a paused task survives closing and reopening the database file, and resumes once across restarts", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const t = task("t-restart", { state: { journal: ["drafted"], attempt: 2 } })
      yield* Effect.provide(Effect.flatMap(TaskStore, (s) => s.pause(t)), sqlStore(file))
      const [found, claimed] = yield* Effect.provide(
        Effect.flatMap(TaskStore, (s) => Effect.all([s.paused("t-restart"), s.claim("t-restart", "resumed")])),
        sqlStore(file)
      )
      assert.deepStrictEqual(found, Option.some({ ...t, status: "paused" as const }))
      assert.deepStrictEqual(claimed, t)
      const [after, again] = yield* Effect.provide(
        Effect.flatMap(TaskStore, (s) => Effect.all([s.paused("t-restart"), Effect.flip(s.claim("t-restart", "resumed"))])),
        sqlStore(file)
      )
      assert.strictEqual(Option.getOrThrow(after).status, "resumed")
      assert.strictEqual(again.code, "TASK_ALREADY_RESUMED")
    }))

  it.effect("two connections on one file (as two processes would be): one claim wins between them", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.provide(Effect.flatMap(TaskStore, (s) => s.pause(task("shared"))), sqlStore(file))
      const [a, b] = yield* Effect.all([Layer.build(sqlStore(file)), Layer.build(sqlStore(file))]).pipe(
        Effect.map((ctxs) => ctxs.map((ctx) => Context.get(ctx, TaskStore)))
      )
      const results = yield* Effect.forEach(
        Array.from({ length: 40 }, (_, i) => i),
        (i) => Effect.either((i % 2 === 0 ? a! : b!).claim("shared", "resumed")),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter((r) => r._tag === "Right").length, 1)
    }).pipe(Effect.scoped))
})
