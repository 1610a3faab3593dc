/**
 * `checkRequest`'s `isAllowed`: a request whose keyid names a DID outside the allow-list is refused before the key
 * resolver is asked, signed or not, so such traffic costs the verifier no lookup.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { generateDid, type MeshIdentity } from "../src/core/Did.js"
import {
  type CheckedSignature,
  checkRequest,
  type HttpSignatureError,
  type SignableRequest,
  signRequest
} from "../src/core/HttpSignature.js"
import { type KeyResolverApi, makeStatic } from "../src/core/KeyResolver.js"
import type { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { utf8 } from "../src/core/internal/bytes.js"

const T0 = 1_800_000_000_000
const POST = { method: "POST", url: "https://agent.example/v1/run", body: utf8(JSON.stringify({ message: "hi" })) }

/** A resolver knowing `ids`, counting every lookup. */
const countingResolver = (ids: ReadonlyArray<MeshIdentity>) => {
  const inner = makeStatic(Object.fromEntries(ids.map((id) => [id.did, { publicKey: id.publicKeyBytes, keyVersion: 1 }])))
  const calls: Array<string> = []
  const resolveKey: KeyResolverApi["resolve"] = (did) => Effect.suspend(() => (calls.push(did), inner.resolve(did)))
  return { calls, resolveKey }
}

const signedBy = (id: MeshIdentity, keyId = `${id.did}#key-1`) =>
  Effect.map(signRequest(POST, { privateKey: id.privateKey, keyId }), (headers): SignableRequest => ({ ...POST, headers }))

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(e), (err) => err.code)

describe("HttpSignature isAllowed", () => {
  it.effect("a DID the hook refuses is CALLER_NOT_ALLOWED and never reaches the resolver; an allowed one verifies", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const alice = yield* generateDid("alice")
      const carol = yield* generateDid("carol")
      // carol's key is known: without the hook her validly signed request would cost a lookup and pass.
      const { calls, resolveKey } = countingResolver([alice, carol])
      const asked: Array<string> = []
      const isAllowed = (did: string) => (asked.push(did), did === alice.did.toLowerCase())

      const fromCarol = yield* signedBy(carol)
      const refused = yield* Effect.flip(checkRequest(fromCarol, { resolveKey, isAllowed }))
      assert.strictEqual(refused.code, "CALLER_NOT_ALLOWED")
      assert.strictEqual(refused._tag, "CallerNotAllowed")
      assert.deepStrictEqual(calls, [])

      // A request naming a DID nobody knows, signed by someone else's key: refused on the name alone.
      for (let i = 0; i < 20; i++) {
        const forged = yield* signedBy(carol, `did:mesh:random-${i}#key-1`)
        assert.strictEqual(yield* codeOf(checkRequest(forged, { resolveKey, isAllowed })), "CALLER_NOT_ALLOWED")
      }
      assert.deepStrictEqual(calls, [])

      // The hook sees the normalized DID, whatever case the keyid is spelled in.
      const shouted = yield* signedBy(carol, `${alice.did.toUpperCase().replace("DID:MESH:", "did:mesh:")}#key-1`)
      yield* Effect.either(checkRequest(shouted, { resolveKey, isAllowed }))
      assert.strictEqual(asked.at(-1), alice.did.toLowerCase())

      calls.length = 0
      const checked = yield* checkRequest(yield* signedBy(alice), { resolveKey, isAllowed })
      assert.strictEqual(checked.did, alice.did.toLowerCase())
      assert.deepStrictEqual(calls, [alice.did.toLowerCase()])

      // Without the hook the same refused request is looked up and verifies: the hook is what spares the resolver.
      calls.length = 0
      const unhooked = yield* checkRequest(fromCarol, { resolveKey })
      assert.strictEqual(unhooked.did, carol.did.toLowerCase())
      assert.strictEqual(calls.length, 1)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the hook runs after the request is parsed: a malformed request keeps its own code and asks neither", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const alice = yield* generateDid("alice")
      const { calls, resolveKey } = countingResolver([alice])
      let asked = 0
      const isAllowed = () => (asked++, false)
      const signed = yield* signedBy(alice)
      const noKeyId = { ...signed, headers: { ...signed.headers, "signature-input": String(signed.headers["signature-input"]).replace(/;keyid="[^"]*"/, "") } }
      assert.strictEqual(yield* codeOf(checkRequest(noKeyId, { resolveKey, isAllowed })), "SIGNATURE_MALFORMED")
      assert.strictEqual(yield* codeOf(checkRequest({ ...POST, headers: {} }, { resolveKey, isAllowed })), "SIGNATURE_MISSING")
      assert.strictEqual(asked, 0)
      assert.deepStrictEqual(calls, [])
    }).pipe(Effect.provide(KeysNative.layer)))

  it("without isAllowed the error channel is HttpSignatureError alone (existing callers are unchanged)", () => {
    const resolveKey = makeStatic({}).resolve
    const req: SignableRequest = { ...POST, headers: {} }
    // Type-level: these assignments would not compile if CallerNotAllowed leaked into the hook-less signature.
    const plain: Effect.Effect<CheckedSignature, HttpSignatureError, Keys> = checkRequest(req, { resolveKey })
    const hooked: Effect.Effect<CheckedSignature, { readonly code: string }, Keys> = checkRequest(req, { resolveKey, isAllowed: () => true })
    // @ts-expect-error with the hook, CallerNotAllowed is part of the error channel
    const unsound: Effect.Effect<CheckedSignature, HttpSignatureError, Keys> = checkRequest(req, { resolveKey, isAllowed: () => true })
    assert.isDefined(plain)
    assert.isDefined(hooked)
    assert.isDefined(unsound)
  })
})
