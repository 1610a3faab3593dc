import { assert, describe, it } from "@effect/vitest"
import { ed25519 } from "@noble/curves/ed25519.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { keygen, readIdentityFile } from "../src/cli/Cli.js"
import { didKey, extractPublicKey, generateDid, makeDidDocument, publicKeyMultibase, publicKeyOfDidKey } from "../src/core/Did.js"
import { importPublicKey, Keys } from "../src/core/Keys.js"
import { makeStatic } from "../src/core/KeyResolver.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { issueIntentMandate, verifyMandate } from "../src/core/Mandate.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import { fromHex, toBase64, toHex, utf8 } from "../src/core/internal/bytes.js"
import { publicToSpki } from "../src/core/internal/ed25519.js"
import { NON_CANONICAL_HEX, SMALL_ORDER_HEX } from "./support/weakKeys.js"

const REFUSED = [...SMALL_ORDER_HEX, ...NON_CANONICAL_HEX].map(fromHex)

const env = Layer.merge(NodeContext.layer, KeysNative.layer)

/** A hub whose resolver answers `document` for any DID. */
const hubAnswering = (document: unknown) =>
  HttpClient.make((request) =>
    Effect.succeed(
      HttpClientResponse.fromWeb(
        request,
        new Response(JSON.stringify({ did: "did:mesh:alice", keyVersion: 1, document }), { headers: { "content-type": "application/json" } })
      )
    )
  )

describe("public keys that enter from outside", () => {
  it("the list covers all ten small-order encodings and 38 non-canonical ones, all distinct", () => {
    assert.strictEqual(new Set(REFUSED.map(toHex)).size, 10 + 38)
  })

  // node:crypto accepted it too up to Node 22; Node 24 refuses any small-order R (src/node/KeysNative.ts).
  it("a stock verifier (@noble/curves' default, ZIP 215) accepts R = identity, S = 0 under the identity key for any message", () => {
    const identity = fromHex(SMALL_ORDER_HEX[0]!)
    const forgery = new Uint8Array([...identity, ...new Uint8Array(32)])
    for (const message of ["pay 1000 USD to mallory", "{\"iss\":\"did:mesh:alice\"}"]) {
      assert.isTrue(ed25519.verify(forgery, utf8(message), identity))
    }
  })

  it.effect("importPublicKey refuses every one of them (raw, publicKeyB64 padded and not, SPKI) with INVALID_PUBLIC_KEY", () =>
    Effect.gen(function* () {
      for (const bad of REFUSED) {
        const b64 = toBase64(bad)
        for (const input of [bad, b64, b64.slice(0, 43), publicToSpki(bad), toBase64(publicToSpki(bad))]) {
          const e = yield* Effect.flip(importPublicKey(input))
          assert.strictEqual(e.code, "INVALID_PUBLIC_KEY", toHex(bad))
        }
      }
      for (const bad of [new Uint8Array(31), new Uint8Array(33), "not base64", ""]) {
        assert.strictEqual((yield* Effect.flip(importPublicKey(bad))).code, "INVALID_PUBLIC_KEY")
      }
      const good = (yield* (yield* Keys).generate).publicKey
      for (const input of [good, toBase64(good), toBase64(good).slice(0, 43), publicToSpki(good)]) {
        assert.deepStrictEqual(yield* importPublicKey(input), good)
      }
    }).pipe(Effect.provide(env)))

  it.effect("a DID document and a did:key carrying one are refused with INVALID_PUBLIC_KEY", () =>
    Effect.gen(function* () {
      const alice = yield* generateDid("alice")
      assert.deepStrictEqual(yield* extractPublicKey(alice.document), alice.publicKeyBytes)
      assert.deepStrictEqual(yield* publicKeyOfDidKey(alice.didKey), alice.publicKeyBytes)
      for (const bad of REFUSED) {
        const e = yield* Effect.flip(extractPublicKey(makeDidDocument(alice.did, bad)))
        assert.strictEqual(e._tag, "MalformedKey", toHex(bad))
        assert.strictEqual(e.code, "INVALID_PUBLIC_KEY", toHex(bad))
        assert.strictEqual((yield* Effect.flip(publicKeyOfDidKey(didKey(bad)))).code, "INVALID_PUBLIC_KEY", toHex(bad))
      }
      assert.strictEqual((yield* Effect.flip(publicKeyOfDidKey(`did:web:${publicKeyMultibase(alice.publicKeyBytes)}`))).code, "INVALID_PUBLIC_KEY")
    }).pipe(Effect.provide(env)))

  it.effect("a static KeyResolver answers KEY_NOT_FOUND for them, so a forged mandate is never checked against one", () =>
    Effect.gen(function* () {
      const alice = yield* generateDid("alice")
      const bob = yield* generateDid("bob")
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, constraints: { spendLimitUsd: 5 }, privateKey: alice.privateKey })
      for (const bad of REFUSED) {
        const resolver = makeStatic({ [alice.did]: { publicKey: bad, keyVersion: 1 } })
        const e = yield* Effect.flip(resolver.resolve(alice.did))
        assert.strictEqual(e.code, "KEY_NOT_FOUND", toHex(bad))
        assert.include(e.message, "INVALID_PUBLIC_KEY")
        assert.strictEqual((yield* Effect.flip(verifyMandate(m.token, resolver))).reason, "KEY_NOT_FOUND")
      }
      const good = makeStatic({ [alice.did]: { publicKey: alice.publicKeyBytes, keyVersion: 1 } })
      assert.strictEqual((yield* verifyMandate(m.token, good)).jti, m.jti)
    }).pipe(Effect.provide(env)))

  it.effect("the hub-backed KeyResolver refuses a registry answer carrying one (KEY_NOT_FOUND)", () =>
    Effect.gen(function* () {
      const alice = yield* generateDid("alice")
      const resolverFor = (document: unknown) =>
        MeshClient.make({ hubUrl: "http://hub.invalid", retry: { times: 0 } }).pipe(
          Effect.map((c) => c.keyResolver),
          Effect.provideService(HttpClient.HttpClient, hubAnswering(document))
        )
      const ok = yield* resolverFor(alice.document)
      assert.deepStrictEqual((yield* ok.resolve(alice.did)).publicKey, alice.publicKeyBytes)
      for (const bad of REFUSED) {
        const resolver = yield* resolverFor(makeDidDocument(alice.did, bad))
        const e = yield* Effect.flip(resolver.resolve(alice.did))
        assert.strictEqual(e.code, "KEY_NOT_FOUND", toHex(bad))
        assert.include(e.message, "INVALID_PUBLIC_KEY")
      }
    }).pipe(Effect.provide(env)))

  it.effect("an identity file carrying one (publicKeyB64, document or didKey) is refused with INVALID_PUBLIC_KEY", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-identity-"))
      const file = path.join(dir, "alice.json")
      yield* keygen({ name: "alice", namespace: Option.none(), endpoint: Option.none(), out: Option.some(file), force: false })
      const good = JSON.parse(fs.readFileSync(file, "utf8"))
      assert.strictEqual((yield* readIdentityFile(file)).did, "did:mesh:alice")
      const tampered = path.join(dir, "tampered.json")
      for (const bad of REFUSED) {
        const variants = [
          { ...good, publicKeyB64: toBase64(bad) },
          { ...good, document: makeDidDocument(good.did, bad) },
          { ...good, didKey: didKey(bad) }
        ]
        for (const v of variants) {
          fs.writeFileSync(tampered, JSON.stringify(v))
          const e = yield* Effect.flip(readIdentityFile(tampered))
          assert.strictEqual(e.code, "INVALID_PUBLIC_KEY", toHex(bad))
        }
      }
      // A well-formed key that is not the private key's is refused too, and a duplicate member is not read at all.
      const other = (yield* (yield* Keys).generate).publicKeyB64
      fs.writeFileSync(tampered, JSON.stringify({ ...good, publicKeyB64: other }))
      assert.strictEqual((yield* Effect.flip(readIdentityFile(tampered))).code, "IDENTITY_INVALID")
      fs.writeFileSync(tampered, JSON.stringify(good).replace(/}$/, `,"did":"did:mesh:mallory"}`))
      assert.strictEqual((yield* Effect.flip(readIdentityFile(tampered))).code, "IDENTITY_INVALID")
    }).pipe(Effect.provide(env)))
})
