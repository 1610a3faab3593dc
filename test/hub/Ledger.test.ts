import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { generateDid, identityFromKey } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { attenuateToCart, issueIntentMandate, verifyMandateChain } from "../../src/core/Mandate.js"
import { poolIdOf } from "../../src/hub/Ledger.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import { registeredAgent, request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A buyer (grantor of the intent) and a shopper (its grantee, who attenuates), both registered in the hub. */
const parties = (client: MeshClient.MeshClientApi) =>
  Effect.gen(function* () {
    const buyer = yield* registeredAgent(client, "buyer")
    const shopper = yield* registeredAgent(client, "shopper")
    const merchant = yield* generateDid("merchant")
    const intent = yield* issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd: 100 }, privateKey: buyer.identity.privateKey })
    const cart = (usd: number) =>
      attenuateToCart({ parent: intent, granteeDid: merchant.did, narrowed: { spendLimitUsd: usd }, grantorPrivateKey: shopper.identity.privateKey })
    return { buyer, shopper, merchant, intent, cart }
  })

describe("hub: mandates verify against the registry", () => {
  it.live("through the registry-backed KeyResolver: valid, KEY_ROTATED after a rotation, REVOKED for a revoked mandate and its children", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const { buyer, shopper, intent, cart } = yield* parties(client)
        const child = yield* cart(40)
        const resolver = MeshClient.layerKeyResolver({ hubUrl: hub.url, keyCacheTtlMs: 0, retry: { times: 0 } })
        const verify = (token: string) => Effect.either(verifyMandateChain(token)).pipe(Effect.provide(resolver))
        assert.strictEqual((yield* verify(child.token))._tag, "Right")

        // The buyer revokes the intent: the intent and the cart attenuated from it both fail.
        yield* client.revokeMandate({ jti: intent.jti, identity: buyer.identity })
        for (const token of [intent.token, child.token]) {
          const r = yield* verify(token)
          assert.isTrue(r._tag === "Left" && r.left.reason === "REVOKED", JSON.stringify(r))
        }
        const again = yield* Effect.flip(client.revokeMandate({ jti: intent.jti, identity: buyer.identity }))
        assert.strictEqual(again.code, "ALREADY_REVOKED")
        // Only the grantor's key can revoke.
        const forged = yield* Effect.flip(client.revokeMandate({ jti: "other-jti", identity: { ...buyer.identity, privateKey: shopper.identity.privateKey } }))
        assert.strictEqual(forged.code, "SIGNATURE_INVALID")
        // A jti means something only with its grantor: the shopper "revoking" the buyer's jti revokes nothing of the buyer's.
        const own = yield* issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd: 1 }, privateKey: buyer.identity.privateKey })
        yield* client.revokeMandate({ jti: own.jti, identity: shopper.identity })
        assert.strictEqual((yield* verify(own.token))._tag, "Right")
        assert.isFalse(yield* client.isMandateRevoked(own.jti, buyer.identity.did))
        assert.isTrue(yield* client.isMandateRevoked(own.jti, shopper.identity.did))

        // A rotation makes everything signed under key version 1 KEY_ROTATED.
        const fresh = yield* issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd: 5 }, privateKey: buyer.identity.privateKey })
        assert.strictEqual((yield* verify(fresh.token))._tag, "Right")
        const newKey = identityFromKey(buyer.identity.did, (yield* generateDid("buyer-new-key")).privateKey)
        yield* client.rotateAgentKey({ identity: buyer.identity, newIdentity: newKey, apiKey: buyer.apiKey })
        const rotated = yield* verify(fresh.token)
        assert.isTrue(rotated._tag === "Left" && rotated.left.reason === "KEY_ROTATED", JSON.stringify(rotated))
      })
    ))
})

describe.each([
  ["on a file (prepared-statement path)", undefined],
  ["in memory (SqlClient path)", ":memory:"]
] as const)("hub: spending ledger %s", (_label, database) => {
  it.live("open, allocate (idempotent), exhaust, release; every refusal code", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub(database === undefined ? {} : { database })
        const { intent, cart, shopper, merchant } = yield* parties(client)
        // The shopper (the intent's grantee) acts through its agent API key, bound to its DID.
        const as = { apiKey: shopper.apiKey }
        const pool = yield* client.openPool(intent.token, as)
        assert.deepStrictEqual([pool.poolId, pool.limitUsd, pool.allocatedUsd, pool.remainingUsd], [poolIdOf(intent.token), 100, 0, 100])
        assert.strictEqual((yield* client.openPool(intent.token, as)).poolId, pool.poolId) // opening again is idempotent

        const c30 = yield* cart(30)
        const a = yield* client.allocate({ poolId: pool.poolId, childMandate: c30.token, idempotencyKey: "order-1", ...as })
        assert.deepStrictEqual([a.amountUsd, a.status, a.childJti], [30, "active", c30.jti])
        const retried = yield* client.allocate({ poolId: pool.poolId, childMandate: c30.token, idempotencyKey: "order-1", ...as })
        assert.strictEqual(retried.allocationId, a.allocationId)
        assert.strictEqual((yield* client.getPool(pool.poolId, as)).allocatedUsd, 30)

        const c10 = yield* cart(10)
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c10.token, idempotencyKey: "order-1", ...as }))).code, "IDEMPOTENCY_KEY_REUSED")
        const c80 = yield* cart(80)
        const exhausted = yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c80.token, idempotencyKey: "order-2", ...as }))
        assert.strictEqual(exhausted.code, "BUDGET_EXHAUSTED")
        const raw = yield* request(`${hub.url}/v1/spending/pools/${pool.poolId}/allocations`, "POST", { childMandate: c80.token, idempotencyKey: "order-3" }, shopper.apiKey)
        assert.strictEqual(raw.status, 409)

        const released = yield* client.release({ allocationId: a.allocationId, usedUsd: 10.5, ...as })
        assert.deepStrictEqual([released.allocation.usedUsd, released.allocation.releasedUsd, released.pool.allocatedUsd, released.pool.remainingUsd], [10.5, 19.5, 10.5, 89.5])
        assert.strictEqual((yield* Effect.flip(client.release({ allocationId: a.allocationId, usedUsd: 1, ...as }))).code, "ALREADY_REVOKED")
        // Now 80 fits.
        assert.strictEqual((yield* client.allocate({ poolId: pool.poolId, childMandate: c80.token, idempotencyKey: "order-2", ...as })).amountUsd, 80)

        // A child of another pool's mandate, a garbage token, an unknown pool, an over-release.
        const otherIntent = yield* issueIntentMandate({ grantorDid: shopper.identity.did, granteeDid: merchant.did, constraints: { spendLimitUsd: 1 }, privateKey: shopper.identity.privateKey })
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: otherIntent.token, idempotencyKey: "x", ...as }))).code, "MANDATE_INVALID")
        assert.strictEqual((yield* Effect.flip(client.openPool("not.a.token", as))).code, "MANDATE_INVALID")
        assert.strictEqual((yield* Effect.flip(client.getPool("nope", as))).code, "NOT_FOUND")
        const c10b = yield* cart(10)
        const over = yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c10b.token, idempotencyKey: "o5", ...as }))
        assert.strictEqual(over.code, "BUDGET_EXHAUSTED") // 10.5 + 80 + 10 > 100
        const other = yield* client.createApiKey({ owner: "stranger" })
        const c1 = yield* cart(1)
        // Only the grantee of the pool's mandate allocates from it: a user key acts for nobody.
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c1.token, idempotencyKey: "o6", apiKey: other.apiKey }))).code, "NOT_OWNER")
        const a1 = yield* client.allocate({ poolId: pool.poolId, childMandate: c1.token, idempotencyKey: "o6", ...as })
        // One child mandate, one allocation: another idempotency key does not allocate it again.
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c1.token, idempotencyKey: "o7", ...as }))).code, "ALREADY_ALLOCATED")
        assert.strictEqual((yield* Effect.flip(client.allocate({ poolId: pool.poolId, childMandate: c1.token, idempotencyKey: "", ...as }))).code, "INVALID_REQUEST")
        assert.strictEqual((yield* Effect.flip(client.release({ allocationId: a1.allocationId, usedUsd: 2, ...as }))).code, "INVALID_AMOUNT")
        assert.strictEqual((yield* Effect.flip(client.release({ allocationId: a1.allocationId, usedUsd: 0, apiKey: other.apiKey }))).code, "NOT_OWNER")
      })
    ))

  it.live("200 concurrent allocations against one pool over HTTP: never over-allocated, exactly the right number of 409s", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub(database === undefined ? {} : { database })
        const { intent, cart, shopper } = yield* parties(client)
        const as = { apiKey: shopper.apiKey }
        const pool = yield* client.openPool(intent.token, as)
        // 200 children of 0.75 USD against 100 USD: 133 fit (99.75), 67 do not.
        const children = yield* Effect.forEach(Array.from({ length: 200 }), () => cart(0.75))
        const results = yield* Effect.forEach(children, (c, i) => Effect.either(client.allocate({ poolId: pool.poolId, childMandate: c.token, idempotencyKey: `k${i}`, ...as })), { concurrency: "unbounded" })
        const ok = results.filter((r) => r._tag === "Right").length
        const exhausted = results.filter((r) => r._tag === "Left" && r.left.code === "BUDGET_EXHAUSTED").length
        assert.deepStrictEqual([ok, exhausted], [133, 67])
        const after = yield* client.getPool(pool.poolId, as)
        assert.strictEqual(after.allocatedUsd, 99.75)
        assert.strictEqual(after.remainingUsd, 0.25)
      })
    ))
})

