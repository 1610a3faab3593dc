import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { generateDid } from "../src/core/Did.js"
import { KeyResolverUnavailable } from "../src/core/KeyResolver.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { issueIntentMandate, verifyMandate } from "../src/core/Mandate.js"

describe("a resolver that cannot answer", () => {
  it.effect("fails verification with RESOLVER_UNAVAILABLE, not as a verdict on the mandate", () =>
    Effect.gen(function* () {
      const alice = yield* generateDid("alice")
      const bob = yield* generateDid("bob")
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, constraints: { spendLimitUsd: 5 }, privateKey: alice.privateKey })
      const down = { resolve: (did: string) => Effect.fail(new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: "database is down", did })) }
      const e = yield* Effect.flip(verifyMandate(m.token, down))
      assert.strictEqual(e.code, "MANDATE_INVALID")
      assert.strictEqual(e.reason, "RESOLVER_UNAVAILABLE")
    }).pipe(Effect.provide(KeysNative.layer)))
})
