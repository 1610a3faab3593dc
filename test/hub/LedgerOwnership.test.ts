/**
 * A pool belongs to the grantee of its mandate. Every child carries the parent token in `prf`, so anyone downstream
 * can post it: posting it first must give nothing, and every operation on the pool needs the grantee's proof (a
 * mesh-sig signature by its key, or an agent API key issued to its DID).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Migrator from "@effect/sql/Migrator"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { poolIdOf } from "../../src/hub/Ledger.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import { MIGRATIONS_TABLE } from "../../src/sql/Database.js"
import { migrations } from "../../src/sql/migrations/index.js"
import { utf8 } from "../../src/core/internal/bytes.js"
import { registeredAgent, request, startHub, tempDatabase } from "./support.js"

/** A clock stopped at the epoch, for signing a request long expired. */
const epoch: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => 0,
  currentTimeMillis: Effect.succeed(0),
  unsafeCurrentTimeNanos: () => 0n,
  currentTimeNanos: Effect.succeed(0n),
  sleep: () => Effect.void
}

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** Alice grants Bob an intent; Mallory is registered too, with her own agent key; a user key bound to nobody. */
const cast = (client: MeshClient.MeshClientApi) =>
  Effect.gen(function* () {
    const alice = yield* registeredAgent(client, "alice")
    const bob = yield* registeredAgent(client, "bob")
    const mallory = yield* registeredAgent(client, "mallory")
    const userKey = (yield* client.createApiKey({ owner: "mallory-the-user" })).apiKey
    const intent = yield* issueIntentMandate({ grantorDid: alice.identity.did, granteeDid: bob.identity.did, constraints: { spendLimitUsd: 100 }, privateKey: alice.identity.privateKey })
    const cart = (usd: number) => attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: usd }, grantorPrivateKey: bob.identity.privateKey })
    return { alice, bob, mallory, userKey, intent, cart }
  })

/** A raw request signed (mesh-sig) by `identity` for `signedUrl`, sent to `url` with `sentBody`. */
const signed = (
  input: { readonly url: string; readonly method: string; readonly body?: unknown; readonly apiKey: string; readonly identity: MeshIdentity },
  tweak: { readonly signedUrl?: string; readonly sentBody?: unknown } = {}
) =>
  Effect.gen(function* () {
    const text = input.body === undefined ? undefined : JSON.stringify(input.body)
    const headers = yield* signRequest(
      { method: input.method, url: tweak.signedUrl ?? input.url, body: text === undefined ? new Uint8Array(0) : utf8(text) },
      { privateKey: input.identity.privateKey, keyId: verificationMethodId(input.identity.did) }
    )
    const sent = tweak.sentBody === undefined ? text : JSON.stringify(tweak.sentBody)
    return { headers: { ...headers }, send: () => request(input.url, input.method, sent, input.apiKey, { ...headers }) }
  })

describe("hub: a ledger pool belongs to its mandate's grantee", () => {
  it.live("a squatter posting the grantee's parent mandate first is refused and owns nothing; the grantee then opens it and allocates", () =>
    provide(
      Effect.gen(function* () {
        const { client, adminKey } = yield* startHub()
        const { bob, mallory, userKey, intent, cart } = yield* cast(client)
        // Mallory's own agent key, an admin-issued user key, the admin key, and Mallory's valid signature: all 403.
        for (const auth of [{ apiKey: mallory.apiKey }, { apiKey: userKey }, { apiKey: adminKey }, { apiKey: userKey, identity: mallory.identity }]) {
          const e = yield* Effect.flip(client.openPool(intent.token, auth))
          assert.strictEqual(e.code, "NOT_OWNER", JSON.stringify(e))
        }
        // The refused attempts left no pool behind.
        assert.strictEqual((yield* Effect.flip(client.getPool(poolIdOf(intent.token), { apiKey: bob.apiKey }))).code, "NOT_FOUND")

        const pool = yield* client.openPool(intent.token, { apiKey: bob.apiKey })
        assert.deepStrictEqual([pool.poolId, pool.grantee, pool.limitUsd], [poolIdOf(intent.token), bob.identity.did, 100])
        const a = yield* client.allocate({ poolId: pool.poolId, childMandate: (yield* cart(30)).token, idempotencyKey: "order-1", apiKey: bob.apiKey })
        assert.deepStrictEqual([a.amountUsd, a.status], [30, "active"])
      })
    ))

  it.live("the squatter cannot allocate, release or read the grantee's pool, nor replay the grantee's idempotency key", () =>
    provide(
      Effect.gen(function* () {
        const { client, adminKey } = yield* startHub()
        const { bob, mallory, userKey, intent, cart } = yield* cast(client)
        const bobs = { apiKey: bob.apiKey }
        const pool = yield* client.openPool(intent.token, bobs)
        const c30 = yield* cart(30)
        const a = yield* client.allocate({ poolId: pool.poolId, childMandate: c30.token, idempotencyKey: "order-1", ...bobs })
        const c20 = yield* cart(20)
        for (const auth of [{ apiKey: mallory.apiKey }, { apiKey: userKey }, { apiKey: adminKey }, { apiKey: userKey, identity: mallory.identity }]) {
          const codes = [
            (yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c20.token, idempotencyKey: "m-1", ...auth }))).code,
            (yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c30.token, idempotencyKey: "order-1", ...auth }))).code,
            (yield* Effect.flip(client.release({ allocationId: a.allocationId, usedUsd: 0, ...auth }))).code,
            (yield* Effect.flip(client.getPool(pool.poolId, auth))).code
          ]
          assert.deepStrictEqual(codes, ["NOT_OWNER", "NOT_OWNER", "NOT_OWNER", "NOT_OWNER"])
        }
        // Nothing moved: the allocation is still active and the pool still holds 30.
        const after = yield* client.getPool(pool.poolId, bobs)
        assert.deepStrictEqual([after.allocatedUsd, after.remainingUsd], [30, 70])
        const released = yield* client.release({ allocationId: a.allocationId, usedUsd: 5, ...bobs })
        assert.deepStrictEqual([released.allocation.status, released.pool.allocatedUsd], ["released", 5])
      })
    ))

  it.live("an agent key minted for the grantee's DID before it registered (by someone else's key) acts for nobody", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub()
        const alice = yield* registeredAgent(client, "alice")
        const mallory = yield* registeredAgent(client, "mallory")
        const bob = yield* generateDid("bob")
        // While Bob's DID is unregistered, the challenge exchange binds it to whatever key answers: Mallory's.
        const minted = yield* client.requestAgentKey({ ...bob, publicKey: mallory.identity.publicKey, privateKey: mallory.identity.privateKey })
        assert.strictEqual(minted.did, bob.did)
        const bobKey = (yield* client.createApiKey({ owner: bob.did })).apiKey
        yield* client.registerAgent({ manifest: { name: "bob", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/b", identity: bob, apiKey: bobKey })
        const intent = yield* issueIntentMandate({ grantorDid: alice.identity.did, granteeDid: bob.did, constraints: { spendLimitUsd: 100 }, privateKey: alice.identity.privateKey })
        assert.strictEqual((yield* Effect.flip(client.openPool(intent.token, { apiKey: minted.apiKey }))).code, "NOT_OWNER")
        const pool = yield* client.openPool(intent.token, { apiKey: bobKey })
        const child = yield* attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: 5 }, grantorPrivateKey: bob.privateKey })
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: child.token, idempotencyKey: "m", apiKey: minted.apiKey }))).code, "NOT_OWNER")
        assert.strictEqual((yield* Effect.flip(client.getPool(pool.poolId, { apiKey: minted.apiKey }))).code, "NOT_OWNER")
        // Bob's own signature works on any key, including a key he obtained later.
        assert.strictEqual((yield* client.getPool(pool.poolId, { apiKey: minted.apiKey, identity: bob })).limitUsd, 100)
      })
    ))

  it.live("the grantee's signature proves ownership on any API key; MeshClient signs when given the identity", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const { bob, userKey, intent, cart } = yield* cast(client)
        // Per call.
        const pool = yield* client.openPool(intent.token, { apiKey: userKey, identity: bob.identity })
        const a = yield* client.allocate({ poolId: pool.poolId, childMandate: (yield* cart(10)).token, idempotencyKey: "o1", apiKey: userKey, identity: bob.identity })
        // As the client's default identity.
        const asBob = yield* MeshClient.make({ hubUrl: hub.url, apiKey: userKey, identity: bob.identity, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        assert.strictEqual((yield* asBob.getPool(pool.poolId)).allocatedUsd, 10)
        assert.strictEqual((yield* asBob.release({ allocationId: a.allocationId, usedUsd: 4 })).pool.allocatedUsd, 4)
        assert.strictEqual((yield* asBob.openPool(intent.token)).poolId, pool.poolId)
      })
    ))

  it.live("a replayed signed request is refused with 401 REPLAYED and changes nothing", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const { bob, userKey, intent, cart } = yield* cast(client)
        const pool = yield* client.openPool(intent.token, { apiKey: bob.apiKey })
        const read = yield* signed({ url: `${hub.url}/v1/spending/pools/${pool.poolId}`, method: "GET", apiKey: userKey, identity: bob.identity })
        assert.strictEqual((yield* read.send()).status, 200)
        const again = yield* read.send()
        assert.deepStrictEqual([again.status, again.body.code], [401, "REPLAYED"])

        const c = yield* cart(10)
        const alloc = yield* signed({
          url: `${hub.url}/v1/spending/pools/${pool.poolId}/allocations`, method: "POST", body: { childMandate: c.token, idempotencyKey: "o1" }, apiKey: userKey, identity: bob.identity
        })
        assert.strictEqual((yield* alloc.send()).status, 201)
        const replayed = yield* alloc.send()
        assert.deepStrictEqual([replayed.status, replayed.body.code], [401, "REPLAYED"])
        assert.strictEqual((yield* client.getPool(pool.poolId, { apiKey: bob.apiKey })).allocatedUsd, 10)
      })
    ))

  it.live("a signer over its quota of live nonces gets 429 NONCE_QUOTA_EXCEEDED with Retry-After; other signers are served", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub({ nonces: { perSenderQuota: 2 } })
        const { alice, bob, userKey, intent } = yield* cast(client)
        const pool = yield* client.openPool(intent.token, { apiKey: bob.apiKey })
        const url = `${hub.url}/v1/spending/pools/${pool.poolId}`
        for (let i = 0; i < 2; i++) assert.strictEqual((yield* (yield* signed({ url, method: "GET", apiKey: userKey, identity: bob.identity })).send()).status, 200)
        const over = yield* (yield* signed({ url, method: "GET", apiKey: userKey, identity: bob.identity })).send()
        assert.deepStrictEqual([over.status, over.body.code], [429, "NONCE_QUOTA_EXCEEDED"])
        assert.isAtLeast(Number(over.headers.get("retry-after")), 1)
        // Alice signs too: her own quota is untouched (she is not the grantee, so the answer is 403, not 429).
        const other = yield* (yield* signed({ url, method: "GET", apiKey: userKey, identity: alice.identity })).send()
        assert.deepStrictEqual([other.status, other.body.code], [403, "NOT_OWNER"])
      })
    ))

  it.live("a signature by the wrong key is refused with 401 SIGNATURE_INVALID and opens nothing", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub()
        const { bob, mallory, userKey, intent } = yield* cast(client)
        // keyid says Bob's #key-1; the key is Mallory's.
        const forged = { ...bob.identity, privateKey: mallory.identity.privateKey }
        const e = yield* Effect.flip(client.openPool(intent.token, { apiKey: userKey, identity: forged }))
        assert.strictEqual(e.code, "SIGNATURE_INVALID")
        // An unregistered signer has no key to verify against.
        const stranger = yield* generateDid("stranger")
        assert.strictEqual((yield* Effect.flip(client.openPool(intent.token, { apiKey: userKey, identity: stranger }))).code, "SIGNATURE_INVALID")
        assert.strictEqual((yield* Effect.flip(client.getPool(poolIdOf(intent.token), { apiKey: bob.apiKey }))).code, "NOT_FOUND")
      })
    ))

  it.live("a signature for another URL, another body, or long expired is refused with 401", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const { bob, userKey, intent } = yield* cast(client)
        const url = `${hub.url}/v1/spending/pools`
        const base = { url, method: "POST", body: { mandate: intent.token }, apiKey: userKey, identity: bob.identity }
        // Signed for another server (what a request signed for an agent would be); the hub checks its own address.
        const elsewhere = yield* (yield* signed(base, { signedUrl: "http://agent.example:8080/v1/spending/pools" })).send()
        assert.deepStrictEqual([elsewhere.status, elsewhere.body.code], [401, "SIGNATURE_INVALID"])
        // The body is not the one signed: Mallory cannot reuse Bob's signature for another mandate.
        const other = yield* (yield* signed(base, { sentBody: { mandate: `${intent.token}x` } })).send()
        assert.deepStrictEqual([other.status, other.body.code], [401, "SIGNATURE_INVALID"])
        // Signed at the epoch: long expired.
        const old = yield* signed(base).pipe(Effect.withClock(epoch))
        const expired = yield* old.send()
        assert.deepStrictEqual([expired.status, expired.body.code], [401, "SIGNATURE_EXPIRED"])
        const fresh = yield* (yield* signed(base)).send()
        assert.strictEqual(fresh.status, 201, JSON.stringify(fresh.body))
      })
    ))

  it.live("with publicUrl set, requests must be signed for that URL, not the listening address", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey } = yield* startHub({ publicUrl: "https://hub.example/" })
        // Registration proofs name the public URL; the ledger requests below are sent straight to the listener.
        const client = yield* MeshClient.make({ hubUrl: hub.url, publicHubUrl: "https://hub.example/", apiKey: adminKey, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const { bob, userKey, intent } = yield* cast(client)
        assert.strictEqual((yield* Effect.flip(client.openPool(intent.token, { apiKey: userKey, identity: bob.identity }))).code, "SIGNATURE_INVALID")
        const viaProxy = yield* signed(
          { url: `${hub.url}/v1/spending/pools`, method: "POST", body: { mandate: intent.token }, apiKey: userKey, identity: bob.identity },
          { signedUrl: "https://hub.example/v1/spending/pools" }
        )
        assert.strictEqual((yield* viaProxy.send()).status, 201)
      })
    ))

  it.live("60 concurrent signed allocations: every nonce accepted once, the pool never over-allocated", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub()
        const { bob, userKey, intent, cart } = yield* cast(client)
        const auth = { apiKey: userKey, identity: bob.identity }
        const pool = yield* client.openPool(intent.token, auth)
        // 60 children of 2 USD against 100 USD: 50 fit.
        const children = yield* Effect.forEach(Array.from({ length: 60 }), () => cart(2))
        const results = yield* Effect.forEach(children, (c, i) => Effect.either(client.allocate({ poolId: pool.poolId, childMandate: c.token, idempotencyKey: `k${i}`, ...auth })), { concurrency: "unbounded" })
        const ok = results.filter((r) => r._tag === "Right").length
        const exhausted = results.filter((r) => r._tag === "Left" && r.left.code === "BUDGET_EXHAUSTED").length
        assert.deepStrictEqual([ok, exhausted], [50, 10])
        assert.strictEqual((yield* client.getPool(pool.poolId, auth)).allocatedUsd, 100)
      })
    ))

  it.live("a pool opened by an API key before migration 0012 keeps working, owned by its grantee and no longer by that key", () =>
    provide(
      Effect.gen(function* () {
        const database = tempDatabase()
        const alice = yield* generateDid("alice")
        const bob = yield* generateDid("bob")
        const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, constraints: { spendLimitUsd: 100 }, privateKey: alice.privateKey })
        // The schema as it was before 0012, with a pool a squatter's key opened.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const sql = yield* SqliteClient.SqliteClient
            const before = Object.fromEntries(Object.entries(migrations).filter(([k]) => k < "0012"))
            yield* Migrator.make({})({ loader: Migrator.fromRecord(before), table: MIGRATIONS_TABLE })
            yield* sql`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, owner_key_id, created_at)
              VALUES (${poolIdOf(intent.token)}, ${intent.token}, ${alice.did}, ${bob.did}, 100000000, 0, ${intent.expiresAt}, 'key_of_the_squatter', 0)`
          }).pipe(Effect.provide(SqliteClient.layer({ filename: database })))
        )
        const { client } = yield* startHub({ database })
        const bobKey = (yield* client.createApiKey({ owner: bob.did })).apiKey
        const squatterKey = (yield* client.createApiKey({ owner: "squatter" })).apiKey
        for (const identity of [alice, bob]) {
          const apiKey = identity === bob ? bobKey : (yield* client.createApiKey({ owner: identity.did })).apiKey
          yield* client.registerAgent({ manifest: { name: "party", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/a", identity, apiKey })
        }
        const poolId = poolIdOf(intent.token)
        assert.strictEqual((yield* Effect.flip(client.getPool(poolId, { apiKey: squatterKey }))).code, "NOT_OWNER")
        assert.strictEqual((yield* client.getPool(poolId, { apiKey: bobKey })).limitUsd, 100)
        const child = yield* attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: 25 }, grantorPrivateKey: bob.privateKey })
        assert.strictEqual((yield* client.allocate({ poolId, childMandate: child.token, idempotencyKey: "o1", apiKey: bobKey })).amountUsd, 25)
      })
    ))
})
