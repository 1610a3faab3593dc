import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import {
  decodePublicKeyMultibase,
  Did,
  DID_MAX_LENGTH,
  DidFromString,
  didKey,
  didOfVerificationMethod,
  extractPublicKey,
  generateDid,
  invalidDid,
  isDid,
  normalizeDid,
  publicKeyMultibase,
  publicKeyOfDidKey
} from "../../src/core/Did.js"
import { toMultibase58 } from "../../src/core/internal/bytes.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { SMALL_ORDER_HEX } from "../support/weakKeys.js"

const fromHex = (hex: string) => Uint8Array.from(Buffer.from(hex, "hex"))
const smallOrder = fromHex(SMALL_ORDER_HEX[0]!)

describe("Did at its bounds", () => {
  it("a DID of exactly 256 characters is one, 257 is not; isDid takes any case, normalizeDid lowers it", () => {
    const at = `did:mesh:${"a".repeat(DID_MAX_LENGTH - 9)}`
    assert.strictEqual(at.length, 256)
    assert.strictEqual(normalizeDid(at), at)
    assert.isUndefined(normalizeDid(`${at}a`))
    assert.isTrue(isDid("DID:MESH:Alice"))
    assert.isFalse(isDid("did:mesh:"))
    assert.isFalse(isDid(7))
    assert.strictEqual(normalizeDid("Did:Mesh:Acme.Alice"), "did:mesh:acme.alice")
    // Anchored at both ends: nothing before did:mesh:, nothing after the name.
    for (const bad of ["xdid:mesh:alice", " did:mesh:alice", "did:mesh:alice ", "did:mesh:alice/x"]) assert.isUndefined(normalizeDid(bad), bad)
  })

  it.effect("refusals are tagged as callers catch them: InvalidDid, MalformedDidDocument", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(generateDid("bad name"))
      assert.strictEqual(e._tag, "InvalidDid")
      const m = yield* Effect.flip(extractPublicKey(null))
      assert.strictEqual(m._tag, "MalformedDidDocument")
      assert.strictEqual(invalidDid(1)._tag, "InvalidDid")
    }).pipe(Effect.provide(KeysNative.layer)))

  it("the schema's refusals say which rule failed; encoding gives the DID back", () => {
    const problem = (u: unknown) => {
      const r = Schema.decodeUnknownEither(Did)(u)
      return Either.isLeft(r) ? String(r.left) : undefined
    }
    assert.include(problem("did:web:alice"), "not a did:mesh DID")
    assert.include(problem("did:mesh:Alice"), "DID must be lower case")
    assert.isUndefined(problem("did:mesh:alice"))
    assert.strictEqual(Schema.encodeSync(DidFromString)(Schema.decodeSync(DidFromString)("did:mesh:Bob")), "did:mesh:bob")
  })

  it("INVALID_DID quotes the input and states the rule", () => {
    const e = invalidDid("did:web:x")
    assert.strictEqual(e.code, "INVALID_DID")
    for (const n of ["\"did:web:x\"", "did:mesh:<name>", "did:mesh:<namespace>.<name>", "256 characters"]) assert.include(e.message, n)
  })

  it("the DID of a verification method is what precedes its #", () => {
    assert.strictEqual(didOfVerificationMethod("did:mesh:alice#key-1"), "did:mesh:alice")
    assert.strictEqual(didOfVerificationMethod("did:mesh:alice#a#b"), "did:mesh:alice")
    assert.strictEqual(didOfVerificationMethod("did:mesh:alice"), "did:mesh:alice")
    assert.strictEqual(didOfVerificationMethod("#key-1"), "")
  })
})

describe("Multikey and did:key", () => {
  it.effect("decodes only an Ed25519 Multikey of exactly 32 key bytes", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("alice")
      const mk = publicKeyMultibase(id.publicKeyBytes)
      assert.deepStrictEqual(decodePublicKeyMultibase(mk), id.publicKeyBytes)
      const prefixed = (codec: ReadonlyArray<number>, key: Uint8Array) => toMultibase58(new Uint8Array([...codec, ...key]))
      assert.strictEqual(prefixed([0xed, 0x01], id.publicKeyBytes), mk)
      // x25519-pub (0xec) is another codec; 31 or 33 key bytes are not a key; not base58btc at all.
      assert.isUndefined(decodePublicKeyMultibase(prefixed([0xec, 0x01], id.publicKeyBytes)))
      assert.isUndefined(decodePublicKeyMultibase(prefixed([0xed, 0x01], id.publicKeyBytes.subarray(1))))
      assert.isUndefined(decodePublicKeyMultibase(prefixed([0xed, 0x01], new Uint8Array([...id.publicKeyBytes, 0]))))
      assert.isUndefined(decodePublicKeyMultibase("u7QE"))
      assert.isUndefined(decodePublicKeyMultibase("z0OIl"))
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("publicKeyOfDidKey gives the key back; INVALID_PUBLIC_KEY for another method, another codec or a small-order key", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("alice")
      assert.strictEqual(didKey(id.publicKeyBytes), id.didKey)
      assert.deepStrictEqual(yield* publicKeyOfDidKey(id.didKey), id.publicKeyBytes)
      for (const bad of [id.didKey.replace("did:key:", "did:web:"), `did:key:${toMultibase58(new Uint8Array([0xec, 0x01, ...id.publicKeyBytes]))}`, didKey(smallOrder), "did:key:"]) {
        const e = yield* Effect.flip(publicKeyOfDidKey(bad))
        assert.strictEqual(e.code, "INVALID_PUBLIC_KEY", bad)
      }
      assert.include((yield* Effect.flip(publicKeyOfDidKey("did:web:x"))).message, "did:key")
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("extractPublicKey", () => {
  it.effect("names the missing method and the wrong type; KEY_REVOKED carries the method and when; a small-order key is INVALID_PUBLIC_KEY", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("dave")
      const vm = id.document.verificationMethod[0]
      const missing = yield* Effect.flip(extractPublicKey(id.document, `${id.did}#key-9`))
      assert.strictEqual(missing.code, "MALFORMED_DID_DOCUMENT")
      assert.include(missing.message, `${id.did}#key-9`)
      const typed = yield* Effect.flip(extractPublicKey({ ...id.document, verificationMethod: [{ ...vm, type: "JsonWebKey2020" }] }))
      assert.include(typed.message, "JsonWebKey2020")
      const revoked = yield* Effect.flip(extractPublicKey({ ...id.document, verificationMethod: [{ ...vm, revoked: "2026-01-01T00:00:00Z" }] }))
      assert.deepStrictEqual(
        revoked._tag === "KeyRevoked" ? { vm: revoked.verificationMethod, at: revoked.revoked } : undefined,
        { vm: vm.id, at: "2026-01-01T00:00:00Z" }
      )
      assert.include(revoked.message, vm.id)
      assert.include(revoked.message, "2026-01-01T00:00:00Z")
      const weak = yield* Effect.flip(extractPublicKey({ ...id.document, verificationMethod: [{ ...vm, publicKeyMultibase: publicKeyMultibase(smallOrder) }] }))
      assert.strictEqual(weak.code, "INVALID_PUBLIC_KEY")
      const notMultikey = yield* Effect.flip(extractPublicKey({ ...id.document, verificationMethod: [{ ...vm, publicKeyMultibase: "z6Mkxyz" }] }))
      assert.include(notMultikey.message, "publicKeyMultibase")
      assert.include((yield* Effect.flip(extractPublicKey({ id: id.did }))).message, "verificationMethod")
      // Every member of a method and of a service entry is checked, not only those the key is read from.
      const { controller: _controller, ...noController } = vm
      const incomplete: ReadonlyArray<unknown> = [
        { ...id.document, verificationMethod: [noController] },
        { ...id.document, verificationMethod: [{ ...vm, revoked: 5 }] },
        { ...id.document, service: [{ id: `${id.did}#mesh`, type: "MeshAgent" }] },
        { ...id.document, service: [{ id: `${id.did}#mesh`, type: "MeshAgent", serviceEndpoint: 443 }] }
      ]
      for (const doc of incomplete) {
        assert.strictEqual((yield* Effect.flip(extractPublicKey(doc))).code, "MALFORMED_DID_DOCUMENT", JSON.stringify(doc).slice(0, 200))
      }
    }).pipe(Effect.provide(KeysNative.layer)))
})
