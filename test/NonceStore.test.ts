import { assert, describe, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Database from "../src/sql/Database.js"
import { generateDid } from "../src/core/Did.js"
import { buildEnvelope, validateEnvelope } from "../src/core/Envelope.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { layerMemory, makeMemory, NonceStore } from "../src/core/NonceStore.js"
import * as NonceStoreSql from "../src/sql/NonceStoreSql.js"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-nonces-")), "mesh.db")
const sqlStore = (filename: string) => NonceStoreSql.layer.pipe(Layer.provideMerge(Database.layerSqlite(filename)))

// One contract, every layer: what a caller of `NonceStore` may rely on whichever store is behind it.
const layers: ReadonlyArray<readonly [string, (options: { readonly perSenderQuota?: number }) => Layer.Layer<NonceStore>]> = [
  ["memory", (options) => layerMemory(options)],
  ["SQL", (options) => NonceStoreSql.layerWith(options).pipe(Layer.provide(Database.layerSqlite(":memory:")), Layer.orDie)],
  // A file: the record statement runs prepared on the HotReads connection.
  ["SQL file", (options) => NonceStoreSql.layerWith(options).pipe(Layer.provide(Database.layerSqlite(tempDb())), Layer.orDie)]
]

for (const [name, layerOf] of layers) {
  describe(`NonceStore contract (${name})`, () => {
    it.effect("refuses a live repeat of a (sender, nonce) pair, allows it after expiry; other senders are apart", () =>
      Effect.gen(function* () {
        const store = yield* NonceStore
        yield* store.record("did:mesh:a", "n1", 1000)
        assert.strictEqual((yield* Effect.flip(store.record("did:mesh:a", "n1", 1000)))._tag, "NonceReplayed")
        yield* store.record("did:mesh:b", "n1", 1000)
        yield* TestClock.setTime(1000)
        yield* store.record("did:mesh:a", "n1", 2000)
      }).pipe(Effect.provide(layerOf({}))))

    it.effect("holds at most perSenderQuota live nonces per sender; a replay is still told apart; other senders are unaffected", () =>
      Effect.gen(function* () {
        const store = yield* NonceStore
        yield* store.record("did:mesh:a", "n1", 1000)
        yield* store.record("did:mesh:a", "n2", 5000)
        const over = yield* Effect.flip(store.record("did:mesh:a", "n3", 5000))
        assert.strictEqual(over._tag, "NonceQuotaExceeded")
        assert.strictEqual(over._tag === "NonceQuotaExceeded" ? over.retryAfterMs : -1, 1000)
        assert.strictEqual((yield* Effect.flip(store.record("did:mesh:a", "n2", 5000)))._tag, "NonceReplayed")
        for (const n of ["x", "y"]) yield* store.record("did:mesh:b", n, 5000)
        yield* TestClock.setTime(1000)
        yield* store.record("did:mesh:a", "n3", 5000) // n1 expired: room again
      }).pipe(Effect.provide(layerOf({ perSenderQuota: 2 }))))
  })
}

describe("NonceStore (memory)", () => {
  it.effect("when full of live nonces it refuses new ones instead of forgetting; expired ones make room", () =>
    Effect.gen(function* () {
      const store = makeMemory({ capacity: 3 })
      yield* store.record("s1", "a", 1000)
      yield* store.record("s2", "b", 5000)
      yield* store.record("s3", "c", 5000)
      assert.strictEqual((yield* Effect.flip(store.record("s4", "d", 5000)))._tag, "NonceStoreFull")
      // The live ones are still remembered.
      assert.strictEqual((yield* Effect.flip(store.record("s2", "b", 5000)))._tag, "NonceReplayed")
      yield* TestClock.setTime(1000)
      yield* store.record("s4", "d", 5000) // "a" expired and was swept
      assert.strictEqual((yield* Effect.flip(store.record("s5", "e", 5000)))._tag, "NonceStoreFull")
    }))
})

describe("NonceStore (memory) quotas and eviction", () => {
  it.effect("counts what it holds: an expired nonce is swept to make room for the sender's next", () =>
    Effect.gen(function* () {
      const store = makeMemory({ capacity: 10, perSenderQuota: 2 })
      yield* store.record("did:mesh:a", "n1", 1000)
      yield* store.record("did:mesh:a", "n2", 5000)
      for (const n of ["x", "y"]) yield* store.record("did:mesh:b", n, 5000)
      assert.strictEqual(store.size(), 4)
      yield* TestClock.setTime(1000)
      yield* store.record("did:mesh:a", "n3", 5000)
      assert.strictEqual(store.size(), 4)
    }))

  it.effect("the default quota is 1/16 of the capacity", () =>
    Effect.gen(function* () {
      const store = makeMemory({ capacity: 64 })
      for (let i = 0; i < 4; i++) yield* store.record("did:mesh:a", `n${i}`, 1000)
      assert.strictEqual((yield* Effect.flip(store.record("did:mesh:a", "n4", 1000)))._tag, "NonceQuotaExceeded")
    }))

  it.effect("evicts expired entries as it goes, so it holds the live window and not its capacity", () =>
    Effect.gen(function* () {
      const store = makeMemory({ capacity: 100_000, perSenderQuota: 100_000 })
      for (let i = 0; i < 4000; i++) yield* store.record("did:mesh:a", `old${i}`, 100)
      assert.strictEqual(store.size(), 4000)
      yield* TestClock.setTime(200)
      for (let i = 0; i < 200; i++) yield* store.record("did:mesh:a", `new${i}`, 10_000)
      assert.isAtMost(store.size(), 200)
    }))
})

describe("NonceStore (SQL)", () => {
  it.effect("migrations ran and are recorded", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM mesh_migrations ORDER BY migration_id`
      assert.deepStrictEqual(rows[0], { migration_id: 1, name: "nonces" })
      // Running them again is a no-op.
      assert.deepStrictEqual(yield* Database.migrate, [])
    }).pipe(Effect.provide(Database.layerSqlite(":memory:"))))

  it.effect("refuses a replay after a restart", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const alice = yield* generateDid("alice")
      const bob = yield* generateDid("bob")
      yield* TestClock.setTime(1_800_000_000_000)
      const env = yield* buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body: {}, privateKey: alice.privateKey })
      const validateWithFreshProcess = Effect.scoped(
        Effect.flatMap(Layer.build(sqlStore(file)), (ctx) =>
          Effect.either(validateEnvelope(env, alice.publicKeyBytes, bob.did, Context.get(ctx, NonceStore)))
        )
      )
      assert.strictEqual((yield* validateWithFreshProcess)._tag, "Right")
      const second = yield* validateWithFreshProcess
      assert.isTrue(second._tag === "Left" && second.left.code === "REPLAYED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("exactly one of 100 concurrent records of the same pair wins; expired rows are taken over", () =>
    Effect.gen(function* () {
      const store = yield* NonceStore
      const results = yield* Effect.forEach(Array.from({ length: 100 }), () => Effect.either(store.record("did:mesh:a", "same", 10_000)), { concurrency: "unbounded" })
      assert.strictEqual(results.filter((r) => r._tag === "Right").length, 1)
      yield* TestClock.setTime(10_000)
      yield* store.record("did:mesh:a", "same", 20_000)
      assert.strictEqual((yield* Effect.flip(store.record("did:mesh:a", "same", 20_000)))._tag, "NonceReplayed")
    }).pipe(Effect.provide(sqlStore(":memory:"))))

  it.effect("purges expired rows on a schedule (every purgeIntervalMs), in chunks, keeping the live ones and the counts", () =>
    Effect.gen(function* () {
      const store = yield* NonceStore
      const sql = yield* SqlClient.SqlClient
      const count = Effect.map(sql<{ n: number }>`SELECT count(*) AS n FROM mesh_nonces`, (rows) => rows[0]!.n)
      const expired = 2 * NonceStoreSql.PURGE_CHUNK + 500
      yield* Effect.forEach(Array.from({ length: expired }, (_, i) => i), (i) => store.record(`s${i % 2}`, `n${i}`, 100))
      yield* store.record("t", "live", 120_000)
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual(yield* count, expired + 1)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* count, 1)
      assert.deepStrictEqual(yield* sql<{ sender: string; held: number }>`SELECT sender, held FROM mesh_nonce_senders`, [{ sender: "t", held: 1 }])
    }).pipe(Effect.provide(NonceStoreSql.layerWith({ perSenderQuota: 2000 }).pipe(Layer.provideMerge(Database.layerSqlite(":memory:"))))))
})

describe("NonceStore (SQL) quota by count", () => {
  // A sender's quota used to be a COUNT of its live rows in the record statement: a step per nonce it holds, a
  // millisecond per request for a sender near the default quota. It is now one keyed read of its count.
  it.effect("the record statement reads the sender's count by key and visits none of its nonces", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const plan = yield* sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${NonceStoreSql.RECORD_SQLITE}`, ["s", "n", 1, "s", 10, 0])
      const details = plan.map((r) => r.detail)
      assert.isTrue(details.some((d) => /^SEARCH mesh_nonce_senders USING PRIMARY KEY \(sender=\?\)$/.test(d)), details.join("; "))
      assert.isFalse(details.some((d) => /mesh_nonces\b/.test(d) || d.startsWith("SCAN mesh")), details.join("; "))
    }).pipe(Effect.provide(Database.layerSqlite(":memory:"))))

  it.effect("the purge reaches expired rows through each sender's range, scanning no table", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const plan = yield* sql<{ detail: string }>`EXPLAIN QUERY PLAN DELETE FROM mesh_nonces WHERE (sender, nonce) IN (
        SELECT sender, nonce FROM mesh_nonces WHERE sender IN (SELECT sender FROM mesh_nonce_senders) AND expires_at <= ${0} LIMIT ${1000})`
      const details = plan.map((r) => r.detail)
      assert.isTrue(details.some((d) => /SEARCH mesh_nonces USING (COVERING )?INDEX mesh_nonces_sender_expires \(sender=\? AND expires_at<\?\)/.test(d)), details.join("; "))
      assert.isFalse(details.some((d) => d.startsWith("SCAN mesh_nonces ")), details.join("; "))
    }).pipe(Effect.provide(Database.layerSqlite(":memory:"))))

  // SQLite checkpoints its WAL automatically only from a statement stepped to its end; a write read with `get` never
  // was, so records on the prepared statement grew the WAL by every page they wrote until a SqlClient write came.
  it.effect("records on the prepared statement keep the WAL at its checkpoint size", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* NonceStore
          for (let i = 0; i < 3_000; i++) yield* store.recordAt!(`did:mesh:s${i % 50}`, `n${i}`, 4_000_000_000_000, 0)
          // 1 000 pages of 4 KiB before a checkpoint, and the pages of the record that crossed it.
          assert.isBelow(fs.statSync(`${file}-wal`).size, 1_100 * 4_096)
        }).pipe(Effect.provide(sqlStore(file)))
      )
    }))

  // Every outcome as a model of live pairs says (a replay, else the quota over live pairs, else recorded), and the
  // count each sender is judged by stays the number of rows it holds, through take-overs, refusals and purges.
  it.live("outcomes follow the live pairs exactly, and each sender's count is the rows it holds", () =>
    Effect.gen(function* () {
      const store = yield* NonceStore
      const sql = yield* SqlClient.SqlClient
      const quota = 3
      let run = 0
      const command = fc.record({ sender: fc.integer({ min: 0, max: 2 }), nonce: fc.integer({ min: 0, max: 5 }), ttl: fc.integer({ min: 1, max: 40 }), advance: fc.integer({ min: 0, max: 15 }), purge: fc.boolean() })
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.array(command, { maxLength: 40 }), (commands) =>
            Effect.runPromise(Effect.gen(function* () {
              const prefix = `did:mesh:p${++run}-`
              const model = new Map<string, Map<string, number>>()
              // Far ahead of the clock the store purges by, so only the commands let rows go.
              let now = 4_000_000_000_000
              for (const c of commands) {
                now += c.advance
                const sender = `${prefix}${c.sender}`
                const pairs = model.get(sender) ?? new Map<string, number>()
                model.set(sender, pairs)
                const nonce = `n${c.nonce}`
                const live = [...pairs.values()].filter((until) => until > now)
                const expected = (pairs.get(nonce) ?? 0) > now ? "NonceReplayed" : live.length >= quota ? "NonceQuotaExceeded" : "recorded"
                const got = yield* Effect.either(store.recordAt!(sender, nonce, now + c.ttl, now))
                assert.strictEqual(got._tag === "Right" ? "recorded" : got.left._tag, expected)
                if (got._tag === "Left" && got.left._tag === "NonceQuotaExceeded") assert.strictEqual(got.left.retryAfterMs, Math.min(...live) - now)
                if (expected === "recorded") pairs.set(nonce, now + c.ttl)
                if (c.purge) {
                  yield* sql`DELETE FROM mesh_nonces WHERE sender LIKE ${`${prefix}%`} AND expires_at <= ${now}`
                  yield* sql`DELETE FROM mesh_nonce_senders WHERE held <= 0`
                }
                const counts = yield* sql<{ sender: string; held: number; rows: number }>`
                  SELECT s.sender, s.held, (SELECT COUNT(*) FROM mesh_nonces n WHERE n.sender = s.sender) AS rows
                  FROM mesh_nonce_senders s WHERE s.sender LIKE ${`${prefix}%`}`
                for (const row of counts) assert.strictEqual(row.held, row.rows, row.sender)
              }
            }))
          ),
          { numRuns: 60 }
        )
      )
    }).pipe(Effect.provide(NonceStoreSql.layerWith({ perSenderQuota: 3 }).pipe(Layer.provideMerge(Database.layerSqlite(tempDb())), Layer.orDie))))

  it.live("a record while a SqlClient transaction holds the file waits for it, then is committed", () =>
    Effect.gen(function* () {
      const store = yield* NonceStore
      const sql = yield* SqlClient.SqlClient
      // The record runs in a fiber of its own, as a request would (a fiber forked inside the transaction would share it).
      const go = yield* Deferred.make<void>()
      const recording = yield* Effect.fork(Effect.zipRight(Deferred.await(go), store.record("did:mesh:a", "n1", 4_000_000_000_000)))
      yield* sql.withTransaction(
        Effect.gen(function* () {
          // The transaction writes (it holds the lock), then yields with the record started.
          yield* sql`INSERT INTO mesh_nonces (sender, nonce, expires_at) VALUES ('did:mesh:t', 'tx', 4000000000000)`
          yield* Deferred.succeed(go, undefined)
          yield* Effect.yieldNow()
          const polled = yield* Fiber.poll(recording)
          assert.isTrue(Option.isNone(polled), `the record waits for the transaction: ${JSON.stringify(polled)}`)
        })
      )
      yield* Fiber.join(recording)
      assert.strictEqual((yield* Effect.flip(store.record("did:mesh:a", "n1", 4_000_000_000_000)))._tag, "NonceReplayed")
      const [row] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM mesh_nonces WHERE nonce IN ('tx', 'n1')`
      assert.strictEqual(row!.n, 2)
    }).pipe(Effect.provide(sqlStore(tempDb()))))

  it.effect("a replay is refused after a restart on the same file, through the prepared statement", () =>
    Effect.gen(function* () {
      const file = tempDb()
      const once = Effect.scoped(Effect.flatMap(Layer.build(sqlStore(file)), (ctx) => Effect.either(Context.get(ctx, NonceStore).recordAt!("did:mesh:a", "n1", 10_000, 0))))
      assert.strictEqual((yield* once)._tag, "Right")
      const again = yield* once
      assert.isTrue(again._tag === "Left" && again.left._tag === "NonceReplayed")
    }))
})

describe("memory store recordAt", () => {
  it.effect("records when its effect runs, not when it is made, judging at the time it is given", () =>
    Effect.gen(function* () {
      const store = makeMemory()
      const made = store.recordAt!("did:mesh:a", "n1", 1000, 0)
      assert.strictEqual(store.size(), 0)
      yield* made
      assert.strictEqual(store.size(), 1)
      assert.strictEqual((yield* Effect.flip(store.recordAt!("did:mesh:a", "n1", 1000, 999)))._tag, "NonceReplayed")
      // At the time given (not the clock's, still 0), the nonce has expired and is taken again.
      yield* store.recordAt!("did:mesh:a", "n1", 2000, 1000)
    }))
})
