import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as KeysNative from "../../src/node/KeysNative.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import { createMeshClient } from "../../src/promise/MeshClientPromise.js"
import { registeredAgent, startHub } from "./support.js"

describe("MeshClient Promise facade: spending ledger", () => {
  it.live("signs ledger requests for the client's identity; without it an admin key is refused with NOT_OWNER", () =>
    Effect.gen(function* () {
      const { hub, adminKey, client: admin } = yield* startHub()
      const alice = yield* registeredAgent(admin, "alice")
      const bob = yield* registeredAgent(admin, "bob")
      const intent = yield* issueIntentMandate({ grantorDid: alice.identity.did, granteeDid: bob.identity.did, constraints: { spendLimitUsd: 10 }, privateKey: alice.identity.privateKey })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: 4 }, grantorPrivateKey: bob.identity.privateKey })
      yield* Effect.promise(async () => {
        const asBob = await createMeshClient({ hubUrl: hub.url, apiKey: adminKey, identity: bob.identity, retry: { times: 0 } })
        const plain = await createMeshClient({ hubUrl: hub.url, apiKey: adminKey, retry: { times: 0 } })
        try {
          const refused = await plain.openPool(intent.token).then(() => undefined, (e: { code: string }) => e)
          assert.strictEqual(refused?.code, "NOT_OWNER")
          const pool = await asBob.openPool(intent.token)
          const a = await asBob.allocate({ poolId: pool.poolId, childMandate: cart.token, idempotencyKey: "o1" })
          assert.strictEqual(a.amountUsd, 4)
          assert.strictEqual((await asBob.release({ allocationId: a.allocationId, usedUsd: 1 })).pool.allocatedUsd, 1)
          // Per call, on a client without a default identity.
          assert.strictEqual((await plain.getPool(pool.poolId, { identity: bob.identity })).remainingUsd, 9)
        } finally {
          await asBob.close()
          await plain.close()
        }
      })
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
