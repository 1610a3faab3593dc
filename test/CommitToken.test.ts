import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as jose from "jose"
import { decodeUnverified, digestResult, sign, verify, type CommitReceipt } from "../src/core/CommitToken.js"
import { KeyRevoked } from "../src/core/Did.js"
import { Keys } from "../src/core/Keys.js"
import { KeyResolverUnavailable, makeStatic } from "../src/core/KeyResolver.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { fromHex, toBase64Url, toHex, utf8 } from "../src/core/internal/bytes.js"
import vectors from "./vectors/commit-tokens.json" with { type: "json" }

const layers = [
  ["native", KeysNative.layer],
  ["noble", Keys.noble]
] as const

const issuer = vectors.issuer

const receipt = (overrides: Partial<CommitReceipt> = {}): Effect.Effect<CommitReceipt, never, Keys> =>
  Effect.map(Effect.orDie(digestResult("booked")), (resultDigest) => ({
    sagaId: "saga_1",
    step: "flight",
    capability: "book-flight",
    amountUsd: "120.25",
    resultDigest,
    at: "2026-11-26T08:00:00.000Z",
    issuer: issuer.did,
    ...overrides
  }))

const codeOf = <A, R>(effect: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(effect), (e) => e.code)

describe.each(layers)("CommitToken (%s)", (_name, layer) => {
  it.effect("vectors: a fixed seed and receipt give exactly the recorded token, and it verifies to the signed receipt", () =>
    Effect.gen(function* () {
      const keys = yield* Keys
      const key = yield* keys.importPrivateKey(fromHex(issuer.seedHex))
      assert.strictEqual(toHex(key.publicKey), issuer.publicKeyHex)
      for (const v of vectors.tokens) {
        assert.strictEqual(yield* digestResult(v.result), v.receipt.resultDigest, v.name)
        assert.strictEqual(yield* sign(v.receipt, key), v.token, v.name)
        assert.deepStrictEqual<unknown>(yield* verify(v.token, fromHex(issuer.publicKeyHex)), v.signed, v.name)
      }
    }).pipe(Effect.provide(layer)))

  it.effect("vectors: each invalid token fails with its code", () =>
    Effect.gen(function* () {
      for (const v of vectors.invalid) {
        assert.strictEqual(yield* codeOf(verify(v.token, fromHex(issuer.publicKeyHex))), v.expect, v.name)
      }
    }).pipe(Effect.provide(layer)))

  it.effect("sign then verify round-trips; the amount comes back in Money's canonical form", () =>
    Effect.gen(function* () {
      const key = yield* (yield* Keys).generate
      const r = yield* receipt({ amountUsd: "120.250000" })
      const token = yield* sign(r, key)
      assert.deepStrictEqual(yield* verify(token, key.publicKey), { ...r, amountUsd: "120.25" })
      assert.deepStrictEqual(Either.getOrThrow(decodeUnverified(token)), { ...r, amountUsd: "120.25" })
    }).pipe(Effect.provide(layer)))

  it.effect("a token verifies through a resolver keyed by the issuer's DID", () =>
    Effect.gen(function* () {
      const key = yield* (yield* Keys).generate
      const token = yield* sign(yield* receipt(), key)
      const resolver = makeStatic({ [issuer.did]: { publicKey: key.publicKey, keyVersion: 3 } })
      assert.strictEqual((yield* verify(token, resolver)).issuer, issuer.did)
      assert.strictEqual(yield* codeOf(verify(token, makeStatic({}))), "KEY_NOT_FOUND")
      const unavailable = { resolve: (did: string) => Effect.fail(new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: "down", did })) }
      assert.strictEqual(yield* codeOf(verify(token, unavailable)), "RESOLVER_UNAVAILABLE")
      const revoked = {
        resolve: (did: string) =>
          Effect.fail(new KeyRevoked({ code: "KEY_REVOKED", message: "revoked", verificationMethod: `${did}#key-1`, revoked: "2026-01-01T00:00:00Z" }))
      }
      assert.strictEqual(yield* codeOf(verify(token, revoked)), "KEY_REVOKED")
    }).pipe(Effect.provide(layer)))

  it.effect("a tampered payload fails SIGNATURE_INVALID, field by field", () =>
    Effect.gen(function* () {
      const key = yield* (yield* Keys).generate
      const r = yield* receipt()
      const [h, p, s] = (yield* sign(r, key)).split(".") as [string, string, string]
      const signed = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(p.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0)))) as Record<string, string>
      for (const [field, value] of [["amountUsd", "1"], ["step", "hotel"], ["sagaId", "saga_2"], ["capability", "refund"], ["at", "2026-11-26T09:00:00.000Z"]] as const) {
        const forged = `${h}.${toBase64Url(utf8(JSON.stringify({ ...signed, [field]: value })))}.${s}`
        assert.strictEqual(yield* codeOf(verify(forged, key.publicKey)), "SIGNATURE_INVALID", field)
      }
    }).pipe(Effect.provide(layer)))

  it.effect("a token verified under another key fails SIGNATURE_INVALID", () =>
    Effect.gen(function* () {
      const keys = yield* Keys
      const key = yield* keys.generate
      const other = yield* keys.generate
      const token = yield* sign(yield* receipt(), key)
      assert.strictEqual(yield* codeOf(verify(token, other.publicKey)), "SIGNATURE_INVALID")
    }).pipe(Effect.provide(layer)))

  it.effect("a token claiming another issuer than its kid is MALFORMED_TOKEN", () =>
    Effect.gen(function* () {
      const key = yield* (yield* Keys).generate
      const [, p, s] = (yield* sign(yield* receipt(), key)).split(".") as [string, string, string]
      const header = toBase64Url(utf8(JSON.stringify({ alg: "EdDSA", typ: "commit+jwt", kid: "did:mesh:someone-else#key-1" })))
      assert.strictEqual(yield* codeOf(verify(`${header}.${p}.${s}`, key.publicKey)), "MALFORMED_TOKEN")
      assert.strictEqual(yield* codeOf(verify("not a token", key.publicKey)), "MALFORMED_TOKEN")
    }).pipe(Effect.provide(layer)))

  it.effect("a receipt that is not valid is refused before signing (INVALID_RECEIPT)", () =>
    Effect.gen(function* () {
      const key = yield* (yield* Keys).generate
      for (const bad of [{ amountUsd: "-1" }, { amountUsd: "0.0000001" }, { issuer: "did:mesh:UPPER" }, { at: "2026-11-26 08:00" }, { step: "" }]) {
        assert.strictEqual(yield* codeOf(sign(yield* receipt(bad), key)), "INVALID_RECEIPT", JSON.stringify(bad))
      }
    }).pipe(Effect.provide(layer)))
})

describe("CommitToken interop with jose", () => {
  it.effect("a stock JOSE library verifies the vector tokens from the issuer's public JWK and reads the same receipt", () =>
    Effect.gen(function* () {
      const x = Buffer.from(fromHex(issuer.publicKeyHex)).toString("base64url")
      const key = yield* Effect.promise(() => jose.importJWK({ kty: "OKP", crv: "Ed25519", x }, "EdDSA"))
      for (const v of vectors.tokens) {
        const { payload, protectedHeader } = yield* Effect.promise(() => jose.compactVerify(v.token, key, { algorithms: ["EdDSA"] }))
        assert.deepStrictEqual(protectedHeader, { alg: "EdDSA", kid: `${issuer.did}#key-1`, typ: "commit+jwt" })
        assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(payload)), v.signed)
      }
      const tampered = vectors.invalid[0]!.token
      assert.isTrue(yield* Effect.promise(() => jose.compactVerify(tampered, key).then(() => false, () => true)))
    }))
})
