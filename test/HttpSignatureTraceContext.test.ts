/**
 * mesh-sig covers the correlation id and the traceparent when a request carries them (docs/protocol.md §10.1):
 * swapping either breaks the signature, and a signature that covers neither (an older signer) still verifies.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as TestClock from "effect/TestClock"
import { parseDictionary } from "structured-headers"
import { generateDid } from "../src/core/Did.js"
import { COVERED_WHEN_PRESENT, type SignableRequest, signRequest, verifyRequest } from "../src/core/HttpSignature.js"
import { makeStatic } from "../src/core/KeyResolver.js"
import { makeMemory } from "../src/core/NonceStore.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { utf8 } from "../src/core/internal/bytes.js"

const T0 = 1_800_000_000_000
const TARGET = "https://agent.example/v1/run"
const BODY = utf8(JSON.stringify({ message: "hi" }))
const TRACE = { "x-correlation-id": "cid-42", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }

const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const alice = yield* generateDid("alice")
  const options = { resolveKey: makeStatic({ [alice.did]: { publicKey: alice.publicKeyBytes, keyVersion: 1 } }).resolve, nonceStore: makeMemory() }
  return { alice, options }
})

const coveredBy = (signatureInput: string) => (parseDictionary(signatureInput).get("sig1") as [Array<[string, unknown]>, unknown])[0].map(([n]) => n)

describe("mesh-sig and the trace context", () => {
  it.effect("a signer covers x-correlation-id and traceparent when present; swapping either is SIGNATURE_INVALID", () =>
    Effect.gen(function* () {
      const { alice, options } = yield* setup
      const signed = yield* signRequest({ method: "POST", url: TARGET, body: BODY, headers: TRACE }, { privateKey: alice.privateKey, keyId: `${alice.did}#key-1` })
      assert.deepStrictEqual(coveredBy(signed["signature-input"]), ["@method", "@target-uri", "content-digest", ...COVERED_WHEN_PRESENT])
      const req: SignableRequest = { method: "POST", url: TARGET, body: BODY, headers: { ...TRACE, ...signed } }
      const ok = yield* verifyRequest(req, options)
      assert.strictEqual(ok.did, alice.did)

      const swappedTrace = yield* Effect.either(
        verifyRequest({ ...req, headers: { ...req.headers, traceparent: "00-11111111111111111111111111111111-2222222222222222-01" } }, { ...options, nonceStore: makeMemory() })
      )
      assert.isTrue(Either.isLeft(swappedTrace) && swappedTrace.left.code === "SIGNATURE_INVALID")
      const swappedCid = yield* Effect.either(verifyRequest({ ...req, headers: { ...req.headers, "x-correlation-id": "other" } }, { ...options, nonceStore: makeMemory() }))
      assert.isTrue(Either.isLeft(swappedCid) && swappedCid.left.code === "SIGNATURE_INVALID")
      const dropped = yield* Effect.either(verifyRequest({ ...req, headers: { ...signed, "x-correlation-id": "cid-42" } }, { ...options, nonceStore: makeMemory() }))
      assert.isTrue(Either.isLeft(dropped) && dropped.left.code === "SIGNATURE_INVALID")
    }).pipe(Effect.provide(KeysNative.layer))
  )

  it.effect("a signature covering neither (an older signer) still verifies on a request that carries both", () =>
    Effect.gen(function* () {
      const { alice, options } = yield* setup
      const signed = yield* signRequest({ method: "POST", url: TARGET, body: BODY }, { privateKey: alice.privateKey, keyId: `${alice.did}#key-1` })
      assert.deepStrictEqual(coveredBy(signed["signature-input"]), ["@method", "@target-uri", "content-digest"])
      const ok = yield* verifyRequest({ method: "POST", url: TARGET, body: BODY, headers: { ...TRACE, ...signed } }, options)
      assert.strictEqual(ok.did, alice.did)
    }).pipe(Effect.provide(KeysNative.layer))
  )
})
