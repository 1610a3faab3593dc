import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { digestResult, sign } from "../../src/core/CommitToken.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import { verify as reconcile } from "../../src/core/Reconciliation.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { generateDid } from "../../src/core/Did.js"
import { registeredAgent, request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("hub: release with a commit token, the allocation list, and offline reconciliation", () => {
  it.live("tokens are stored with their release, listed with the pool, and the list reconciles against the agents' DID keys", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const buyer = yield* registeredAgent(client, "buyer")
        const planner = yield* registeredAgent(client, "planner")
        const flights = yield* registeredAgent(client, "flights")
        const merchant = yield* generateDid("merchant")
        const intent = yield* issueIntentMandate({
          grantorDid: buyer.identity.did,
          granteeDid: planner.identity.did,
          constraints: { spendLimitUsd: 100 },
          privateKey: buyer.identity.privateKey
        })
        const cart = (usd: number, granteeDid = merchant.did) =>
          attenuateToCart({ parent: intent, granteeDid, narrowed: { spendLimitUsd: usd }, grantorPrivateKey: planner.identity.privateKey })
        const as = { apiKey: planner.apiKey }
        const pool = yield* client.openPool(intent.token, as)
        const booked = yield* client.allocate({ poolId: pool.poolId, childMandate: (yield* cart(30, flights.identity.did)).token, idempotencyKey: "saga_1:flight", ...as })
        const failed = yield* client.allocate({ poolId: pool.poolId, childMandate: (yield* cart(20)).token, idempotencyKey: "saga_1:hotel", ...as })
        const open = yield* client.allocate({ poolId: pool.poolId, childMandate: (yield* cart(10)).token, idempotencyKey: "saga_1:car", ...as })
        const token = yield* sign(
          { sagaId: "saga_1", step: "flight", capability: "book-flight", amountUsd: "25.5", resultDigest: yield* digestResult("LH123"), at: "2026-11-26T08:00:00.000Z", issuer: flights.identity.did },
          flights.identity.privateKey
        )

        // A token that does not decode, or that names another amount than the release, is refused and nothing is released.
        const url = `${hub.url}/v1/spending/allocations/${booked.allocationId}/release`
        const garbage = yield* request(url, "POST", { usedUsd: 25.5, commitToken: "nope" }, planner.apiKey)
        assert.deepStrictEqual([garbage.status, garbage.body.code], [422, "INVALID_COMMIT_TOKEN"])
        const otherAmount = yield* request(url, "POST", { usedUsd: 30, commitToken: token }, planner.apiKey)
        assert.deepStrictEqual([otherAmount.status, otherAmount.body.code], [422, "INVALID_COMMIT_TOKEN"])

        const released = yield* client.release({ allocationId: booked.allocationId, usedUsd: 25.5, commitToken: token, ...as })
        assert.strictEqual(released.allocation.commitToken, token)
        yield* client.release({ allocationId: failed.allocationId, usedUsd: 0, ...as })

        const listed = yield* client.listAllocations(pool.poolId, as)
        assert.deepStrictEqual([listed.pool.allocatedUsd, listed.usedUsd], [35.5, 25.5])
        assert.deepStrictEqual(
          listed.allocations.map((a) => [a.allocationId, a.status, a.usedUsd, a.commitToken]),
          [
            [booked.allocationId, "released", 25.5, token],
            [failed.allocationId, "released", 0, undefined],
            [open.allocationId, "active", null, undefined]
          ]
        )

        // Offline: keys come from the hub's DID resolver, nothing else is asked of the hub.
        const report = yield* reconcile(listed.allocations, listed.pool, client.keyResolver)
        assert.deepStrictEqual(report.failures, [])
        assert.isTrue(report.ok)
        assert.deepStrictEqual([report.allocatedUsd, report.usedUsd], ["35.5", "25.5"])
        assert.strictEqual(report.receipts.get(booked.allocationId)?.issuer, flights.identity.did)

        // The list is the pool grantee's alone; an unknown pool is 404.
        const stranger = yield* Effect.flip(client.listAllocations(pool.poolId, { apiKey: flights.apiKey }))
        assert.strictEqual(stranger.code, "NOT_OWNER")
        const missing = yield* request(`${hub.url}/v1/spending/pools/pool_nope/allocations`, "GET", undefined, planner.apiKey)
        assert.deepStrictEqual([missing.status, missing.body.code], [404, "NOT_FOUND"])
      })
    ))

  it.live("a release carries only the allocation's own receipt: another agent's token, an invented step and a token already released in another pool are refused", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const buyer = yield* registeredAgent(client, "buyer")
        const planner = yield* registeredAgent(client, "planner")
        const carrier = yield* registeredAgent(client, "carrier")
        const other = yield* registeredAgent(client, "other")
        const as = { apiKey: planner.apiKey }
        const intent = (usd: number) =>
          issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: planner.identity.did, constraints: { spendLimitUsd: usd }, privateKey: buyer.identity.privateKey })
        const cartFor = (parent: Effect.Effect.Success<ReturnType<typeof intent>>) =>
          attenuateToCart({ parent, granteeDid: carrier.identity.did, narrowed: { spendLimitUsd: 10 }, grantorPrivateKey: planner.identity.privateKey })
        const receipt = (signer: typeof carrier, sagaId: string, step: string) =>
          Effect.flatMap(digestResult("done"), (resultDigest) =>
            sign({ sagaId, step, capability: "carry", amountUsd: "10", resultDigest, at: "2026-11-26T08:00:00.000Z", issuer: signer.identity.did }, signer.identity.privateKey)
          )
        const first = yield* intent(100)
        const pool = yield* client.openPool(first.token, as)
        const allocation = yield* client.allocate({ poolId: pool.poolId, childMandate: (yield* cartFor(first)).token, idempotencyKey: "saga_a:carry", ...as })
        const release = (allocationId: string, commitToken: string) => Effect.flip(client.release({ allocationId, usedUsd: 10, commitToken, ...as }))
        // Granted to the carrier, released with a token another agent signed for an invented saga: nothing is released.
        const foreign = yield* release(allocation.allocationId, yield* receipt(other, "saga_x", "invented"))
        assert.strictEqual(foreign.code, "INVALID_COMMIT_TOKEN")
        const inventedStep = yield* release(allocation.allocationId, yield* receipt(carrier, "saga_a", "elsewhere"))
        assert.strictEqual(inventedStep.code, "INVALID_COMMIT_TOKEN")
        assert.strictEqual((yield* client.getPool(pool.poolId, as)).allocatedUsd, 10)
        const own = yield* receipt(carrier, "saga_a", "carry")
        yield* client.release({ allocationId: allocation.allocationId, usedUsd: 10, commitToken: own, ...as })

        // The same receipt in a second pool, under an allocation made to match it: one receipt, one allocation.
        const second = yield* intent(50)
        const pool2 = yield* client.openPool(second.token, as)
        const again = yield* client.allocate({ poolId: pool2.poolId, childMandate: (yield* cartFor(second)).token, idempotencyKey: "saga_a:carry", ...as })
        const reused = yield* request(`${hub.url}/v1/spending/allocations/${again.allocationId}/release`, "POST", { usedUsd: 10, commitToken: own }, planner.apiKey)
        assert.deepStrictEqual([reused.status, reused.body.code], [409, "COMMIT_TOKEN_REUSED"])
        const listed = yield* client.listAllocations(pool.poolId, as)
        assert.isTrue((yield* reconcile(listed.allocations, listed.pool, client.keyResolver)).ok)
      })
    ))
})
