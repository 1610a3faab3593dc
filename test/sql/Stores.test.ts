/**
 * One store suite, two engines: every SQL store against SQLite (a temp file) and against Postgres (a fresh
 * database), through `Database.layer(url)` as the hub and the agent server open it. Where it matters, two clients
 * of one database stand for two processes (hubs or agent replicas): a nonce recorded by one is a replay to the
 * other, a counter or a pool is exact across both, and a paused task is claimed once.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe } from "vitest"
import { AgentMemory } from "../../src/core/AgentMemory.js"
import { IdempotencyStore } from "../../src/core/IdempotencyStore.js"
import { NonceStore } from "../../src/core/NonceStore.js"
import { TaskStore } from "../../src/core/TaskStore.js"
import * as LearnerStatsStore from "../../src/hub/LearnerStatsStore.js"
import { type AllocationRow, releaseStatement, reserve, reservePg } from "../../src/hub/Ledger.js"
import * as AgentMemorySql from "../../src/sql/AgentMemorySql.js"
import * as Database from "../../src/sql/Database.js"
import * as IdempotencyStoreSql from "../../src/sql/IdempotencyStoreSql.js"
import * as NonceStoreSql from "../../src/sql/NonceStoreSql.js"
import * as RegistryStore from "../../src/sql/RegistryStore.js"
import * as RunLogSql from "../../src/sql/RunLogSql.js"
import * as A2aTaskStoreSql from "../../src/sql/A2aTaskStoreSql.js"
import { type A2aTaskBounds, type A2aTaskRecord, type A2aTaskStoreApi, makeMemory } from "../../src/core/A2aTaskStore.js"
import * as RateLimiter from "../../src/hub/RateLimiter.js"
import * as TaskStoreSql from "../../src/sql/TaskStoreSql.js"
import { describePostgres, probeNow } from "../support/postgres.js"

await probeNow()

type Stores = SqlClient.SqlClient | NonceStore | TaskStore | IdempotencyStore | AgentMemory | RegistryStore.RegistryStore | LearnerStatsStore.LearnerStatsStore

/** Every store on one client of the database at `url`: one "process". */
const stores = (url: string): Layer.Layer<Stores, Database.DatabaseError> => {
  const db = Database.layer(url, { maxConnections: 20 })
  return Layer.mergeAll(
    NonceStoreSql.layer,
    TaskStoreSql.layer,
    IdempotencyStoreSql.layer,
    AgentMemorySql.layer(),
    RegistryStore.layer,
    LearnerStatsStore.layer
  ).pipe(Layer.provideMerge(db))
}

/** Two processes on one database. */
const twoProcesses = (url: string) =>
  Effect.all([Layer.build(stores(url)), Layer.build(stores(url))]).pipe(Effect.orDie)

let n = 0
const unique = (prefix: string) => `${prefix}-${process.pid}-${++n}-${Math.floor(performance.now() * 1000)}`

/** Bounds small enough to reach: 3 tasks, 300 bytes, 150 per holder, ended tasks kept 1 s. */
const A2A_BOUNDS = { maxTasks: 3, maxBytes: 300, maxBytesPerCaller: 150, retentionMs: 1000 }

/** What every `A2aTaskStore` does, seen from two processes `a` and `b` on one store. */
const a2aTaskContract = (a: A2aTaskStoreApi, b: A2aTaskStoreApi) =>
  Effect.gen(function* () {
    const id = () => unique("a2a")
    const rec = (taskId: string, holder: string, bytes: number, ended: boolean, seq = 0): A2aTaskRecord => ({
      id: taskId,
      contextId: "ctx",
      principal: `p-${holder}`,
      holder,
      state: ended ? "TASK_STATE_COMPLETED" : "TASK_STATE_WORKING",
      statusMessage: undefined,
      timestamp: "2026-01-01T00:00:00.000Z",
      history: [{ messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] }],
      text: ended ? "done" : "",
      gateTaskId: ended ? undefined : "gate-1",
      ended,
      bytes,
      seq
    })
    const t1 = id()
    assert.isTrue(yield* a.insert(rec(t1, "alice", 100, false), 0))
    assert.deepStrictEqual(yield* b.find(t1, "p-alice"), rec(t1, "alice", 100, false))
    assert.isUndefined(yield* b.find(t1, "p-bob"), "only its principal finds a task")
    yield* a.write([
      { _tag: "Event", id: t1, seq: 0, event: "e0" },
      { _tag: "Event", id: t1, seq: 1, event: "e1" },
      { _tag: "Save", record: rec(t1, "alice", 100, true, 2), at: 10 }
    ])
    assert.deepStrictEqual(yield* b.events(t1, 1, 10), ["e1"])
    assert.deepStrictEqual(yield* b.find(t1, "p-alice"), rec(t1, "alice", 100, true, 2))
    // Alice's share (150) takes a second task of 100 once her ended one goes; a third, with only running ones, does not fit.
    const t2 = id()
    assert.isTrue(yield* a.insert(rec(t2, "alice", 100, false), 20))
    assert.isUndefined(yield* b.find(t1, "p-alice"))
    assert.isUndefined(yield* b.events(t1, 0, 10))
    assert.isFalse(yield* b.insert(rec(id(), "alice", 100, false), 20))
    // The total (300 bytes, 3 tasks): an ended task of another holder gives way, running ones never do.
    const t4 = id()
    assert.isTrue(yield* b.insert(rec(t4, "bob", 100, true), 30))
    const t5 = id()
    assert.isTrue(yield* b.insert(rec(t5, "carl", 100, false), 30))
    assert.deepStrictEqual(b.stats(), { tasks: 3, bytes: 300 })
    assert.isTrue(yield* a.insert(rec(id(), "carol", 10, false), 40))
    assert.isUndefined(yield* a.find(t4, "p-bob"))
    assert.isFalse(yield* a.insert(rec(id(), "dave", 10, false), 40))
    // An ended task is let go once it has been ended for the retention.
    yield* b.write([{ _tag: "Save", record: rec(t5, "carl", 100, true), at: 50 }])
    assert.isDefined(yield* a.find(t5, "p-carl"))
    assert.isTrue(yield* a.insert(rec(id(), "erin", 10, false), 50 + 1001))
    assert.isUndefined(yield* a.find(t5, "p-carl"))
    assert.isDefined(yield* a.find(t2, "p-alice"))
    // Canceled by one process, a task stays canceled when the run on the other ends.
    const canceled = { ...rec(t2, "alice", 100, true, 1), state: "TASK_STATE_CANCELED" }
    yield* b.write([{ _tag: "Save", record: canceled, at: 1100 }])
    yield* a.write([{ _tag: "Event", id: t2, seq: 1, event: "late" }, { _tag: "Save", record: rec(t2, "alice", 100, true, 2), at: 1101 }])
    assert.deepStrictEqual(yield* b.find(t2, "p-alice"), canceled)
  })

it.effect("A2A tasks in memory: bounds per holder and in all, ended tasks let go first and after their retention", () =>
  Effect.gen(function* () {
    const store = makeMemory(A2A_BOUNDS)
    yield* a2aTaskContract(store, store)
  }))

/** No A2A task left by an earlier test on this database (the tests of one engine share it), and totals to match. */
const clearA2a = (sql: SqlClient.SqlClient) =>
  Effect.orDie(Effect.all([
    sql`DELETE FROM mesh_a2a_tasks`,
    sql`DELETE FROM mesh_a2a_task_events`,
    sql`DELETE FROM mesh_a2a_task_holders`,
    sql`UPDATE mesh_a2a_task_totals SET tasks = 0, bytes = 0`
  ], { discard: true }))

/** What the totals rows say, and what counting the kept tasks says. */
const a2aTotals = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const [kept] = yield* sql<{ tasks: number; bytes: number }>`SELECT tasks, bytes FROM mesh_a2a_task_totals WHERE id = 1`
    const [counted] = yield* sql<{ tasks: number; bytes: number }>`SELECT count(*) AS tasks, coalesce(sum(bytes), 0) AS bytes FROM mesh_a2a_tasks`
    const holders = yield* sql<{ holder: string; tasks: number; bytes: number }>`SELECT holder, tasks, bytes FROM mesh_a2a_task_holders ORDER BY holder`
    const countedHolders = yield* sql<{ holder: string; tasks: number; bytes: number }>`
      SELECT holder, count(*) AS tasks, sum(bytes) AS bytes FROM mesh_a2a_tasks GROUP BY holder ORDER BY holder`
    const [orphans] = yield* sql<{ n: number }>`
      SELECT count(*) AS n FROM mesh_a2a_task_events e WHERE NOT EXISTS (SELECT 1 FROM mesh_a2a_tasks t WHERE t.task_id = e.task_id)`
    const num = (r: { holder?: string; tasks: number; bytes: number }) => ({ ...r, tasks: Number(r.tasks), bytes: Number(r.bytes) })
    return {
      kept: num(kept!),
      counted: num(counted!),
      holders: holders.map(num),
      countedHolders: countedHolders.map(num),
      orphanEvents: Number(orphans!.n)
    }
  }).pipe(Effect.orDie)

/**
 * A seeded run of inserts (running and ended, four holders), saves (resized, ended), events and expiries past the
 * bounds, with the totals rows checked against a count of the kept tasks after every step.
 */
const a2aTotalsStayExact = (store: A2aTaskStoreApi, sql: SqlClient.SqlClient, bounds: A2aTaskBounds, seed: number) =>
  Effect.gen(function* () {
    yield* clearA2a(sql)
    let state = seed
    const next = (n: number) => {
      state = (state * 1103515245 + 12345) % 2147483648
      return state % n
    }
    const holders = ["h0", "h1", "h2", "h3"]
    const known: Array<{ id: string; holder: string; seq: number }> = []
    let now = 1_000
    let inserted = 0
    let letGo = 0
    const record = (id: string, holder: string, bytes: number, ended: boolean, seq: number): A2aTaskRecord => ({
      id,
      contextId: "ctx",
      principal: `p-${holder}`,
      holder,
      state: ended ? "TASK_STATE_COMPLETED" : "TASK_STATE_WORKING",
      statusMessage: undefined,
      timestamp: new Date(now).toISOString(),
      history: [],
      text: "",
      gateTaskId: undefined,
      ended,
      bytes,
      seq
    })
    for (let step = 0; step < 240; step++) {
      const action = next(10)
      if (action < 5 || known.length === 0) {
        // Now and then several in one transaction, as an agent keeps the tasks of one turn of its event loop.
        const batch = Array.from({ length: action === 0 ? 3 : 1 }, () => ({ id: unique("exact"), holder: holders[next(holders.length)]! }))
        const kept = yield* store.insertAll(batch.map(({ holder, id }) => ({ record: record(id, holder, 10 + next(200), next(5) > 0, 0), now })))
        for (const [i, t] of batch.entries()) {
          if (!kept[i]) continue
          inserted++
          known.push({ ...t, seq: 0 })
        }
      } else if (action < 8) {
        const t = known[next(known.length)]!
        yield* store.write([
          { _tag: "Event", id: t.id, seq: t.seq, event: `e${t.seq}` },
          { _tag: "Save", record: record(t.id, t.holder, 10 + next(250), action > 5, t.seq + 1), at: now }
        ])
        t.seq++
      } else {
        now += 200 + next(900)
      }
      const totals = yield* a2aTotals(sql)
      assert.deepStrictEqual(totals.kept, totals.counted, `step ${step}`)
      assert.deepStrictEqual(totals.holders, totals.countedHolders, `step ${step}`)
      assert.strictEqual(totals.orphanEvents, 0, `step ${step}`)
      assert.isAtMost(totals.counted.tasks, bounds.maxTasks)
      if (action < 5) assert.deepStrictEqual(store.stats(), totals.counted, `step ${step}`)
      letGo = inserted - totals.counted.tasks
    }
    // The run went past the bounds: tasks were let go to make room, and by their retention.
    assert.isAbove(letGo, 20)
  })

/** An `SqlClient` that records the text of every statement it makes. */
const recording = (sql: SqlClient.SqlClient, texts: Set<string>): SqlClient.SqlClient => {
  const record = (statement: unknown) => {
    if (typeof statement === "object" && statement !== null && "compile" in statement && typeof statement.compile === "function") {
      const [text] = (statement.compile as () => readonly [string, ReadonlyArray<unknown>])()
      if (/^\s*(SELECT|INSERT|UPDATE|DELETE)\b/i.test(text)) texts.add(text)
    }
    return statement
  }
  return new Proxy(sql, {
    apply: (target, _, args) => record(Reflect.apply(target, target, args)),
    get: (target, key) => {
      const value = Reflect.get(target, key)
      if (key === "unsafe") return (...args: Array<unknown>) => record(Reflect.apply(value as (...a: Array<unknown>) => unknown, target, args))
      return typeof value === "function" ? value.bind(target) : value
    }
  })
}

const suite = (url: () => string) => {
  it.live("A2A tasks: one process keeps a task and its events, the other finds and follows it; the bounds hold in the database", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        yield* clearA2a(Context.get(a, SqlClient.SqlClient))
        const sa = yield* A2aTaskStoreSql.make(A2A_BOUNDS).pipe(Effect.provideService(SqlClient.SqlClient, Context.get(a, SqlClient.SqlClient)))
        const sb = yield* A2aTaskStoreSql.make(A2A_BOUNDS).pipe(Effect.provideService(SqlClient.SqlClient, Context.get(b, SqlClient.SqlClient)))
        yield* a2aTaskContract(sa, sb)
      })
    ))

  it.live("A2A tasks: several kept in one transaction are kept as one after the other would be, the retention of each included", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a] = yield* twoProcesses(url())
        const sql = Context.get(a, SqlClient.SqlClient)
        yield* clearA2a(sql)
        const bounds = { maxTasks: 3, maxBytes: 1000, maxBytesPerCaller: 1000, retentionMs: 0 }
        for (const store of [yield* A2aTaskStoreSql.make(bounds).pipe(Effect.provide(a)), makeMemory(bounds)]) {
          const ids = [unique("batch"), unique("batch"), unique("batch")]
          const rec = (id: string, ended: boolean): A2aTaskRecord => ({
            id, contextId: "ctx", principal: "p", holder: "h", state: ended ? "TASK_STATE_COMPLETED" : "TASK_STATE_WORKING", statusMessage: undefined,
            timestamp: "2026-01-01T00:00:00.000Z", history: [], text: "", gateTaskId: undefined, ended, bytes: 10, seq: 0
          })
          // The first has ended for longer than the retention (0) when the second is kept: it goes, though there is room.
          const kept = yield* store.insertAll([{ record: rec(ids[0]!, true), now: 1 }, { record: rec(ids[1]!, false), now: 2 }, { record: rec(ids[2]!, false), now: 2 }])
          assert.deepStrictEqual(kept, [true, true, true])
          assert.isUndefined(yield* store.find(ids[0]!, "p"))
          assert.deepStrictEqual(store.stats(), { tasks: 2, bytes: 20 })
          // Then full of running tasks: nothing to let go for the last.
          assert.deepStrictEqual(yield* store.insertAll([{ record: rec(unique("batch"), false), now: 3 }, { record: rec(unique("batch"), true), now: 3 }]), [true, false])
          yield* clearA2a(sql)
        }
      })
    ))

  it.live("A2A tasks: the totals the bounds are checked against stay exact under inserts, resizes, events, evictions and expiry", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a] = yield* twoProcesses(url())
        const sql = Context.get(a, SqlClient.SqlClient)
        const bounds = { maxTasks: 12, maxBytes: 1500, maxBytesPerCaller: 600, retentionMs: 1000 }
        // Through SqlClient, and (on a SQLite file) through the store's own connection.
        const viaSql = yield* A2aTaskStoreSql.make(bounds).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        yield* a2aTotalsStayExact(viaSql, sql, bounds, 7)
        const viaContext = yield* A2aTaskStoreSql.make(bounds).pipe(Effect.provide(a))
        yield* a2aTotalsStayExact(viaContext, sql, bounds, 11)
      })
    ))

  it.live("a nonce recorded by one process is a replay to the other; of 20 concurrent records exactly one wins", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const na = Context.get(a, NonceStore)
        const nb = Context.get(b, NonceStore)
        const sender = unique("did:mesh:s")
        const far = 4_000_000_000_000
        yield* na.record(sender, "n1", far)
        const replay = yield* Effect.flip(nb.record(sender, "n1", far))
        assert.strictEqual(replay._tag, "NonceReplayed")
        const outcomes = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? na : nb)), (s) => Effect.either(s.record(sender, "n2", far)), {
          concurrency: "unbounded"
        })
        assert.strictEqual(outcomes.filter((o) => o._tag === "Right").length, 1)
        assert.isTrue(outcomes.every((o) => o._tag === "Right" || o.left._tag === "NonceReplayed"))
      })
    ))

  it.live("a sender's nonce quota holds across processes; its expired nonces make room; its count is the rows it holds", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const sqlA = Context.get(a, SqlClient.SqlClient)
        const na = yield* NonceStoreSql.make({ perSenderQuota: 2 }).pipe(Effect.provideService(SqlClient.SqlClient, sqlA))
        const nb = yield* NonceStoreSql.make({ perSenderQuota: 2 }).pipe(Effect.provideService(SqlClient.SqlClient, Context.get(b, SqlClient.SqlClient)))
        const sender = unique("did:mesh:q")
        // Judged at times far ahead of the clock the stores purge by, so only the records themselves let rows go.
        const t = 4_000_000_000_000
        yield* na.recordAt!(sender, "n1", t + 1_000, t)
        yield* nb.recordAt!(sender, "n2", t + 5_000, t)
        const over = yield* Effect.flip(na.recordAt!(sender, "n3", t + 5_000, t + 10))
        assert.deepStrictEqual([over._tag, over._tag === "NonceQuotaExceeded" ? over.retryAfterMs : -1], ["NonceQuotaExceeded", 990])
        assert.strictEqual((yield* Effect.flip(nb.recordAt!(sender, "n2", t + 5_000, t + 10)))._tag, "NonceReplayed")
        // n1 has expired at t + 1 000: it goes, and n3 takes its place.
        yield* nb.recordAt!(sender, "n3", t + 5_000, t + 1_000)
        const [count] = yield* sqlA<{ held: number; rows: number }>`
          SELECT held, (SELECT COUNT(*) FROM mesh_nonces WHERE sender = ${sender}) AS rows FROM mesh_nonce_senders WHERE sender = ${sender}`
        assert.deepStrictEqual([Number(count!.held), Number(count!.rows)], [2, 2])
      })
    ))

  it.live("the nonce purge deletes expired rows of every sender and the counts left at none, keeping live ones", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a] = yield* twoProcesses(url())
        const sql = Context.get(a, SqlClient.SqlClient)
        const store = Context.get(a, NonceStore)
        const gone = unique("did:mesh:gone")
        const kept = unique("did:mesh:kept")
        // Expired by the clock the purge reads (epoch ms 1 000), or far from it.
        for (const n of ["a", "b", "c"]) yield* store.recordAt!(gone, n, 1_000, 0)
        yield* store.recordAt!(kept, "old", 1_000, 0)
        yield* store.recordAt!(kept, "live", 4_000_000_000_000, 0)
        assert.isAtLeast(yield* NonceStoreSql.purgeExpired.pipe(Effect.provideService(SqlClient.SqlClient, sql)), 4)
        const rows = yield* sql<{ sender: string; nonce: string }>`SELECT sender, nonce FROM mesh_nonces WHERE sender IN (${gone}, ${kept})`
        assert.deepStrictEqual(rows.map((r) => `${r.sender === kept ? "kept" : "gone"}:${r.nonce}`), ["kept:live"])
        const counts = yield* sql<{ sender: string; held: number }>`SELECT sender, held FROM mesh_nonce_senders WHERE sender IN (${gone}, ${kept})`
        assert.deepStrictEqual(counts.map((c) => [c.sender === kept, Number(c.held)]), [[true, 1]])
      })
    ))

  it.live("counters are atomic across processes: 60 concurrent charges of 1 under a limit of 25 pass 25 times", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const scope = unique("jti")
        const charge = { scope, counter: "calls", amount: 1, limit: 25 }
        const outcomes = yield* Effect.forEach(Array.from({ length: 60 }, (_, i) => Context.get(i % 2 === 0 ? a : b, TaskStore)), (t) =>
          Effect.either(t.charge([charge], 4_000_000_000_000)), { concurrency: "unbounded" })
        const passed = outcomes.filter((o) => o._tag === "Right").length
        assert.strictEqual(passed, 25)
        for (const o of outcomes) if (o._tag === "Left") assert.strictEqual(o.left.code, "COUNTER_LIMIT_REACHED")
        assert.strictEqual(yield* Context.get(a, TaskStore).used(scope, "calls"), 25)
        // Adjustments clamp to 0 … limit.
        yield* Context.get(b, TaskStore).adjust([{ scope, counter: "calls", delta: -30, limit: 25 }], 4_000_000_000_000)
        assert.strictEqual(yield* Context.get(a, TaskStore).used(scope, "calls"), 0)
        yield* Context.get(b, TaskStore).adjust([{ scope, counter: "calls", delta: 40, limit: 25 }], 4_000_000_000_000)
        assert.strictEqual(yield* Context.get(a, TaskStore).used(scope, "calls"), 25)
      })
    ))

  it.live("a task paused by one process is found by the other, and of concurrent claims from both exactly one wins", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const taskId = unique("task")
        yield* Context.get(a, TaskStore).pause({
          taskId, owner: "did:mesh:agent", capability: "pay", mandateJti: "j", grantor: "did:mesh:g", mandate: "tok",
          state: { step: 2, text: "ß" }, createdAt: 1, expiresAt: 4_000_000_000_000
        })
        const seen = yield* Context.get(b, TaskStore).paused(taskId)
        assert.isTrue(Option.isSome(seen))
        assert.deepStrictEqual(Option.getOrThrow(seen).state, { step: 2, text: "ß" })
        const claims = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => Context.get(i % 2 === 0 ? a : b, TaskStore)), (t) =>
          Effect.either(t.claim(taskId, "resumed")), { concurrency: "unbounded" })
        assert.strictEqual(claims.filter((c) => c._tag === "Right").length, 1)
        assert.strictEqual(Option.getOrThrow(yield* Context.get(a, TaskStore).paused(taskId)).status, "resumed")
        const again = yield* Effect.flip(Context.get(a, TaskStore).pause({
          taskId, owner: "o", capability: "c", mandateJti: "j", grantor: "g", mandate: "m", state: null, createdAt: 1, expiresAt: 4_000_000_000_000
        }))
        assert.strictEqual(again.code, "TASK_ID_TAKEN")
      })
    ))

  it.live("idempotency: one holder claims, the other sees it pending, then the stored reply", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const key = unique("key")
        const req = { scope: "s", key, fingerprint: "f", holder: "A", expiresAt: 4_000_000_000_000 }
        assert.strictEqual((yield* Context.get(a, IdempotencyStore).claim(req))._tag, "Claimed")
        const pending = yield* Context.get(b, IdempotencyStore).claim({ ...req, holder: "B", fingerprint: "other" })
        assert.strictEqual(pending._tag, "Pending")
        yield* Context.get(a, IdempotencyStore).complete("s", key, "A", { status: 200, body: "{\"ok\":true}" })
        const done = yield* Context.get(b, IdempotencyStore).claim({ ...req, holder: "B" })
        assert.deepStrictEqual(done, { _tag: "Completed", fingerprint: "f", reply: { status: 200, body: "{\"ok\":true}" } })
      })
    ))

  it.live("idempotency: one caller's quota of reply bytes holds across processes; its stored key still answers", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const scope = unique("scope")
        const quota = { entries: 10, bytes: 1_000 }
        const req = { scope, key: "k1", fingerprint: "f", holder: "A", expiresAt: 4_000_000_000_000, quota }
        yield* Context.get(a, IdempotencyStore).claim(req)
        yield* Context.get(a, IdempotencyStore).complete(scope, "k1", "A", { status: 200, body: "ü".repeat(600) })
        const refused = yield* Effect.flip(Context.get(b, IdempotencyStore).claim({ ...req, key: "k2", holder: "B" }))
        assert.strictEqual(refused._tag, "IdempotencyQuotaExceeded")
        assert.strictEqual((yield* Context.get(b, IdempotencyStore).claim({ ...req, holder: "B" }))._tag, "Completed")
      })
    ))

  it.live("memory written by one process is loaded by the other, in order", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const session = unique("session")
        yield* Context.get(a, AgentMemory).append("did:mesh:agent", "did:mesh:caller", session, [
          { role: "user", content: "hi" },
          { role: "assistant", content: "hello" }
        ])
        yield* Context.get(b, AgentMemory).append("did:mesh:agent", "did:mesh:caller", session, [{ role: "user", content: "again" }])
        const turns = yield* Context.get(a, AgentMemory).load("did:mesh:agent", "did:mesh:caller", session)
        assert.deepStrictEqual(turns.map((t) => t.content), ["hi", "hello", "again"])
      })
    ))

  it.live("registry rows: keys, entries, a taken DID as UniqueViolation, search, liveness, A2A cards, revocations, one-time challenges, settings", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const ra = Context.get(a, RegistryStore.RegistryStore)
        const rb = Context.get(b, RegistryStore.RegistryStore)
        const id = unique("k")
        yield* ra.insertApiKey({ id, key_hash: `h-${id}`, owner: "o", kind: "user", label: null, created_at: 1_700_000_000_000, revoked_at: null })
        assert.strictEqual(Option.getOrThrow(yield* rb.apiKeyByHash(`h-${id}`)).created_at, 1_700_000_000_000)
        assert.isTrue(yield* rb.revokeApiKey(id, 2))
        assert.isFalse(yield* ra.revokeApiKey(id, 3))
        const did = `did:mesh:${unique("agent")}`
        yield* ra.pinManifest(`cid-${did}`, JSON.stringify({ name: "Weather Oracle", description: "forecasts for sailors", capabilities: ["weather", { name: "tides" }] }), 1)
        const entry = {
          did, did_hash: `hash-${did}`, kind: "agent" as const, name: did, endpoint_url: "http://127.0.0.1:1", public_key_b64: "k", key_version: 1,
          manifest_cid: `cid-${did}`, skill_type: null, tools: null, owner_key_id: id, created_at: 5, updated_at: 5
        }
        yield* ra.insertEntry(entry)
        const taken = yield* Effect.flip(rb.insertEntry(entry))
        assert.strictEqual(taken.reason, "UniqueViolation")
        assert.strictEqual(Option.getOrThrow(yield* rb.entryByHash(`hash-${did}`)).did, did)
        assert.strictEqual(yield* rb.rotateKey(did, "k2", 1, 6), 2)
        assert.strictEqual(yield* ra.rotateKey(did, "k3", 1, 7), 0)
        const hits = yield* rb.search(["SAILORS", "tide"], 10)
        assert.deepStrictEqual(hits.map((h) => h.did), [did])
        assert.deepStrictEqual(yield* rb.search(["sailors", "nowhere"], 10), [])
        // Liveness (migration 0017): a heartbeat at an epoch-ms instant past 32 bits, then filtered lists and searches.
        const seenAt = 1_800_000_000_000
        assert.isTrue(yield* ra.touchEntry(did, seenAt))
        assert.isFalse(yield* ra.touchEntry(`${did}-unknown`, seenAt))
        assert.strictEqual(Option.getOrThrow(yield* rb.entryByHash(`hash-${did}`)).last_seen_at, seenAt)
        const listed = (seen: RegistryStore.SeenFilter) => Effect.map(rb.listEntries("agent", 1000, undefined, seen), (rows) => rows.some((r) => r.did === did))
        assert.isTrue(yield* listed({ live: true, since: seenAt }))
        assert.isFalse(yield* listed({ live: false, since: seenAt }))
        assert.isFalse(yield* listed({ live: true, since: seenAt + 1 }))
        assert.isTrue(yield* listed({ live: false, since: seenAt + 1 }))
        assert.deepStrictEqual((yield* rb.search(["sailors"], 10, { live: true, since: seenAt })).map((h) => h.did), [did])
        assert.deepStrictEqual(yield* rb.search(["sailors"], 10, { live: true, since: seenAt + 1 }), [])
        // A2A cards (migration 0016): written by one process, read and replaced through the other.
        yield* ra.putA2aCard(did, '{"name":"a"}', seenAt)
        assert.deepStrictEqual(Option.getOrThrow(yield* rb.a2aCard(did)), { card: '{"name":"a"}', fetched_at: seenAt })
        yield* rb.putA2aCard(did, '{"name":"b"}', seenAt + 1)
        assert.deepStrictEqual(Option.getOrThrow(yield* ra.a2aCard(did)), { card: '{"name":"b"}', fetched_at: seenAt + 1 })
        assert.isTrue(Option.isNone(yield* ra.a2aCard(`${did}-unknown`)))
        assert.isTrue(yield* ra.revokeMandate("jti", did, 1))
        assert.isFalse(yield* rb.revokeMandate("jti", did, 2))
        assert.isTrue(yield* rb.isMandateRevoked("jti", did))
        const ch = unique("ch")
        yield* ra.insertChallenge({ id: ch, did, public_key_b64: "k", challenge: "c", expires_at: 100, used_at: null })
        const consumed = yield* Effect.forEach([ra, rb, ra, rb], (r) => r.consumeChallenge(ch, 50), { concurrency: "unbounded" })
        assert.strictEqual(consumed.filter(Option.isSome).length, 1)
        const setting = unique("setting")
        assert.isTrue(yield* ra.claimSetting(setting, "x"))
        assert.isFalse(yield* rb.claimSetting(setting, "y"))
        assert.isTrue(yield* ra.ping)
      })
    ))

  it.live("streamed runs: one process writes a run's frames, the other reads them in order; finished runs are purged", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const la = yield* RunLogSql.make.pipe(Effect.provideService(SqlClient.SqlClient, Context.get(a, SqlClient.SqlClient)))
        const lb = yield* RunLogSql.make.pipe(Effect.provideService(SqlClient.SqlClient, Context.get(b, SqlClient.SqlClient)))
        const run = unique("run")
        yield* la.write([
          { _tag: "Open", runId: run, principal: "anonymous", at: 10 },
          { _tag: "Event", runId: run, seq: 0, frame: "id: 0\n\n" },
          { _tag: "Event", runId: run, seq: 1, frame: "id: 1\n\n" }
        ])
        assert.deepStrictEqual(yield* lb.read(run, 1, 10), { principal: "anonymous", done: false, sent: 2, frames: ["id: 1\n\n"] })
        yield* la.write([{ _tag: "Event", runId: run, seq: 2, frame: "id: 2\n\n" }, { _tag: "Finish", runId: run, sent: 3, at: 20 }])
        assert.deepStrictEqual(yield* lb.read(run, 0, 2), { principal: "anonymous", done: true, sent: 3, frames: ["id: 0\n\n", "id: 1\n\n"] })
        assert.isUndefined(yield* lb.read(unique("run"), 0, 10))
        assert.isAtLeast(yield* lb.purge(21), 1)
        assert.isUndefined(yield* la.read(run, 0, 10))
      })
    ))

  it.live("rate limits in the database: two processes take from one bucket, never more than its capacity", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const name = unique("limit")
        const ra = RateLimiter.makeSql(Context.get(a, SqlClient.SqlClient), name, { capacity: 5, perMinute: 0 })
        const rb = RateLimiter.makeSql(Context.get(b, SqlClient.SqlClient), name, { capacity: 5, perMinute: 0 })
        const outcomes = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? ra : rb)), (r) => Effect.either(r.take("10.0.0.1")), {
          concurrency: "unbounded"
        })
        assert.strictEqual(outcomes.filter((o) => o._tag === "Right").length, 5)
        assert.isTrue((yield* Effect.either(ra.take("10.0.0.2")))._tag === "Right")
      })
    ))

  it.live("write quotas: 40 concurrent charges from two processes against a budget of 10 pass 10 times; a refusal charges no budget", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const ra = Context.get(a, RegistryStore.RegistryStore)
        const rb = Context.get(b, RegistryStore.RegistryStore)
        const key = unique("key")
        const address = unique("address")
        // An instant past 32 bits, as every epoch-ms time is.
        const now = 4_000_000_000_000
        const hour = 3_600_000
        const budgets = [{ id: key, entries: 10, bytes: 1_000 }, { id: address, entries: 100, bytes: 100_000 }]
        const outcomes = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? ra : rb)), (s) => s.chargeWrites(budgets, 1, 0, now, hour), {
          concurrency: "unbounded"
        })
        assert.strictEqual(outcomes.filter(Option.isNone).length, 10)
        for (const o of outcomes) {
          if (Option.isSome(o)) assert.deepStrictEqual(o.value, { id: key, window: Option.some({ window_start: now, entries: 10, bytes: 0 }) })
        }
        // The refused charges left the address's budget as the ten charged it: 90 more pass, the 91st does not.
        const address2 = [{ id: address, entries: 100, bytes: 100_000 }]
        for (let i = 0; i < 90; i++) assert.isTrue(Option.isNone(yield* ra.chargeWrites(address2, 1, 0, now + 1, hour)))
        assert.strictEqual(Option.getOrThrow(yield* rb.chargeWrites(address2, 1, 0, now + 2, hour)).id, address)
        // Bytes count against their own limit; a charge larger than the budget alone is refused without a window.
        const bytesId = unique("bytes")
        assert.deepStrictEqual(yield* ra.chargeWrites([{ id: bytesId, entries: 10, bytes: 100 }], 0, 101, now, hour), Option.some({ id: bytesId, window: Option.none() }))
        assert.isTrue(Option.isNone(yield* ra.chargeWrites([{ id: bytesId, entries: 10, bytes: 100 }], 0, 60, now, hour)))
        assert.deepStrictEqual(yield* rb.chargeWrites([{ id: bytesId, entries: 10, bytes: 100 }], 0, 41, now, hour), Option.some({ id: bytesId, window: Option.some({ window_start: now, entries: 0, bytes: 60 }) }))
        // A window over starts again: the budget is whole, and the old window's rows can be purged.
        assert.isTrue(Option.isNone(yield* rb.chargeWrites(budgets, 10, 0, now + hour, hour)))
        assert.strictEqual(Option.getOrThrow(yield* ra.chargeWrites(budgets, 1, 0, now + hour, hour)).id, key)
        yield* ra.purgeWriteWindows(now + hour)
        assert.deepStrictEqual(Option.getOrThrow(yield* ra.chargeWrites(budgets, 1, 0, now + hour, hour)).window, Option.some({ window_start: now + hour, entries: 10, bytes: 0 }))
        assert.isTrue(Option.isNone(yield* rb.chargeWrites([{ id: bytesId, entries: 10, bytes: 100 }], 0, 41, now, hour)), "the purged window is gone")
      })
    ))

  it.live("used write proofs: of 20 concurrent claims from two processes one wins; a released claim may be made again; expired ones are purged", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const ra = Context.get(a, RegistryStore.RegistryStore)
        const rb = Context.get(b, RegistryStore.RegistryStore)
        const proof = unique("z3proof")
        const until = 4_000_000_000_000
        const claims = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? ra : rb)), (s) => s.claimProof(proof, until), { concurrency: "unbounded" })
        assert.strictEqual(claims.filter((c) => c).length, 1)
        yield* rb.releaseProofs([proof])
        assert.isTrue(yield* ra.claimProof(proof, until))
        assert.isFalse(yield* rb.claimProof(proof, until))
        yield* ra.purgeProofs(until - 1)
        assert.isFalse(yield* rb.claimProof(proof, until))
        yield* ra.purgeProofs(until)
        assert.isTrue(yield* rb.claimProof(proof, until))
      })
    ))

  it.live("learner stats: a republish replaces, the aggregate sums publishers", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const model = unique("model")
        yield* Context.get(a, LearnerStatsStore.LearnerStatsStore).publish("p1", [{ modelId: model, taskType: "CODE", successes: 3, failures: 1 }])
        yield* Context.get(b, LearnerStatsStore.LearnerStatsStore).publish("p2", [{ modelId: model, taskType: "CODE", successes: 2, failures: 0 }])
        yield* Context.get(a, LearnerStatsStore.LearnerStatsStore).publish("p1", [{ modelId: model, taskType: "CODE", successes: 4, failures: 1 }])
        const all = yield* Context.get(b, LearnerStatsStore.LearnerStatsStore).aggregate
        assert.deepStrictEqual(all.filter((s) => s.modelId === model), [{ modelId: model, taskType: "CODE", successes: 6, failures: 1 }])
      })
    ))

  it.live("learner stats: each publisher weighs at most 1 000 per pair; rows out of bounds or shape are skipped", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const sql = Context.get(a, SqlClient.SqlClient)
        const model = unique("model")
        yield* Context.get(a, LearnerStatsStore.LearnerStatsStore).publish("p1", [{ modelId: model, taskType: "CODE", successes: 30, failures: 70 }])
        yield* Context.get(b, LearnerStatsStore.LearnerStatsStore).publish("p2", [
          { modelId: model, taskType: "CODE", successes: 1_000_000, failures: 0 },
          { modelId: model, taskType: "REASONING", successes: 333_333, failures: 666_667 }
        ])
        // Rows no publish may store any more: the largest counts either engine's INTEGER column holds, another task type.
        const plant = (publisher: string, taskType: string, successes: number, failures: number) =>
          sql`INSERT INTO mesh_learner_stats (publisher, model, task_type, successes, failures, updated_at)
            VALUES (${publisher}, ${model}, ${taskType}, ${successes}, ${failures}, 0)`
        yield* plant("old-1", "CODE", 2_147_483_647, 2_147_483_647)
        yield* plant("old-2", "CODE", 2_147_483_647, 0)
        yield* plant("old-3", "CODE", 600_000, 400_001)
        yield* plant("old-4", "POETRY", 1, 0)
        const all = yield* Context.get(b, LearnerStatsStore.LearnerStatsStore).aggregate
        assert.deepStrictEqual(all.filter((s) => s.modelId === model), [
          { modelId: model, taskType: "CODE", successes: 1_030, failures: 70 },
          { modelId: model, taskType: "REASONING", successes: 333, failures: 667 }
        ])
      })
    ))

  const allocation = (pool: string, id: string, amount: number, child = id): typeof AllocationRow.Encoded => ({
    id, pool_id: pool, idempotency_key: id, child_jti: child, grantee: "did:mesh:c", amount_micros: amount, used_micros: null, created_at: 1_700_000_000_000, released_at: null
  })
  const openPool = (sql: SqlClient.SqlClient, pool: string, limit: number) =>
    sql`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, opened_by, created_at)
      VALUES (${pool}, 't', 'did:mesh:a', 'did:mesh:b', ${limit}, 0, 0, 'did:mesh:b', 0)`
  const totals = (sql: SqlClient.SqlClient, pool: string) =>
    Effect.map(
      Effect.all([
        sql<{ allocated_micros: number }>`SELECT allocated_micros FROM mesh_pools WHERE id = ${pool}`,
        sql<{ n: number; held: number | null }>`SELECT count(*) AS n, sum(CASE WHEN released_at IS NULL THEN amount_micros ELSE used_micros END) AS held FROM mesh_allocations WHERE pool_id = ${pool}`
      ]),
      ([[p], [s]]) => ({ allocated: Number(p!.allocated_micros), count: Number(s!.n), held: Number(s!.held ?? 0) })
    )

  it.live("ledger statement: exhausted, duplicate child, same key raced, and a release returns the unused part once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const sa = Context.get(a, SqlClient.SqlClient)
        const sb = Context.get(b, SqlClient.SqlClient)
        const pool = unique("pool")
        yield* openPool(sa, pool, 100)
        assert.strictEqual(yield* reserve(sa, allocation(pool, `${pool}-a1`, 60)), "allocated")
        assert.strictEqual(yield* reserve(sb, allocation(pool, `${pool}-a2`, 60)), "exhausted")
        assert.strictEqual(yield* reserve(sb, allocation(pool, `${pool}-a3`, 10, `${pool}-a1`)), "duplicate-child")
        assert.strictEqual(yield* reserve(sb, { ...allocation(pool, `${pool}-a1`, 10, `${pool}-other`), id: `${pool}-x` }), "raced")
        const e = yield* Effect.flip(reserve(sa, allocation(pool, `${pool}-a4`, 10, null as unknown as string)))
        assert.deepStrictEqual([e._tag, e.reason], ["PersistenceError", "NotNullViolation"])
        assert.deepStrictEqual(yield* totals(sa, pool), { allocated: 60, count: 1, held: 60 })
        // Ten concurrent releases of one allocation from both processes: one returns 60 - 15 = 45, the rest nothing.
        const releases = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? sa : sb)), (s) =>
          releaseStatement(s, `${pool}-a1`, 15, 1_700_000_000_001, null), { concurrency: "unbounded" })
        assert.strictEqual(releases.filter((r) => r.length === 1).length, 1)
        assert.deepStrictEqual(yield* totals(sb, pool), { allocated: 15, count: 1, held: 15 })
      })
    ))

  it.live("one receipt, one allocation: releases in two pools from two processes carrying one receipt, exactly one stands", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const sa = Context.get(a, SqlClient.SqlClient)
        const sb = Context.get(b, SqlClient.SqlClient)
        const pools = [unique("pool"), unique("pool")]
        yield* Effect.forEach(pools, (p) => Effect.andThen(openPool(sa, p, 100), reserve(sa, allocation(p, `${p}-a`, 40))))
        // The receipt the ledger stores for a verified token (issuer, saga, step), the same in both pools.
        const receipt = JSON.stringify(["did:mesh:c", unique("saga"), "pay"])
        const outcomes = yield* Effect.forEach(pools, (p, i) =>
          Effect.either(releaseStatement(i === 0 ? sa : sb, `${p}-a`, 10, 1_700_000_000_001, "token", receipt)), { concurrency: "unbounded" })
        const stood = outcomes.filter((o) => o._tag === "Right" && o.right.length === 1)
        const refused = outcomes.flatMap((o) => (o._tag === "Left" ? [o.left.reason] : []))
        assert.deepStrictEqual([stood.length, refused], [1, ["UniqueViolation"]])
        // The refused release changed nothing: its allocation is still held whole.
        const held = yield* Effect.forEach(pools, (p) => totals(sa, p))
        assert.sameDeepMembers(held, [{ allocated: 10, count: 1, held: 10 }, { allocated: 40, count: 1, held: 40 }])
      })
    ))

  it.live("ledger under many writers: 300 concurrent allocations of 1 from two processes against a pool of 100", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(url())
        const sa = Context.get(a, SqlClient.SqlClient)
        const sb = Context.get(b, SqlClient.SqlClient)
        const pool = unique("pool")
        yield* openPool(sa, pool, 100)
        // Process b allocates as the hub does: on Postgres its prepared statement (`PgHotStatements`), else `SqlClient`.
        const hot = Context.getOption(b, Database.PgHotStatements)
        const viaB = (r: typeof AllocationRow.Encoded) => (hot._tag === "Some" ? reservePg(hot.value)(r) : reserve(sb, r))
        const outcomes = yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) =>
          i % 2 === 0 ? reserve(sa, allocation(pool, `${pool}-${i}`, 1)) : viaB(allocation(pool, `${pool}-${i}`, 1)), { concurrency: 40 })
        assert.strictEqual(outcomes.filter((o) => o === "allocated").length, 100)
        assert.strictEqual(outcomes.filter((o) => o === "exhausted").length, 200)
        assert.deepStrictEqual(yield* totals(sb, pool), { allocated: 100, count: 100, held: 100 })
      })
    ))
}

describe("SQL stores on SQLite", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-stores-"))
  suite(() => path.join(dir, "stores.db"))

  it.live("A2A tasks on a SQLite file through the store's own connection: the same contract, two processes on one file", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a, b] = yield* twoProcesses(path.join(dir, "stores.db"))
        yield* clearA2a(Context.get(a, SqlClient.SqlClient))
        const sa = yield* A2aTaskStoreSql.make(A2A_BOUNDS).pipe(Effect.provide(a))
        const sb = yield* A2aTaskStoreSql.make(A2A_BOUNDS).pipe(Effect.provide(b))
        yield* a2aTaskContract(sa, sb)
      })
    ))

  it.live("A2A tasks: no statement the store runs reads the whole task table, nor sorts it, however many tasks are kept", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const [a] = yield* twoProcesses(path.join(dir, "stores.db"))
        const sql = Context.get(a, SqlClient.SqlClient)
        yield* clearA2a(sql)
        const texts = new Set<string>()
        const store = yield* A2aTaskStoreSql.make(A2A_BOUNDS).pipe(Effect.provideService(SqlClient.SqlClient, recording(sql, texts)))
        yield* a2aTaskContract(store, store)
        yield* store.list({ principal: "p-alice", holder: "alice", contextId: "ctx", state: "TASK_STATE_CANCELED", updatedAfter: 0, after: { updated: 1, id: "x" }, limit: 5 })
        assert.isAbove(texts.size, 8)
        for (const text of texts) {
          const plan = yield* sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`, Array.from(text.matchAll(/\?/g), () => null)).pipe(Effect.orDie)
          for (const { detail } of plan) {
            assert.notMatch(detail, /^SCAN mesh_a2a_task/, `${text}: ${detail}`)
            assert.notInclude(detail, "TEMP B-TREE", `${text}: ${detail}`)
          }
        }
      })
    ))
})

describePostgres("SQL stores on Postgres", suite)
