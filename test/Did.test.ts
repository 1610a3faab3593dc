import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Did, DidFromString, didHash, didHashOf, extractPublicKey, generateDid, importIdentity, isNormalizedDid, parseDid, parseDidHash, publicKeyMultibase } from "../src/core/Did.js"
import { isRecord } from "../src/core/internal/record.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { fromBase64 } from "../src/core/internal/bytes.js"

describe("Did", () => {
  it("isNormalizedDid judges as the Did schema does (shape, length, lower case)", () => {
    const inputs: ReadonlyArray<unknown> = [
      "did:mesh:alice", "did:mesh:acme.alice", "DID:MESH:alice", "did:mesh:Alice", "did:mesh:a", "did:web:alice",
      `did:mesh:${"a".repeat(247)}`, `did:mesh:${"a".repeat(248)}`, "did:mesh:-alice", 42, null, undefined, {}
    ]
    const is = Schema.is(Did)
    for (const u of inputs) assert.strictEqual(isNormalizedDid(u), is(u), String(u))
    assert.isTrue(isNormalizedDid(`did:mesh:${"a".repeat(247)}`))
    assert.isFalse(isNormalizedDid("did:mesh:Alice"))
  })

  it("isRecord: a non-null, non-array object", () => {
    assert.deepStrictEqual([{}, { a: 1 }, [], null, "x", 1, undefined].map(isRecord), [true, true, false, false, false, false, false])
  })

  it.effect("accepts did:mesh:<name> and did:mesh:<namespace>.<name>, normalized to lower case", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* parseDid("did:mesh:alice"), "did:mesh:alice")
      assert.strictEqual(yield* parseDid("DID:MESH:Acme.Alice"), "did:mesh:acme.alice")
      assert.strictEqual(yield* parseDid("did:mesh:a1:b_c-d.e"), "did:mesh:a1:b_c-d.e")
      assert.strictEqual(Schema.decodeSync(DidFromString)("did:mesh:Bob"), "did:mesh:bob")
    }))

  it.effect("rejects anything else with INVALID_DID", () =>
    Effect.gen(function* () {
      for (const bad of ["did:mesh:", "did:mesh:a", "did:web:alice", "did:mesh:-alice", "did:mesh:al ice", "did:mesh:al/ice", 42, null, `did:mesh:${"a".repeat(300)}`]) {
        const e = yield* Effect.flip(parseDid(bad))
        assert.strictEqual(e.code, "INVALID_DID", String(bad))
      }
      // The branded schema itself only holds normalized DIDs.
      assert.isTrue(Schema.is(Did)("did:mesh:alice"))
      assert.isFalse(Schema.is(Did)("did:mesh:Alice"))
    }))

  it.effect("generateDid returns the identity object with a W3C DID Core document", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("Alice", "https://alice.example", "acme")
      assert.strictEqual(id.did, "did:mesh:acme.alice")
      assert.deepStrictEqual(fromBase64(id.publicKey), id.publicKeyBytes)
      assert.deepStrictEqual(id.privateKey.publicKey, id.publicKeyBytes)
      assert.deepStrictEqual(id.document["@context"], ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"])
      assert.strictEqual(id.document.id, id.did)
      const vm = id.document.verificationMethod[0]
      assert.deepStrictEqual(vm, { id: `${id.did}#key-1`, type: "Multikey", controller: id.did, publicKeyMultibase: publicKeyMultibase(id.publicKeyBytes) })
      assert.isTrue(vm.publicKeyMultibase.startsWith("z6Mk"))
      assert.deepStrictEqual(id.document.service, [{ id: `${id.did}#mesh`, type: "MeshAgent", serviceEndpoint: "https://alice.example" }])
      assert.strictEqual(id.didKey, `did:key:${vm.publicKeyMultibase}`)
      assert.deepStrictEqual(yield* extractPublicKey(id.document), id.publicKeyBytes)
      const noEndpoint = yield* generateDid("bob")
      assert.isUndefined(noEndpoint.document.service)
      assert.strictEqual((yield* Effect.flip(generateDid("bad name"))).code, "INVALID_DID")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("importIdentity rebuilds the same identity from a stored key", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("carol")
      const again = yield* importIdentity("did:mesh:CAROL", id.privateKey.toPkcs8())
      assert.strictEqual(again.did, id.did)
      assert.deepStrictEqual(again.document, id.document)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("extractPublicKey: KEY_REVOKED for a revoked method, MALFORMED_DID_DOCUMENT otherwise", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("dave")
      const vm = id.document.verificationMethod[0]
      const revoked = { ...id.document, verificationMethod: [{ ...vm, revoked: "2026-01-01T00:00:00Z" }] }
      const e = yield* Effect.flip(extractPublicKey(revoked))
      assert.strictEqual(e.code, "KEY_REVOKED")
      assert.strictEqual(e._tag, "KeyRevoked")
      const malformed = [
        null,
        { id: id.did },
        { ...id.document, verificationMethod: [] },
        { ...id.document, verificationMethod: [{ ...vm, publicKeyMultibase: "z6Mkxyz" }] },
        { ...id.document, verificationMethod: [{ ...vm, publicKeyMultibase: "not-multibase" }] },
        { ...id.document, verificationMethod: [{ ...vm, type: "JsonWebKey2020" }] },
        { ...id.document, verificationMethod: [{ ...vm, id: `${id.did}#key-2` }] }
      ]
      for (const doc of malformed) {
        const err = yield* Effect.flip(extractPublicKey(doc))
        assert.strictEqual(err.code, "MALFORMED_DID_DOCUMENT", JSON.stringify(doc))
      }
      // A named method other than key-1 can be asked for.
      const two = { ...id.document, verificationMethod: [vm, { ...vm, id: `${id.did}#key-2` }] }
      assert.deepStrictEqual(yield* extractPublicKey(two, `${id.did}#key-2`), id.publicKeyBytes)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("didHash is short, URL-safe, stable and case-insensitive in its input", () =>
    Effect.gen(function* () {
      const h = yield* didHashOf("did:mesh:alice")
      assert.match(h, /^[a-z2-7]{24}$/)
      assert.strictEqual(yield* didHashOf("DID:MESH:ALICE"), h)
      assert.notStrictEqual(yield* didHashOf("did:mesh:alice2"), h)
      assert.strictEqual(didHash(yield* parseDid("did:mesh:alice")), h)
      // Pinned (first 15 bytes of SHA-256, base32): changing the derivation would orphan every registered agent.
      assert.strictEqual(h, "y7mftsv4pls3arzqmbjjuhz7")
    }))

  it.effect("parseDidHash takes what didHash writes, in any case, and nothing else: no URL, path or near miss", () =>
    Effect.gen(function* () {
      const h = yield* didHashOf("did:mesh:alice")
      assert.strictEqual(yield* parseDidHash(h), h)
      assert.strictEqual(yield* parseDidHash(h.toUpperCase()), h)
      for (const bad of ["http://127.0.0.1:80/x#", `https://${h}`, `${h}#`, `${h}/`, h.slice(1), `${h}a`, "0".repeat(24), "../../v1/agents", "", 42, undefined]) {
        const e = yield* Effect.flip(parseDidHash(bad))
        assert.strictEqual(e.code, "INVALID_DID_HASH", String(bad))
      }
    }))
})
