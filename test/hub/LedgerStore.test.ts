/**
 * The ledger's allocation statement on both paths (`reserve` through `SqlClient`, `reserveFast` on the prepared
 * `HotReads` connection): its expected refusals are recognised by classified reason, the same on both, and any
 * other failure stays a `PersistenceError` instead of passing for one of them.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as Database from "../../src/sql/Database.js"
import { KeyResolver } from "../../src/core/KeyResolver.js"
import { NotFound } from "../../src/hub/HubError.js"
import * as Ledger from "../../src/hub/Ledger.js"
import { type AllocationRow, reserve, reserveFast } from "../../src/hub/Ledger.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { tempDatabase } from "./support.js"

const row = (id: string, amount: number, child = id): typeof AllocationRow.Encoded => ({
  id, pool_id: "p", idempotency_key: id, child_jti: child, grantee: "did:mesh:c", amount_micros: amount, used_micros: null, created_at: 0, released_at: null
})

const paths = {
  "reserve (SqlClient)": Effect.map(SqlClient.SqlClient, (sql) => (r: typeof AllocationRow.Encoded) => reserve(sql, r)),
  "reserveFast (prepared)": Effect.map(Database.HotReads, reserveFast)
}

for (const [name, path] of Object.entries(paths)) {
  describe(`Ledger allocation statement: ${name}`, () => {
    const withPool = <A, E>(f: (insert: (r: typeof AllocationRow.Encoded) => ReturnType<typeof reserve>) => Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, opened_by, created_at)
          VALUES ('p', 't', 'did:mesh:a', 'did:mesh:b', 100, 0, 0, 'did:mesh:b', 0)`
        return yield* f(yield* path)
      }).pipe(Effect.provide(Database.layerSqlite(tempDatabase()).pipe(Layer.orDie)))

    it.effect("a pool that cannot cover the amount is exhausted (the budget trigger)", () =>
      withPool((insert) =>
        Effect.gen(function* () {
          assert.strictEqual(yield* insert(row("a1", 60)), "allocated")
          assert.strictEqual(yield* insert(row("a2", 60)), "exhausted")
        })))

    it.effect("a second allocation of one child under another key is duplicate-child", () =>
      withPool((insert) =>
        Effect.gen(function* () {
          assert.strictEqual(yield* insert(row("a1", 10, "child")), "allocated")
          assert.strictEqual(yield* insert(row("a2", 10, "child")), "duplicate-child")
        })))

    it.effect("the same idempotency key again is raced", () =>
      withPool((insert) =>
        Effect.gen(function* () {
          assert.strictEqual(yield* insert(row("a1", 10)), "allocated")
          assert.strictEqual(yield* insert({ ...row("a1", 10), id: "other" }), "raced")
        })))

    // SQLite checkpoints its WAL automatically only from a statement stepped to its end; the prepared INSERT …
    // RETURNING was read with `get`, which stops at the row, so allocations grew the WAL by every page they wrote.
    it.effect("allocations keep the WAL at its checkpoint size", () =>
      Effect.gen(function* () {
        const file = tempDatabase()
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* sql`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, opened_by, created_at)
            VALUES ('p', 't', 'did:mesh:a', 'did:mesh:b', 1000000000, 0, 0, 'did:mesh:b', 0)`
          const insert = yield* path
          for (let i = 0; i < 1_500; i++) assert.strictEqual(yield* insert(row(`a${i}`, 1)), "allocated")
          // 1 000 pages of 4 KiB before a checkpoint, and the pages of the allocation that crossed it.
          assert.isBelow(fs.statSync(`${file}-wal`).size, 1_100 * 4_096)
        }).pipe(Effect.provide(Database.layerSqlite(file).pipe(Layer.orDie)))
      }))

    it.effect("a NOT NULL failure is neither exhausted nor duplicate-child: a PersistenceError", () =>
      withPool((insert) =>
        Effect.gen(function* () {
          const e = yield* Effect.flip(insert(row("a1", 10, null as unknown as string)))
          assert.deepStrictEqual([e._tag, e.reason], ["PersistenceError", "NotNullViolation"])
        })))
  })
}

describe("Ledger service errors", () => {
  const ledger = Ledger.layer.pipe(
    Layer.provide(Layer.mergeAll(Database.layerSqlite(":memory:").pipe(Layer.orDie), Layer.mock(KeyResolver, {}), KeysNative.layer))
  )

  it.effect("an unknown pool is PoolNotFound with the spec's code, not the hub's HTTP NotFound", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip((yield* Ledger.Ledger).pool("did:mesh:b", "pool_nope"))
      assert.deepStrictEqual([e._tag, e.code], ["PoolNotFound", "NOT_FOUND"])
      assert.notInstanceOf(e, NotFound)
    }).pipe(Effect.provide(ledger)))
})
