import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as TestClock from "effect/TestClock"
import { canonicalBytes } from "../../src/core/Canonical.js"
import { generateDid } from "../../src/core/Did.js"
import { Keys } from "../../src/core/Keys.js"
import * as Schema from "effect/Schema"
import { CRYPTOSUITE, DataIntegrityProof, hashData, signMessage, toDateTimeSeconds, verifyMessage } from "../../src/core/Proof.js"
import * as KeysNative from "../../src/node/KeysNative.js"

const T0 = 1_800_000_000_123

const signer = Effect.gen(function* () {
  const id = yield* generateDid("signer")
  return { id, vm: `${id.did}#key-1` }
})

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(e), (x) => x.code)

describe("signMessage", () => {
  it.effect("writes the eddsa-jcs-2022 proof: the clock's second as created, assertionMethod by default, the old proof replaced", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { id, vm } = yield* signer
      const signed = yield* signMessage({ a: 1, proof: { stale: true } }, id.privateKey, vm)
      const { proofValue, ...options } = signed.proof
      assert.deepStrictEqual(options, { type: "DataIntegrityProof", cryptosuite: CRYPTOSUITE, created: "2027-01-15T08:00:00Z", verificationMethod: vm, proofPurpose: "assertionMethod" })
      assert.strictEqual(toDateTimeSeconds(T0), "2027-01-15T08:00:00Z")
      assert.match(proofValue, /^z[1-9A-HJ-NP-Za-km-z]+$/)
      assert.deepStrictEqual(Object.keys(signed), ["a", "proof"])
      yield* verifyMessage(signed, id.publicKeyBytes, { verificationMethod: vm, proofPurpose: "assertionMethod" })
      const other = yield* signMessage({ a: 1 }, id.privateKey, vm, { proofPurpose: "authentication", created: "2026-01-01T00:00:00Z" })
      assert.strictEqual(other.proof.proofPurpose, "authentication")
      assert.strictEqual(other.proof.created, "2026-01-01T00:00:00Z")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("copies the document's @context into the proof only when it is an array", () =>
    Effect.gen(function* () {
      const { id, vm } = yield* signer
      const ctx = ["https://www.w3.org/ns/credentials/v2"]
      const withContext = yield* signMessage({ "@context": ctx, a: 1 }, id.privateKey, vm)
      assert.deepStrictEqual(withContext.proof["@context"], ctx)
      const stringContext = yield* signMessage({ "@context": "https://example.org", a: 1 }, id.privateKey, vm)
      assert.isFalse("@context" in stringContext.proof)
      yield* verifyMessage(withContext, id.publicKeyBytes)
      yield* verifyMessage(stringContext, id.publicKeyBytes)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("hashData is SHA-256 of the JCS proof options, then SHA-256 of the JCS document", () =>
    Effect.gen(function* () {
      const keys = yield* Keys
      const options = { type: "DataIntegrityProof", cryptosuite: CRYPTOSUITE, verificationMethod: "did:mesh:a#key-1", proofPurpose: "assertionMethod" } as const
      const doc = { b: [1, "x"], a: null }
      const data = Either.getOrThrow(hashData(keys, options, doc))
      const expected = new Uint8Array([...keys.sha256(Either.getOrThrow(canonicalBytes(options))), ...keys.sha256(Either.getOrThrow(canonicalBytes(doc)))])
      assert.deepStrictEqual(data, expected)
      assert.strictEqual(data.length, 64)
      assert.isTrue(Either.isLeft(hashData(keys, options, { n: Number.NaN })))
      assert.isTrue(Either.isLeft(hashData(keys, { ...options, n: Number.POSITIVE_INFINITY } as never, doc)))
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("verifyMessage refusals", () => {
  it.effect("MALFORMED_PROOF for a missing or malformed proof, a wrong purpose, a context that is not a prefix, a bad proofValue", () =>
    Effect.gen(function* () {
      const { id, vm } = yield* signer
      const ctx = ["https://www.w3.org/ns/credentials/v2", "https://example.org/v1"]
      const signed = yield* signMessage({ "@context": ctx, a: 1 }, id.privateKey, vm)
      const pk = id.publicKeyBytes
      const malformed: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
        ["no proof", { a: 1 }],
        ["proof not an object", { ...signed, proof: "z123" }],
        ["other type", { ...signed, proof: { ...signed.proof, type: "Ed25519Signature2020" } }],
        ["other cryptosuite", { ...signed, proof: { ...signed.proof, cryptosuite: "eddsa-rdfc-2022" } }],
        ["proofValue not multibase", { ...signed, proof: { ...signed.proof, proofValue: "u123" } }],
        ["proofValue not base58", { ...signed, proof: { ...signed.proof, proofValue: "z0OIl" } }],
        ["document without @context", { a: 1, proof: signed.proof }],
        ["document @context a string", { "@context": ctx[0], a: 1, proof: signed.proof }],
        ["document @context in another order", { "@context": [ctx[1], ctx[0]], a: 1, proof: signed.proof }],
        ["proof @context longer than the document's", { ...signed, "@context": [ctx[0]] }],
        ["not canonicalizable", { ...signed, a: Number.NaN }]
      ]
      for (const [label, message] of malformed) {
        assert.strictEqual(yield* codeOf(verifyMessage(message, pk)), "MALFORMED_PROOF", label)
      }
      const purpose = yield* Effect.flip(verifyMessage(signed, pk, { proofPurpose: "authentication" }))
      assert.strictEqual(purpose.code, "MALFORMED_PROOF")
      assert.include(purpose.message, "assertionMethod")
      // A document whose @context extends the proof's keeps the prefix: it reaches the signature check.
      assert.strictEqual(yield* codeOf(verifyMessage({ ...signed, "@context": [...ctx, "https://example.org/v2"] }, pk)), "SIGNATURE_INVALID")
      yield* verifyMessage(signed, pk, { verificationMethod: vm, proofPurpose: "assertionMethod" })
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("VERIFICATION_METHOD_MISMATCH names the method that signed; SIGNATURE_INVALID for another key or any change", () =>
    Effect.gen(function* () {
      const { id, vm } = yield* signer
      const other = yield* generateDid("other")
      const signed = yield* signMessage({ a: 1, b: "two" }, id.privateKey, vm)
      const mismatch = yield* Effect.flip(verifyMessage(signed, id.publicKeyBytes, { verificationMethod: `${other.did}#key-1` }))
      assert.strictEqual(mismatch.code, "VERIFICATION_METHOD_MISMATCH")
      assert.include(mismatch.message, vm)
      assert.strictEqual(yield* codeOf(verifyMessage(signed, other.publicKeyBytes)), "SIGNATURE_INVALID")
      assert.strictEqual(yield* codeOf(verifyMessage({ ...signed, b: "three" }, id.publicKeyBytes)), "SIGNATURE_INVALID")
      assert.strictEqual(yield* codeOf(verifyMessage({ ...signed, proof: { ...signed.proof, created: "2020-01-01T00:00:00Z" } }, id.publicKeyBytes)), "SIGNATURE_INVALID")
      assert.strictEqual(yield* codeOf(verifyMessage({ ...signed, proof: { ...signed.proof, proofPurpose: "authentication" } }, id.publicKeyBytes)), "SIGNATURE_INVALID")
      // Verified as given: the same object comes back.
      const back = yield* verifyMessage(signed, id.publicKeyBytes)
      assert.strictEqual(back, signed)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("what a refusal says", () => {
  it.effect("a ProofInvalid names the part at fault: the proof, its @context, its proofValue, the signature", () =>
    Effect.gen(function* () {
      const { id, vm } = yield* signer
      const signed = yield* signMessage({ "@context": ["https://example.org/v1"], a: 1 }, id.privateKey, vm)
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string, string]> = [
        [{ a: 1 }, "MALFORMED_PROOF", "proof"],
        [{ ...signed, "@context": ["https://example.org/v2"] }, "MALFORMED_PROOF", "@context"],
        [{ ...signed, proof: { ...signed.proof, proofValue: "z0OIl" } }, "MALFORMED_PROOF", "proofValue"],
        [{ ...signed, a: 2 }, "SIGNATURE_INVALID", "signature"]
      ]
      for (const [message, code, names] of cases) {
        const e = yield* Effect.flip(verifyMessage(message, id.publicKeyBytes))
        assert.strictEqual(e._tag, "ProofInvalid")
        assert.strictEqual(e.code, code, names)
        assert.include(e.message, names, code)
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it("the wire schema takes a multibase base58btc proofValue only (z…)", () => {
    const proof = { type: "DataIntegrityProof", cryptosuite: CRYPTOSUITE, verificationMethod: "did:mesh:a#key-1", proofPurpose: "assertionMethod" }
    assert.isTrue(Schema.is(DataIntegrityProof)({ ...proof, proofValue: "z3" }))
    assert.isFalse(Schema.is(DataIntegrityProof)({ ...proof, proofValue: "u3" }))
    assert.isFalse(Schema.is(DataIntegrityProof)({ ...proof, proofValue: "" }))
  })
})
