import { assert, describe, it } from "@effect/vitest"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { MIGRATIONS_TABLE } from "../../src/sql/Database.js"
import { didHash, generateDid } from "../../src/core/Did.js"
import * as Hub from "../../src/hub/Hub.js"
import { Keys } from "../../src/core/Keys.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { Platform } from "../../src/hub/Platform.js"
import { RegistryStore } from "../../src/sql/RegistryStore.js"
import { migrations } from "../../src/sql/migrations/index.js"
import { toBase64, utf8 } from "../../src/core/internal/bytes.js"
import { request, startHub, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("hub retention and the admin credential", () => {
  it.effect("spent and expired challenges are purged on the schedule; live ones remain", () =>
    provide(
      Effect.gen(function* () {
        const N = 30
        const context = yield* Layer.build(
          Hub.layerServices({ database: ":memory:", rateLimit: { capacity: 1000, perMinute: 1000 }, challengePurge: { intervalMs: 60_000, batch: 7 } })
        )
        const platform = Context.get(context, Platform)
        const store = Context.get(context, RegistryStore)
        const keys = yield* Keys
        const agent = yield* generateDid("busy")
        const exchange = Effect.gen(function* () {
          const ch = yield* platform.challenge("10.0.0.1", { did: agent.did, publicKeyB64: agent.publicKey })
          const signature = toBase64(yield* keys.sign(agent.privateKey, utf8(ch.challenge)))
          return yield* platform.agentKey("10.0.0.1", { challengeId: ch.challengeId, did: agent.did, signature })
        })
        // N completed exchanges and N challenges never answered.
        for (let i = 0; i < N; i++) yield* exchange
        for (let i = 0; i < N; i++) yield* platform.challenge("10.0.0.1", { did: agent.did, publicKeyB64: agent.publicKey })
        // Before the first purge every row is there: this is where a hub without the purge stays forever.
        yield* TestClock.adjust("59 seconds")
        assert.strictEqual(yield* store.countChallenges, 2 * N)
        // The first purge (at 60 s) takes the used ones, in batches of 7; the unanswered are still live.
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* store.countChallenges, N)
        // Once they expire (5 minutes) the next purge takes them; a challenge issued now stays until it expires.
        yield* TestClock.adjust("4 minutes")
        const live = yield* platform.challenge("10.0.0.1", { did: agent.did, publicKeyB64: agent.publicKey })
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(yield* store.countChallenges, 1)
        // The live one still answers.
        const signature = toBase64(yield* keys.sign(agent.privateKey, utf8(live.challenge)))
        assert.strictEqual((yield* platform.agentKey("10.0.0.1", { challengeId: live.challengeId, did: agent.did, signature })).did, agent.did)
      })
    ))

  it.live("revoking the admin key and restarting on the same database does not create a new admin credential; newAdminKey does", () =>
    provide(
      Effect.gen(function* () {
        const database = tempDatabase()
        yield* Effect.scoped(
          Effect.gen(function* () {
            const { hub, adminKey, client } = yield* startHub({ database })
            const admin = Option.getOrThrow(hub.admin)
            yield* client.revokeApiKey(admin.id)
            assert.strictEqual((yield* request(`${hub.url}/keys`, "POST", { owner: "x" }, adminKey)).status, 401)
          })
        )
        const again = yield* Effect.scoped(Effect.map(Hub.start({ database }), (h) => h.admin))
        assert.isTrue(Option.isNone(again))
        const third = yield* Effect.scoped(Effect.map(Hub.start({ database }), (h) => h.admin))
        assert.isTrue(Option.isNone(third))
        // The explicit path: a new admin credential that works.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const hub = yield* Hub.start({ database, newAdminKey: true })
            const admin = Option.getOrThrow(hub.admin)
            assert.strictEqual((yield* request(`${hub.url}/keys`, "POST", { owner: "x" }, admin.apiKey)).status, 201)
          })
        )
      })
    ))

  it.live("a database from before migration 0011: its admin is not made again, and its unpadded keys read padded", () =>
    provide(
      Effect.gen(function* () {
        const database = tempDatabase()
        const agent = yield* generateDid("old")
        const older = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < "0011"))
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* Migrator.make({})({ loader: Migrator.fromRecord(older), table: MIGRATIONS_TABLE })
          yield* sql`INSERT INTO mesh_api_keys (id, key_hash, owner, kind, label, created_at, revoked_at) VALUES ('key_old', 'h', 'admin', 'admin', NULL, 0, 5)`
          yield* sql`INSERT INTO mesh_entries (did, did_hash, kind, name, endpoint_url, public_key_b64, key_version, manifest_cid, skill_type, tools, owner_key_id, created_at, updated_at)
            VALUES (${agent.did}, ${didHash(agent.did)}, 'agent', ${agent.did}, 'http://127.0.0.1:9', ${agent.publicKey.replace(/=+$/, "")}, 1, NULL, NULL, NULL, 'key_old', 0, 0)`
        }).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename: database })))
        const { admin, url } = yield* Hub.start({ database })
        assert.isTrue(Option.isNone(admin))
        const resolved = yield* request(`${url}/v1/agents/${didHash(agent.did)}`, "GET")
        assert.strictEqual(resolved.body.publicKeyB64, agent.publicKey)
      })
    ))
})
