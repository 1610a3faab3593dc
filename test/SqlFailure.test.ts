/**
 * One classification of SQLite failures (`SqlFailure.classify`), checked against what the real driver raises: each
 * constraint keeps its own reason, so a NOT NULL failure can never read as a taken DID, and the ledger's budget
 * trigger is known by its RAISE text.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import BetterSqlite3 from "better-sqlite3"
import { AgentMemory } from "../src/core/AgentMemory.js"
import { generateDid, verificationMethodId } from "../src/core/Did.js"
import type { Keys } from "../src/core/Keys.js"
import { signMessage } from "../src/core/Proof.js"
import { NonceStore } from "../src/core/NonceStore.js"
import { TaskStore } from "../src/core/TaskStore.js"
import * as Registry from "../src/hub/Registry.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as AgentMemorySql from "../src/sql/AgentMemorySql.js"
import * as Database from "../src/sql/Database.js"
import * as NonceStoreSql from "../src/sql/NonceStoreSql.js"
import * as RegistryStore from "../src/sql/RegistryStore.js"
import { classify, PersistenceError, refail } from "../src/sql/SqlFailure.js"
import * as TaskStoreSql from "../src/sql/TaskStoreSql.js"

const memory = Database.layerSqlite(":memory:")

/** Runs a failing statement on a migrated in-memory database and classifies what the driver said. */
const failureOf = <A>(run: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.flip(refail(run(sql) as Effect.Effect<A, PersistenceError>))).pipe(Effect.provide(memory))

const table = (sql: SqlClient.SqlClient) =>
  sql`CREATE TABLE t (id TEXT PRIMARY KEY, u TEXT UNIQUE, n TEXT NOT NULL, c INTEGER CONSTRAINT c_positive CHECK (c > 0))`

const entry: RegistryStore.EntryRow = {
  did: "did:mesh:z6MkExample", did_hash: "h1", kind: "agent", name: "a", endpoint_url: null, public_key_b64: null, key_version: 1,
  manifest_cid: null, skill_type: null, tools: null, owner_key_id: "key_1", created_at: 0, updated_at: 0
}

const pool = (sql: SqlClient.SqlClient) =>
  sql`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, opened_by, created_at)
    VALUES ('p', 't', 'g', 'e', 100, 0, 0, 'e', 0)`

const allocation = (sql: SqlClient.SqlClient, id: string, amount: number) =>
  sql`INSERT INTO mesh_allocations (id, pool_id, idempotency_key, child_jti, grantee, amount_micros, used_micros, created_at, released_at)
    VALUES (${id}, 'p', ${id}, ${id}, 'e', ${amount}, NULL, 0, NULL)`

describe("SqlFailure.classify (SQLite)", () => {
  it.effect("a NOT NULL failure is a NotNullViolation, not a unique violation", () =>
    Effect.gen(function* () {
      const e = yield* failureOf((sql) => Effect.zipRight(table(sql), sql`INSERT INTO t (id, u, n, c) VALUES ('a', 'x', NULL, 1)`))
      assert.strictEqual(e.reason, "NotNullViolation")
      assert.strictEqual(e.constraint, "t.n")
    }))

  it.effect("a duplicate UNIQUE column is a UniqueViolation naming the column", () =>
    Effect.gen(function* () {
      const e = yield* failureOf((sql) =>
        Effect.all([table(sql), sql`INSERT INTO t VALUES ('a', 'x', 'n', 1)`, sql`INSERT INTO t VALUES ('b', 'x', 'n', 1)`], { discard: true }))
      assert.strictEqual(e.reason, "UniqueViolation")
      assert.strictEqual(e.constraint, "t.u")
    }))

  it.effect("a duplicate primary key is a UniqueViolation", () =>
    Effect.gen(function* () {
      const e = yield* failureOf((sql) =>
        Effect.all([table(sql), sql`INSERT INTO t VALUES ('a', 'x', 'n', 1)`, sql`INSERT INTO t VALUES ('a', 'y', 'n', 1)`], { discard: true }))
      assert.strictEqual(e.reason, "UniqueViolation")
      assert.strictEqual(e.constraint, "t.id")
    }))

  it.effect("a CHECK failure is a CheckViolation naming the constraint", () =>
    Effect.gen(function* () {
      const e = yield* failureOf((sql) => Effect.zipRight(table(sql), sql`INSERT INTO t VALUES ('a', 'x', 'n', 0)`))
      assert.strictEqual(e.reason, "CheckViolation")
      assert.strictEqual(e.constraint, "c_positive")
    }))

  it.effect("the ledger's budget trigger is a TriggerAbort carrying its RAISE text", () =>
    Effect.gen(function* () {
      const e = yield* failureOf((sql) => Effect.all([pool(sql), allocation(sql, "a1", 60), allocation(sql, "a2", 60)], { discard: true }))
      assert.strictEqual(e.reason, "TriggerAbort")
      assert.strictEqual(e.constraint, "BUDGET_EXHAUSTED")
    }))

  it.effect("a statement that cannot run (no such table) is Unavailable", () =>
    Effect.gen(function* () {
      const e = yield* failureOf((sql) => sql`SELECT * FROM no_such_table`)
      assert.strictEqual(e.reason, "Unavailable")
      assert.strictEqual(e.constraint, undefined)
    }))

  it("a raw better-sqlite3 error (prepared statements off SqlClient) classifies the same way", () => {
    const db = new BetterSqlite3(":memory:")
    try {
      db.exec("CREATE TABLE t (u TEXT UNIQUE, n TEXT NOT NULL)")
      db.prepare("INSERT INTO t VALUES ('x', 'n')").run()
      const caught = (f: () => unknown) => {
        try {
          f()
        } catch (e) {
          return classify(e)
        }
        return assert.fail("the statement did not fail")
      }
      assert.strictEqual(caught(() => db.prepare("INSERT INTO t VALUES ('x', 'n')").run()).reason, "UniqueViolation")
      assert.strictEqual(caught(() => db.prepare("INSERT INTO t VALUES ('y', NULL)").run()).reason, "NotNullViolation")
    } finally {
      db.close()
    }
  })

  it("a busy database is Busy, and a row that does not decode is Unavailable", () => {
    assert.strictEqual(classify({ _tag: "SqlError", cause: { code: "SQLITE_BUSY", message: "database is locked" } }).reason, "Busy")
    const parse = Schema.decodeUnknownEither(Schema.Struct({ n: Schema.Number }))({ n: "x" })
    assert.isTrue(parse._tag === "Left")
    if (parse._tag === "Left") assert.strictEqual(classify(parse.left).reason, "Unavailable")
  })
})

describe("RegistryStore failures", () => {
  const store = <A, E>(f: (s: RegistryStore.RegistryStoreApi) => Effect.Effect<A, E>) =>
    Effect.flatMap(RegistryStore.RegistryStore, f).pipe(Effect.provide(RegistryStore.layer.pipe(Layer.provide(memory), Layer.orDie)))

  it.effect("inserting a taken DID fails with a UniqueViolation", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(store((s) => Effect.zipRight(s.insertEntry(entry), s.insertEntry({ ...entry, did_hash: "h2" }))))
      assert.instanceOf(e, PersistenceError)
      assert.strictEqual(e.reason, "UniqueViolation")
    }))

  // Before: any message matching /UNIQUE|constraint/i read as taken, so a NOT NULL failure answered 409 DID_TAKEN.
  it.effect("an entry missing a required column fails with a NotNullViolation, not a UniqueViolation", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(store((s) => s.insertEntry({ ...entry, name: null as unknown as string })))
      assert.strictEqual(e.reason, "NotNullViolation")
      assert.strictEqual(e.constraint, "mesh_entries.name")
    }))

  it.effect("a duplicate API key hash fails with a UniqueViolation", () =>
    Effect.gen(function* () {
      const key: RegistryStore.ApiKeyRow = { id: "k1", key_hash: "h", owner: "o", kind: "user", label: null, created_at: 0, revoked_at: null }
      const e = yield* Effect.flip(store((s) => Effect.zipRight(s.insertApiKey(key), s.insertApiKey({ ...key, id: "k2" }))))
      assert.strictEqual(e.reason, "UniqueViolation")
      assert.strictEqual(e.constraint, "mesh_api_keys.key_hash")
    }))
})


describe("Registry: only a unique violation reads as DID_TAKEN", () => {
  const admin: Registry.Caller = { keyId: "key_admin", owner: "admin", kind: "admin" }
  /** A registry whose store refuses every entry insert with `failure`. */
  const registerSkillWith = (failure: PersistenceError) =>
    Effect.gen(function* () {
      const real = yield* RegistryStore.RegistryStore
      const registry = yield* Registry.make.pipe(
        Effect.provideService(RegistryStore.RegistryStore, { ...real, insertEntry: () => Effect.fail(failure) })
      )
      const did = (yield* generateDid("owner")).did
      return yield* Effect.flip(registry.registerSkill(admin, { name: "s", did: `${did}.skill` }, { hub: undefined, client: "127.0.0.1" }))
    }).pipe(Effect.provide(Layer.mergeAll(RegistryStore.layer.pipe(Layer.provide(memory)), KeysNative.layer)))

  const failure = (reason: PersistenceError["reason"]) => new PersistenceError({ reason, constraint: undefined, message: "refused", cause: undefined })

  it.effect("a UniqueViolation is DidTaken (DID_TAKEN)", () =>
    Effect.map(registerSkillWith(failure("UniqueViolation")), (e) => assert.strictEqual(e.code, "DID_TAKEN")))

  it.effect("a NotNullViolation is RegistryUnavailable (STORE_UNAVAILABLE)", () =>
    Effect.map(registerSkillWith(failure("NotNullViolation")), (e) => assert.deepStrictEqual([e._tag, e.code], ["RegistryUnavailable", "STORE_UNAVAILABLE"])))

  it.effect("a CheckViolation is RegistryUnavailable (STORE_UNAVAILABLE)", () =>
    Effect.map(registerSkillWith(failure("CheckViolation")), (e) => assert.deepStrictEqual([e._tag, e.code], ["RegistryUnavailable", "STORE_UNAVAILABLE"])))
})

describe("Registry: used write proofs fail closed, and a failed write gives its proof back", () => {
  const admin: Registry.Caller = { keyId: "key_admin", owner: "admin", kind: "admin" }
  const ctx = { hub: "http://hub.test", client: "127.0.0.1" }
  const unavailable = new PersistenceError({ reason: "Unavailable", constraint: undefined, message: "down", cause: undefined })
  /** A registry whose store is `patch`ed, and a signed registration of a fresh DID with its manifest pinned. */
  const signedRegistration = (patch: (real: RegistryStore.RegistryStoreApi) => Partial<RegistryStore.RegistryStoreApi>) =>
    Effect.gen(function* () {
      const real = yield* RegistryStore.RegistryStore
      const registry = yield* Registry.make.pipe(Effect.provideService(RegistryStore.RegistryStore, { ...real, ...patch(real) }))
      const identity = yield* generateDid("closed")
      const { cid } = yield* registry.pinManifest(admin, { name: "m", meshProtocolVersion: "1.0" }, ctx)
      const fields = { did: identity.did, manifestCID: cid, publicKeyB64: identity.publicKey, endpointUrl: "http://127.0.0.1:9/a" }
      const signed = yield* Effect.orDie(signMessage(Registry.registrationDocument({ ...fields, hub: ctx.hub }), identity.privateKey, verificationMethodId(identity.did), {
        proofPurpose: Registry.WRITE_PROOF_PURPOSE
      }))
      return { registry, real, input: { ...fields, proof: signed.proof } }
    })
  const run = <A, E>(e: Effect.Effect<A, E, RegistryStore.RegistryStore | Keys>) =>
    e.pipe(Effect.provide(Layer.mergeAll(RegistryStore.layer.pipe(Layer.provide(memory)), KeysNative.layer)))

  it.effect("a proof store that cannot answer refuses the write with STORE_UNAVAILABLE, writing nothing", () =>
    run(Effect.gen(function* () {
      const { input, real, registry } = yield* signedRegistration(() => ({ claimProof: () => Effect.fail(unavailable) }))
      const e = yield* Effect.flip(registry.registerAgent(admin, input, ctx))
      assert.deepStrictEqual([e._tag, e.code], ["RegistryUnavailable", "STORE_UNAVAILABLE"])
      assert.isTrue(Option.isNone(yield* real.entryByDid(input.did)))
    })))

  it.effect("a write that fails after its proof was claimed gives the claim back: the same proof then applies, once", () =>
    run(Effect.gen(function* () {
      let failures = 1
      const { input, registry } = yield* signedRegistration((real) => ({
        insertEntry: (row) => (failures-- > 0 ? Effect.fail(unavailable) : real.insertEntry(row))
      }))
      const first = yield* Effect.flip(registry.registerAgent(admin, input, ctx))
      assert.strictEqual(first.code, "STORE_UNAVAILABLE")
      assert.strictEqual((yield* registry.registerAgent(admin, input, ctx)).did, input.did)
      const replay = yield* Effect.flip(registry.registerAgent(admin, input, ctx))
      assert.strictEqual(replay.code, "SIGNATURE_INVALID")
      assert.include(replay.message, "already used")
    })))
})

describe("the core stores' SQL layers tell the classified failure", () => {
  // Before, each said only the client's "Failed to execute statement": neither the reason nor the driver's text.
  const dropThen = <A, E, R>(table: string, run: Effect.Effect<A, E, R>) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.zipRight(sql.unsafe(`DROP TABLE ${table}`), Effect.flip(run)))

  it.effect("NonceStoreSql: NonceStoreUnavailable with the reason and the driver's message", () =>
    Effect.gen(function* () {
      const e = yield* dropThen("mesh_nonces", Effect.flatMap(NonceStore, (s) => s.record("did:mesh:a", "n1", 10_000)))
      assert.strictEqual(e._tag, "NonceStoreUnavailable")
      assert.match(e.message, /^Unavailable: no such table: mesh_nonces/)
    }).pipe(Effect.scoped, Effect.provide(NonceStoreSql.layer.pipe(Layer.provideMerge(memory), Layer.orDie))))

  it.effect("TaskStoreSql: TaskStoreUnavailable with the reason and the driver's message", () =>
    Effect.gen(function* () {
      const e = yield* dropThen("mesh_task_counters", Effect.flatMap(TaskStore, (s) => s.used("scope", "counter")))
      assert.deepStrictEqual([e._tag, e.code], ["TaskStoreUnavailable", "TASK_STORE_UNAVAILABLE"])
      assert.match(e.message, /^Unavailable: no such table: mesh_task_counters/)
    }).pipe(Effect.provide(TaskStoreSql.layer.pipe(Layer.provideMerge(memory), Layer.orDie))))

  it.effect("AgentMemorySql: MemoryUnavailable with the reason and the driver's message", () =>
    Effect.gen(function* () {
      const e = yield* dropThen("mesh_agent_messages", Effect.flatMap(AgentMemory, (s) => s.load("agent", "owner", "session")))
      assert.deepStrictEqual([e._tag, e.code], ["MemoryUnavailable", "STORE_UNAVAILABLE"])
      assert.match(e.message, /^Unavailable: no such table: mesh_agent_messages/)
    }).pipe(Effect.provide(AgentMemorySql.layer().pipe(Layer.provideMerge(memory), Layer.orDie))))
})
