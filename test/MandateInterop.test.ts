import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as jose from "jose"
import * as KeysNative from "../src/node/KeysNative.js"
import { attenuateToCart, issueIntentMandate, verifyMandate } from "../src/core/Mandate.js"
import { cast, payloadOf, resolverFor } from "./support/mandates.js"

const b64url = (b: Uint8Array) => Buffer.from(b).toString("base64url")

describe("interop with jose", () => {
  it.effect("every link's signature verifies with jose from the grantor's public JWK, and jose reads the same claims", () =>
    Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 12.34 } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 10 } })
      for (const [token, grantor] of [[intent.token, alice], [cart.token, bob]] as const) {
        const key = yield* Effect.promise(() => jose.importJWK({ kty: "OKP", crv: "Ed25519", x: b64url(grantor.key.publicKey) }, "EdDSA"))
        const { payload, protectedHeader } = yield* Effect.promise(() => jose.compactVerify(token, key, { algorithms: ["EdDSA"] }))
        assert.deepStrictEqual(protectedHeader, { alg: "EdDSA", typ: "mandate+jwt", kid: `${grantor.did}#key-1` })
        assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(payload)), payloadOf(token))
        // jwtVerify applies JWT rules too (exp, nbf, aud); the claims are standard NumericDates and strings.
        const { payload: claims } = yield* Effect.promise(() => jose.jwtVerify(token, key, { typ: "mandate+jwt", currentDate: new Date((intent.issuedAt + 1) * 1000) }))
        assert.strictEqual(claims.iss, grantor.did)
      }
      // And jose refuses it from anyone else's key.
      const wrong = yield* Effect.promise(() => jose.importJWK({ kty: "OKP", crv: "Ed25519", x: b64url(carol.key.publicKey) }, "EdDSA"))
      const refused = yield* Effect.promise(() => jose.compactVerify(intent.token, wrong).then(() => false, () => true))
      assert.isTrue(refused)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a JWS made by jose over a valid mandate payload verifies with ours, alone and as a parent", () =>
    Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const now = 0
      const claims = { iss: alice.did, aud: bob.did, iat: now, nbf: now, exp: now + 600, jti: "jose-made-1", kv: 1, kind: "intent", cns: { spendLimitUsd: 5, allowedMerchants: ["shop"] } }
      const privateJwk = { kty: "OKP", crv: "Ed25519", x: b64url(alice.key.publicKey), d: b64url(alice.key.seed) }
      const signingKey = yield* Effect.promise(() => jose.importJWK(privateJwk, "EdDSA"))
      const token = yield* Effect.promise(() =>
        new jose.CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
          .setProtectedHeader({ alg: "EdDSA", typ: "mandate+jwt", kid: `${alice.did}#key-1` })
          .sign(signingKey)
      )
      const m = yield* verifyMandate(token, alice.key.publicKey, { expectedGrantee: bob.did })
      assert.strictEqual(m.jti, "jose-made-1")
      assert.deepStrictEqual(m.constraints, claims.cns)
      // jose's SignJWT (the usual JWT API) also produces a token we accept.
      const jwt = yield* Effect.promise(() =>
        new jose.SignJWT({ kv: 1, kind: "intent", cns: { spendLimitUsd: 1 } })
          .setProtectedHeader({ alg: "EdDSA", typ: "mandate+jwt", kid: `${alice.did}#key-1` })
          .setIssuer(alice.did).setAudience(bob.did).setIssuedAt(now).setNotBefore(now).setExpirationTime(now + 60).setJti("jose-made-2")
          .sign(signingKey)
      )
      yield* verifyMandate(jwt, alice.key.publicKey)
      // Our attenuation on top of the jose-made root verifies as a chain.
      const cart = yield* attenuateToCart({ parent: token, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 4, allowedMerchants: ["shop"] } })
      yield* verifyMandate(cart.token, resolverFor([alice, bob]), { expectedGrantee: carol.did })
    }).pipe(Effect.provide(KeysNative.layer)))
})
