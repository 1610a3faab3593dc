import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { didHash, didKey, extractPublicKey, identityFromKey, makeDidDocument, parseDid, publicKeyMultibase } from "../src/core/Did.js"
import { validateEnvelope } from "../src/core/Envelope.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeMemory } from "../src/core/NonceStore.js"
import { signMessage, verifyMessage } from "../src/core/Proof.js"
import { fromHex, fromMultibase58, toBase64, toHex } from "../src/core/internal/bytes.js"
import envelopes from "./vectors/envelopes.json" with { type: "json" }
import identities from "./vectors/identities.json" with { type: "json" }
import w3c from "./vectors/w3c-eddsa-jcs-2022.json" with { type: "json" }

const layers = [
  ["native", KeysNative.layer],
  ["noble", Keys.noble]
] as const

describe.each(layers)("vectors (%s)", (_name, layer) => {
  it.effect("identities: seed → public key, PKCS#8, multibase, did:key, didHash, DID document", () =>
    Effect.gen(function* () {
      const keys = yield* Keys
      for (const v of identities.identities) {
        const key = yield* keys.importPrivateKey(fromHex(v.seedHex))
        assert.strictEqual(toHex(key.publicKey), v.publicKeyHex)
        assert.strictEqual(toHex(key.toPkcs8()), v.pkcs8Hex)
        assert.strictEqual(toBase64(key.publicKey), v.publicKeyB64)
        assert.strictEqual(publicKeyMultibase(key.publicKey), v.publicKeyMultibase)
        assert.isTrue(v.publicKeyMultibase.startsWith("z6Mk"))
        assert.strictEqual(didKey(key.publicKey), v.didKey)
        const did = yield* parseDid(v.did)
        assert.strictEqual(didHash(did), v.didHash)
        assert.deepStrictEqual<unknown>(makeDidDocument(did, key.publicKey, v.baseAddress ?? undefined), v.document)
        assert.deepStrictEqual<unknown>(identityFromKey(did, key, v.baseAddress ?? undefined).document, v.document)
        assert.strictEqual(toHex(yield* extractPublicKey(v.document)), v.publicKeyHex)
      }
    }).pipe(Effect.provide(layer)))

  it.effect("proofs: deterministic eddsa-jcs-2022 values, and they verify", () =>
    Effect.gen(function* () {
      const alice = identities.identities[0]!
      for (const v of identities.proofs) {
        const signed = yield* signMessage(v.message, fromHex(alice.seedHex), `${alice.did}#key-1`, { created: "2026-01-01T00:00:00Z" })
        assert.deepStrictEqual<unknown>(signed, v.signed)
        yield* verifyMessage(v.signed, fromHex(alice.publicKeyHex), { verificationMethod: `${alice.did}#key-1` })
      }
    }).pipe(Effect.provide(layer)))

  it.effect("the W3C vc-di-eddsa test vector for eddsa-jcs-2022: same proofValue, and it verifies", () =>
    Effect.gen(function* () {
      // Multikey secret: multicodec ed25519-priv (0x1300, varint 80 26) + 32-byte seed.
      const secret = fromMultibase58(w3c.keyPair.privateKeyMultibase)
      assert.strictEqual(toHex(secret.subarray(0, 2)), "8026")
      const { proof, ...document } = w3c.signed
      const signed = yield* signMessage(document, secret.subarray(2), proof.verificationMethod, { created: proof.created })
      assert.strictEqual(signed.proof.proofValue, proof.proofValue)
      assert.deepStrictEqual<unknown>(signed, w3c.signed)
      const pub = fromMultibase58(w3c.keyPair.publicKeyMultibase).subarray(2)
      yield* verifyMessage(w3c.signed, pub)
      const tampered = { ...w3c.signed, name: "Forged Credential" }
      const e = yield* Effect.flip(verifyMessage(tampered, pub))
      assert.strictEqual(e.code, "SIGNATURE_INVALID")
    }).pipe(Effect.provide(layer)))

  it.effect("envelopes: each vector validates, or fails with its code", () =>
    Effect.gen(function* () {
      for (const v of envelopes.envelopes) {
        const store = makeMemory()
        yield* TestClock.setTime(v.nowMs)
        const first = yield* Effect.either(validateEnvelope(v.envelope, v.senderPublicKeyB64, v.recipient, store))
        const outcome = "validateTwice" in v && v.validateTwice
          ? yield* Effect.either(validateEnvelope(v.envelope, v.senderPublicKeyB64, v.recipient, store))
          : first
        if (v.expect === null) assert.strictEqual(outcome._tag, "Right", v.name)
        else {
          assert.strictEqual(outcome._tag, "Left", v.name)
          if (outcome._tag === "Left") assert.strictEqual(outcome.left.code, v.expect, v.name)
        }
      }
    }).pipe(Effect.provide(layer)))
})
