import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { httpbis } from "http-message-signatures"
import { createHash, createPrivateKey, createPublicKey, sign as nodeSign, verify as nodeVerify } from "node:crypto"
import { isInnerList, parseDictionary } from "structured-headers"
import { vi } from "vitest"
import { generateDid, KeyRevoked, type MeshIdentity } from "../src/core/Did.js"
import {
  checkRequestAt,
  contentDigest,
  recordNonce,
  REQUIRED_COMPONENTS,
  type SignableRequest,
  signatureBase,
  signRequest,
  type SignRequestOptions,
  verifyRequest,
  type VerifyRequestOptions
} from "../src/core/HttpSignature.js"
import { KeyResolverUnavailable, makeStatic } from "../src/core/KeyResolver.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeMemory, NonceStoreUnavailable } from "../src/core/NonceStore.js"
import { fromBase64, fromHex, toBase64, toBase64Url, utf8 } from "../src/core/internal/bytes.js"
import meshSig from "./vectors/mesh-sig.json" with { type: "json" }
import b26 from "./vectors/rfc9421-b26.json" with { type: "json" }

const layers = [["native", KeysNative.layer], ["noble", Keys.noble]] as const

const T0 = 1_800_000_000_000
const TARGET = "https://agent.example/v1/run?stream=0"
const BODY = utf8(JSON.stringify({ capability: "echo", params: { text: "hi" } }))
const POST = { method: "POST", url: TARGET, body: BODY }

const vm = (id: MeshIdentity) => `${id.did}#key-1`

const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const alice = yield* generateDid("alice")
  const carol = yield* generateDid("carol")
  const resolveKey = makeStatic({ [alice.did]: { publicKey: alice.publicKeyBytes, keyVersion: 1 } }).resolve
  return { alice, carol, resolveKey }
})

/** A POST signed by `id` (as its own key unless `keyId` says otherwise), with the headers it would travel with. */
const signedBy = (id: MeshIdentity, options: Partial<SignRequestOptions> = {}, req = POST) =>
  Effect.map(
    signRequest(req, { privateKey: id.privateKey, keyId: vm(id), ...options }),
    (headers): SignableRequest => ({ ...req, headers: { "content-type": "application/json", ...headers } })
  )

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(e), (err) => err.code)

const header = (req: SignableRequest, name: string): string => {
  const value = req.headers[name]
  if (typeof value !== "string") throw new Error(`no ${name}`)
  return value
}

const lowerCaseHeaders = (headers: Record<string, string | Array<string>>) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]))

/** Runs with `Date` pinned, for the stock library, which reads the wall clock. */
const atWallClock = <A, E, R>(ms: number, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      vi.useFakeTimers({ toFake: ["Date"] })
      vi.setSystemTime(ms)
    }),
    () => effect,
    () => Effect.sync(() => vi.useRealTimers())
  )

const nodeKeyPair = (id: MeshIdentity) => {
  const privateKey = createPrivateKey({ key: Buffer.from(id.privateKey.toPkcs8()), format: "der", type: "pkcs8" })
  return { privateKey, publicKey: createPublicKey(privateKey) }
}

describe("HttpSignature", () => {
  for (const [name, layer] of layers) {
    it.effect(`signs exactly the mesh-sig components and params, and verifies once (${name})`, () =>
      Effect.gen(function* () {
        const { alice, resolveKey } = yield* setup
        const keys = yield* Keys
        const req = yield* signedBy(alice, { nonce: "n-0123456789abcdef" })
        assert.strictEqual(header(req, "content-digest"), contentDigest(keys, BODY))
        assert.strictEqual(
          header(req, "signature-input"),
          `sig1=("@method" "@target-uri" "content-digest");created=1800000000;expires=1800000060;nonce="n-0123456789abcdef";alg="ed25519";keyid="${alice.did}#key-1";tag="mesh-sig"`
        )
        assert.match(header(req, "signature"), /^sig1=:[A-Za-z0-9+/]{86}==:$/)
        const nonceStore = makeMemory()
        const verified = yield* verifyRequest(req, { resolveKey, nonceStore })
        assert.deepStrictEqual(verified, { did: alice.did, keyId: vm(alice), created: 1_800_000_000, nonce: "n-0123456789abcdef" })
        assert.strictEqual(yield* codeOf(verifyRequest(req, { resolveKey, nonceStore })), "REPLAYED")
      }).pipe(Effect.provide(layer)))

    it.effect(`RFC 9421 B.2.6: the signature base byte for byte, and the RFC's signature (${name})`, () =>
      Effect.gen(function* () {
        const keys = yield* Keys
        const input = parseDictionary(b26.signatureInput).get(b26.label)
        if (input === undefined || !isInnerList(input)) return assert.fail("no sig-b26 inner list")
        const base = yield* signatureBase(b26.request, input)
        assert.strictEqual(base, b26.signatureBase)
        const signature = parseDictionary(b26.signature).get(b26.label)?.[0]
        assert.instanceOf(signature, ArrayBuffer)
        const sig = new Uint8Array(signature as ArrayBuffer)
        const publicKey = fromBase64(b26.publicKeyB64)
        assert.strictEqual(createPublicKey(b26.publicKeySpkiPem).export({ format: "jwk" }).x, toBase64Url(publicKey))
        assert.isTrue(yield* keys.verify(publicKey, utf8(base), sig))
        assert.isFalse(yield* keys.verify(publicKey, utf8(base.replace("POST", "PUT")), sig))
        // Ed25519 is deterministic: the RFC's private key signs the same bytes.
        assert.deepStrictEqual(yield* keys.sign(yield* keys.importPrivateKey(b26.privateKeyPkcs8B64), utf8(base)), sig)
        assert.strictEqual(contentDigest(keys, utf8(b26.request.body)), b26.contentDigestSha256)
      }).pipe(Effect.provide(layer)))

    it.effect(`the protocol's example (test/vectors/mesh-sig.json) is reproduced and verifies (${name})`, () =>
      Effect.gen(function* () {
        const keys = yield* Keys
        const key = yield* keys.importPrivateKey(fromHex(meshSig.seedHex))
        assert.strictEqual(toBase64(key.publicKey), meshSig.publicKeyB64)
        yield* TestClock.setTime(meshSig.time)
        const req = { ...meshSig.request, body: utf8(meshSig.request.body) }
        const headers = yield* signRequest(req, { privateKey: key, keyId: meshSig.keyId, nonce: meshSig.nonce })
        assert.deepStrictEqual(headers, meshSig.headers)
        const input = parseDictionary(headers["signature-input"]).get("sig1")
        if (input === undefined || !isInnerList(input)) return assert.fail("no sig1 inner list")
        assert.strictEqual(yield* signatureBase({ ...req, headers }, input), meshSig.signatureBase)
        const resolveKey = makeStatic({ "did:mesh:acme.alice": { publicKey: key.publicKey, keyVersion: 1 } }).resolve
        const verified = yield* verifyRequest({ ...req, headers }, { resolveKey, nonceStore: makeMemory() })
        assert.strictEqual(verified.did, "did:mesh:acme.alice")
      }).pipe(Effect.provide(layer)))
  }

  it.effect("both key layers make byte-identical headers; the keyid's DID is normalized", () =>
    Effect.gen(function* () {
      const { alice, resolveKey } = yield* setup
      const options = { nonce: "same-nonce-0123456789", keyId: vm(alice).toUpperCase().replace("#KEY-1", "#key-1") }
      const native = yield* signedBy(alice, options).pipe(Effect.provide(KeysNative.layer))
      const noble = yield* signedBy(alice, options).pipe(Effect.provide(Keys.noble))
      assert.deepStrictEqual(native, noble)
      const verified = yield* verifyRequest(native, { resolveKey, nonceStore: makeMemory() }).pipe(Effect.provide(Keys.noble))
      assert.strictEqual(verified.did, alice.did)
      assert.strictEqual(verified.keyId, options.keyId)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("every refusal code", () =>
    Effect.gen(function* () {
      const { alice, carol, resolveKey } = yield* setup
      const req = yield* signedBy(alice)
      const v = (r: SignableRequest, options: Partial<VerifyRequestOptions> = {}) =>
        codeOf(verifyRequest(r, { resolveKey, nonceStore: makeMemory(), ...options }))
      const withHeaders = (headers: Record<string, string | undefined>): SignableRequest => ({ ...req, headers: { ...req.headers, ...headers } })
      const input = header(req, "signature-input")
      const editInput = (from: string | RegExp, to: string) => {
        const edited = input.replace(from, to)
        assert.notStrictEqual(edited, input)
        return withHeaders({ "signature-input": edited })
      }

      assert.strictEqual(yield* v(withHeaders({ "signature-input": undefined, signature: undefined })), "SIGNATURE_MISSING")
      assert.strictEqual(yield* v(withHeaders({ signature: undefined })), "SIGNATURE_MISSING")
      assert.strictEqual(yield* v(editInput('tag="mesh-sig"', 'tag="other"')), "SIGNATURE_MISSING")
      assert.strictEqual(yield* v(editInput(/;tag="mesh-sig"$/, "")), "SIGNATURE_MISSING")

      assert.strictEqual(yield* v(withHeaders({ "signature-input": "sig1=(((" })), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(withHeaders({ signature: "sig1=not base64" })), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(withHeaders({ signature: header(req, "signature").replace("sig1=", "sig2=") })), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('alg="ed25519"', 'alg="rsa-pss-sha512"')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('alg="ed25519"', "alg=ed25519")), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('"@target-uri" ', "")), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('"content-digest"', '"content-digest";sf')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('"content-digest"', '"content-digest" "@status"')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('"content-digest"', '"content-digest" "@method"')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput('"content-digest"', '"content-digest" "Content-Type"')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput(/;nonce="[^"]*"/, "")), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput(/;expires=\d+/, "")), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput("created=1800000000", 'created="1800000000"')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput("expires=1800000060", "expires=1800000000")), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput("#key-1", "#key-2")), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(editInput(/keyid="[^"]*"/, 'keyid="test-key-ed25519"')), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* v(withHeaders({ "content-digest": "sha-256=:not bytes" })), "SIGNATURE_MALFORMED")

      assert.strictEqual(yield* v({ ...req, body: utf8("{}") }), "DIGEST_MISMATCH")
      assert.strictEqual(yield* v(withHeaders({ "content-digest": undefined })), "DIGEST_MISMATCH")
      assert.strictEqual(yield* v(withHeaders({ "content-digest": `sha-512=:${createHash("sha512").update(BODY).digest("base64")}:` })), "DIGEST_MISMATCH")

      assert.strictEqual(yield* v({ ...req, method: "PUT" }), "SIGNATURE_INVALID")
      assert.strictEqual(yield* v({ ...req, url: "https://agent.example/v1/run?stream=1" }), "SIGNATURE_INVALID")
      // A new body with its own correct digest still breaks the signature, which covers the digest.
      const other = utf8("{}")
      const keys = yield* Keys
      assert.strictEqual(yield* v({ ...withHeaders({ "content-digest": contentDigest(keys, other) }), body: other }), "SIGNATURE_INVALID")
      assert.strictEqual(yield* v(yield* signedBy(carol, { keyId: vm(alice) })), "SIGNATURE_INVALID")

      const byCarol = yield* signedBy(carol)
      assert.strictEqual(yield* v(byCarol), "KEY_NOT_FOUND")
      const revoked = new KeyRevoked({ code: "KEY_REVOKED", message: "revoked", verificationMethod: vm(alice), revoked: "2026-01-01T00:00:00Z" })
      assert.strictEqual(yield* v(req, { resolveKey: () => Effect.fail(revoked) }), "KEY_NOT_FOUND")
      const down = new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: "registry down", did: alice.did })
      assert.strictEqual(yield* v(req, { resolveKey: () => Effect.fail(down) }), "RESOLVER_UNAVAILABLE")

      const full = makeMemory({ capacity: 1 })
      yield* full.record("did:mesh:someone-else", "n", Number.MAX_SAFE_INTEGER)
      assert.strictEqual(yield* v(req, { nonceStore: full }), "NONCE_STORE_FULL")
      const quota = makeMemory({ capacity: 4, perSenderQuota: 1 })
      yield* verifyRequest(yield* signedBy(alice), { resolveKey, nonceStore: quota })
      assert.strictEqual(yield* v(req, { nonceStore: quota }), "NONCE_QUOTA_EXCEEDED")
      const broken = { record: () => Effect.fail(new NonceStoreUnavailable({ message: "database locked" })) }
      assert.strictEqual(yield* v(req, { nonceStore: broken }), "NONCE_STORE_UNAVAILABLE")

      // Order: the digest before the key, the time window before the signature.
      assert.strictEqual(yield* v({ ...byCarol, body: other }), "DIGEST_MISMATCH")
      yield* TestClock.adjust("2 hours")
      assert.strictEqual(yield* v({ ...req, method: "PUT" }), "SIGNATURE_EXPIRED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("time window: NOT_YET_VALID and EXPIRED honour the tolerance, maxAgeSeconds caps the lifetime (TestClock)", () =>
    Effect.gen(function* () {
      const { alice, resolveKey } = yield* setup
      const req = yield* signedBy(alice)
      const at = (ms: number, options: Partial<VerifyRequestOptions> = {}, r = req) =>
        Effect.zipRight(TestClock.setTime(ms), Effect.either(verifyRequest(r, { resolveKey, nonceStore: makeMemory(), ...options })))
      const codeAt = (...args: Parameters<typeof at>) =>
        Effect.map(at(...args), (r) => (r._tag === "Left" ? r.left.code : "OK"))

      assert.strictEqual(yield* codeAt(T0 - 30_000), "OK") // signer's clock ahead by the tolerance
      assert.strictEqual(yield* codeAt(T0 - 30_001), "SIGNATURE_NOT_YET_VALID")
      assert.strictEqual(yield* codeAt(T0 + 60_000 + 29_999), "OK")
      assert.strictEqual(yield* codeAt(T0 + 60_000 + 30_000), "SIGNATURE_EXPIRED")
      assert.strictEqual(yield* codeAt(T0 + 59_999, { clockToleranceMs: 0 }), "OK")
      assert.strictEqual(yield* codeAt(T0 + 60_000, { clockToleranceMs: 0 }), "SIGNATURE_EXPIRED")

      yield* TestClock.setTime(T0)
      const long = yield* signedBy(alice, { ttlSeconds: 3600 })
      assert.strictEqual(yield* codeAt(T0 + 300_000 + 29_999, {}, long), "OK")
      assert.strictEqual(yield* codeAt(T0 + 300_000 + 30_000, {}, long), "SIGNATURE_EXPIRED")
      assert.strictEqual(yield* codeAt(T0 + 300_000 + 30_000, { maxAgeSeconds: 3600 }, long), "OK")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("checkRequestAt judges at the time it is given, whatever the clock says; recordNonce at that time refuses a replay", () =>
    Effect.gen(function* () {
      const { alice, resolveKey } = yield* setup
      const req = yield* signedBy(alice)
      const keys = yield* Keys
      const codeAt = (ms: number) => Effect.map(Effect.either(checkRequestAt(keys, req, { resolveKey }, ms)), (r) => (r._tag === "Left" ? r.left.code : "OK"))
      yield* TestClock.setTime(T0 + 10 * 60_000) // the clock says expired; the time given decides
      assert.strictEqual(yield* codeAt(T0 - 30_001), "SIGNATURE_NOT_YET_VALID")
      assert.strictEqual(yield* codeAt(T0 + 60_000 + 29_999), "OK")
      assert.strictEqual(yield* codeAt(T0 + 60_000 + 30_000), "SIGNATURE_EXPIRED")
      const checked = yield* checkRequestAt(keys, req, { resolveKey }, T0)
      const store = makeMemory()
      yield* recordNonce(checked, store, T0)
      assert.strictEqual((yield* Effect.flip(recordNonce(checked, store, T0 + 1000))).code, "REPLAYED")
      // Past the time the nonce is kept, the store (judging at the time given, not the clock's) takes it again.
      yield* recordNonce(checked, store, checked.retainUntilMs)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the nonce is recorded only after the signature verifies, per DID, until the signature can no longer validate", () =>
    Effect.gen(function* () {
      const { alice, carol } = yield* setup
      const resolveKey = makeStatic({
        [alice.did]: { publicKey: alice.publicKeyBytes, keyVersion: 1 },
        [carol.did]: { publicKey: carol.publicKeyBytes, keyVersion: 1 }
      }).resolve
      const nonceStore = makeMemory()
      const nonce = "fresh-nonce-0123456789"
      const forged = yield* signedBy(carol, { keyId: vm(alice), nonce })
      assert.strictEqual(yield* codeOf(verifyRequest(forged, { resolveKey, nonceStore })), "SIGNATURE_INVALID")
      const genuine = yield* signedBy(alice, { nonce })
      yield* verifyRequest(genuine, { resolveKey, nonceStore })
      // Another signer may use the same nonce: nonces are scoped by DID.
      yield* verifyRequest(yield* signedBy(carol, { nonce }), { resolveKey, nonceStore })
      yield* TestClock.adjust("89 seconds")
      assert.strictEqual(yield* codeOf(verifyRequest(genuine, { resolveKey, nonceStore })), "REPLAYED")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* codeOf(verifyRequest(genuine, { resolveKey, nonceStore })), "SIGNATURE_EXPIRED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("picks the mesh-sig signature among others, in one field line or several", () =>
    Effect.gen(function* () {
      const { alice, resolveKey } = yield* setup
      const req = yield* signedBy(alice)
      const otherInput = 'other=("@method");created=1800000000;keyid="someone-else"'
      const otherSignature = `other=:${Buffer.alloc(64).toString("base64")}:`
      const oneLine = {
        ...req,
        headers: { ...req.headers, "signature-input": `${otherInput}, ${header(req, "signature-input")}`, signature: `${otherSignature}, ${header(req, "signature")}` }
      }
      yield* verifyRequest(oneLine, { resolveKey, nonceStore: makeMemory() })
      const lines = {
        ...req,
        headers: { ...req.headers, "signature-input": [otherInput, header(req, "signature-input")], signature: [otherSignature, header(req, "signature")] }
      }
      yield* verifyRequest(lines, { resolveKey, nonceStore: makeMemory() })
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("interop: requests signed by http-message-signatures verify here, ours verify there", () =>
    Effect.gen(function* () {
      const { alice, resolveKey } = yield* setup
      const { privateKey, publicKey } = nodeKeyPair(alice)
      // Several digest algorithms: sha-256 is the one checked, the others are ignored.
      const digest = `sha-512=:${createHash("sha512").update(BODY).digest("base64")}:, sha-256=:${createHash("sha256").update(BODY).digest("base64")}:`
      const libSign = (name: string, fields: Array<string>, nonce: string) =>
        Effect.promise(() =>
          httpbis.signMessage(
            {
              key: { id: vm(alice), alg: "ed25519", sign: async (data) => nodeSign(null, data, privateKey) },
              name,
              // Another order than ours: the base follows whatever order the signer chose.
              params: ["keyid", "alg", "created", "expires", "nonce", "tag"],
              fields,
              paramValues: { created: new Date(T0), expires: new Date(T0 + 60_000), nonce, tag: "mesh-sig" }
            },
            { method: "POST", url: TARGET, headers: { "content-type": "application/json", "content-digest": digest } }
          )
        ).pipe(Effect.map((signed): SignableRequest => ({ ...POST, headers: lowerCaseHeaders(signed.headers) })))

      const theirs = yield* libSign("lib", [...REQUIRED_COMPONENTS], "lib-nonce-0123456789")
      const verified = yield* verifyRequest(theirs, { resolveKey, nonceStore: makeMemory() })
      assert.deepStrictEqual(verified, { did: alice.did, keyId: vm(alice), created: T0 / 1000, nonce: "lib-nonce-0123456789" })
      const wider = yield* libSign(
        "wide",
        ["@request-target", "@method", "@authority", "@scheme", "@path", "@query", "content-type", "@target-uri", "content-digest"],
        "lib-nonce-wide-0123456789"
      )
      yield* verifyRequest(wider, { resolveKey, nonceStore: makeMemory() })
      const widerWith = (contentType: string | undefined) => ({ ...wider, headers: { ...wider.headers, "content-type": contentType } })
      assert.strictEqual(yield* codeOf(verifyRequest(widerWith(undefined), { resolveKey, nonceStore: makeMemory() })), "SIGNATURE_INVALID")
      assert.strictEqual(yield* codeOf(verifyRequest(widerWith("text/plain\n\"@method\": POST"), { resolveKey, nonceStore: makeMemory() })), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* codeOf(verifyRequest({ ...theirs, method: "PUT" }, { resolveKey, nonceStore: makeMemory() })), "SIGNATURE_INVALID")

      const ours = yield* signRequest(POST, { privateKey: alice.privateKey, keyId: vm(alice) })
      const libVerify = (method: string) =>
        atWallClock(
          T0 + 1_000,
          Effect.promise(() =>
            httpbis.verifyMessage(
              {
                keyLookup: async (params) =>
                  params.keyid === vm(alice) ? { id: vm(alice), algs: ["ed25519"], verify: async (data, signature) => nodeVerify(null, data, publicKey, signature) } : null,
                requiredFields: [...REQUIRED_COMPONENTS],
                requiredParams: ["created", "expires", "nonce", "keyid", "tag", "alg"]
              },
              { method, url: TARGET, headers: { ...ours } }
            )
          )
        )
      assert.isTrue(yield* libVerify("POST"))
      assert.isFalse(yield* libVerify("PUT"))
    }).pipe(Effect.provide(KeysNative.layer)))
})
