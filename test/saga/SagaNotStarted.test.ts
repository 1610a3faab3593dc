/**
 * A saga stored but never handed to the engine (its hub died between the two, before answering) is ended by the
 * sweep as `compensated`, code `NOT_STARTED`, with no step run; a saga the engine did start is never taken for one,
 * however long it runs. The orphan is written straight into the hub's database, as the killed hub would have left it.
 */
import { assert, describe, it } from "@effect/vitest"
import BetterSqlite3 from "better-sqlite3"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as KeysNative from "../../src/node/KeysNative.js"
import type { RunInput } from "../../src/agent/Handler.js"
import { tempDatabase } from "../hub/support.js"
import { countingHandler, step, world } from "./support.js"

describe("sagas never started", { timeout: 60_000 }, () => {
  it.live("are ended NOT_STARTED by the sweep; a started saga that runs long is left running", () =>
    Effect.gen(function* () {
      const database = tempDatabase()
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const w = yield* world({
        database,
        agents: [{ name: "hotel" }],
        notStartedAfterMs: 600,
        handler: (effects, spec) => {
          const counting = countingHandler(effects, spec)
          return async (input: RunInput) => {
            await Effect.runPromise(Deferred.succeed(entered, undefined))
            await Effect.runPromise(Deferred.await(gate))
            return counting(input)
          }
        }
      })
      const started = yield* w.hub.scheduler.submit(w.buyer.did, { mandate: yield* w.mandate(), steps: [step(w.agents, "hotel", "hotel", "book-hotel", 10)] })
      yield* Deferred.await(entered)
      // What a hub killed between storing a saga and starting its workflow leaves behind.
      const db = new BetterSqlite3(database)
      db.prepare(`INSERT INTO mesh_sagas SELECT 'saga_orphan', caller, runner, mandate, pool_id, definition, 'running', NULL, NULL, created_at, updated_at
        FROM mesh_sagas WHERE id = ?`).run(started.sagaId)
      db.prepare(`INSERT INTO mesh_saga_steps (saga_id, idx, name, status) SELECT 'saga_orphan', idx, name, 'pending' FROM mesh_saga_steps WHERE saga_id = ?`).run(started.sagaId)
      db.close()

      const orphan = yield* w.hub.scheduler.get("saga_orphan").pipe(
        Effect.flatMap((r) => (r.status === "running" ? Effect.fail("still running" as const) : Effect.succeed(r))),
        Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(300)))),
        Effect.orDie
      )
      assert.deepStrictEqual([orphan.status, orphan.errorCode, orphan.steps.map((s) => s.status)], ["compensated", "NOT_STARTED", ["pending"]])
      // The started saga is older than the orphan, so the sweep that ended the orphan looked at it too.
      assert.strictEqual((yield* w.hub.scheduler.get(started.sagaId)).status, "running")
      yield* Deferred.succeed(gate, undefined)
      const ended = yield* w.hub.scheduler.await(started.sagaId)
      assert.strictEqual(ended.status, "committed")
      assert.deepStrictEqual([...w.effects.values()], [1])
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
