import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Database from "../src/Database.js"
import { TaskStore, type TaskStoreApi, layerMemory } from "../src/TaskStore.js"
import * as TaskStoreSql from "../src/TaskStoreSql.js"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-task-")), "mesh.db")
const sqlStore = (filename: string) => TaskStoreSql.layer.pipe(Layer.provideMerge(Database.layerSqlite(filename)))

const contract = (name: string, layer: () => Layer.Layer<TaskStore, unknown>) =>
  describe(`TaskStore (${name})`, () => {
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
  })

contract("memory", () => layerMemory)
contract("sql", () => sqlStore(":memory:"))

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
