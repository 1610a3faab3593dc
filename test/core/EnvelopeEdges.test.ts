import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import fc from "fast-check"
import { generateDid } from "../../src/core/Did.js"
import {
  buildEnvelope,
  Envelope,
  type EnvelopeError,
  isEnvelope,
  MESH_REQUEST,
  MESH_RESPONSE,
  RequestBody,
  ResponseBody,
  validateEnvelope
} from "../../src/core/Envelope.js"
import { createProof } from "../../src/core/Proof.js"
import { makeMemory, NonceQuotaExceeded, type NonceStoreApi, NonceStoreUnavailable } from "../../src/core/NonceStore.js"
import { Keys, type KeysApi } from "../../src/core/Keys.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { wrongValue } from "../support/arbitraries.js"

const T0 = 1_800_000_000_000

const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const alice = yield* generateDid("alice")
  const bob = yield* generateDid("bob")
  const build = (over: { ttlSeconds?: number; type?: string } = {}) =>
    buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: bob.did, body: { capability: "echo", params: {} }, privateKey: alice.privateKey, ...over })
  return { alice, bob, build }
})

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(e), (err) => err.code)

describe("buildEnvelope at its bounds", () => {
  it.effect("lives 300 s by default; any lifetime up to a day; a type of 1 to 128 characters", () =>
    Effect.gen(function* () {
      const { build } = yield* setup
      const life = (e: Envelope) => Date.parse(e.expiresAt) - Date.parse(e.createdAt)
      assert.strictEqual(life(yield* build()), 300_000)
      assert.strictEqual(life(yield* build({ ttlSeconds: 86_400 })), 86_400_000)
      assert.strictEqual(life(yield* build({ ttlSeconds: 0.5 })), 500)
      assert.strictEqual((yield* build({ type: "t".repeat(128) })).type, "t".repeat(128))
      assert.strictEqual((yield* build({ type: "t" })).type, "t")
      assert.strictEqual(yield* codeOf(build({ type: "t".repeat(129) })), "MALFORMED")
      assert.strictEqual(yield* codeOf(build({ type: "" })), "MALFORMED")
      assert.strictEqual(yield* codeOf(build({ type: 7 as unknown as string })), "MALFORMED")
      for (const ttlSeconds of [Number.NaN, Number.POSITIVE_INFINITY, -1, 0, 86_400.001]) {
        assert.strictEqual(yield* codeOf(build({ ttlSeconds })), "TTL_TOO_LONG", String(ttlSeconds))
      }
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("validateEnvelope at its bounds", () => {
  it.effect("an envelope living exactly the longest lifetime is accepted; a millisecond more is not", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const day = yield* build({ ttlSeconds: 86_400 })
      yield* validateEnvelope(day, alice.publicKeyBytes, bob.did, makeMemory())
      const minute = yield* build({ ttlSeconds: 60 })
      yield* validateEnvelope(minute, alice.publicKeyBytes, bob.did, makeMemory(), { maxTtlSeconds: 60 })
      const longer = yield* build({ ttlSeconds: 60.001 })
      assert.strictEqual(yield* codeOf(validateEnvelope(longer, alice.publicKeyBytes, bob.did, makeMemory(), { maxTtlSeconds: 60 })), "TTL_TOO_LONG")
      // The recipient's DID is compared case-insensitively on the caller's side.
      yield* validateEnvelope(yield* build(), alice.publicKeyBytes, bob.did.toUpperCase().replace("DID:MESH:", "did:mesh:"), makeMemory())
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the nonce is kept until expiry plus the tolerance; a failing store's code reaches the caller", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const env = yield* build({ ttlSeconds: 60 })
      const recorded: Array<[string, string, number]> = []
      const spy: NonceStoreApi = { record: (s, n, until) => Effect.sync(() => void recorded.push([s, n, until])) }
      yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, spy, { clockToleranceMs: 5_000 })
      assert.deepStrictEqual(recorded, [[env.from, env.nonce, T0 + 60_000 + 5_000]])
      const failing = (e: NonceStoreUnavailable | NonceQuotaExceeded): NonceStoreApi => ({ record: () => Effect.fail(e) })
      const down = failing(new NonceStoreUnavailable({ message: "database is locked" }))
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKeyBytes, bob.did, down)), "NONCE_STORE_UNAVAILABLE")
      const quota = failing(new NonceQuotaExceeded({ sender: env.from, quota: 1, retryAfterMs: 10 }))
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKeyBytes, bob.did, quota)), "NONCE_QUOTA_EXCEEDED")
      // A quota of one live nonce, through the memory store: the second envelope from the sender is refused.
      const tight = makeMemory({ perSenderQuota: 1 })
      yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, tight)
      assert.strictEqual(yield* codeOf(validateEnvelope(yield* build(), alice.publicKeyBytes, bob.did, tight)), "NONCE_QUOTA_EXCEEDED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("proof fields must agree with the envelope: created, verification method, proofValue", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const env = yield* build()
      const v = (e: unknown) => codeOf(validateEnvelope(e, alice.publicKeyBytes, bob.did, makeMemory()))
      assert.strictEqual(yield* v({ ...env, proof: { ...env.proof, created: "2020-01-01T00:00:00.000Z" } }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, proof: { ...env.proof, verificationMethod: `${bob.did}#key-1` } }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, proof: { ...env.proof, proofValue: "z0OIl" } }), "SIGNATURE_INVALID")
      assert.strictEqual(yield* v({ ...env, proof: { ...env.proof, proofValue: "abc" } }), "MALFORMED")
      assert.strictEqual(yield* codeOf(validateEnvelope(env, "%%%not-base64", bob.did, makeMemory())), "SIGNATURE_INVALID")
    }).pipe(Effect.provide(KeysNative.layer)))
})

// Wrong types, boundary lengths and over-long values for each member: isEnvelope must judge exactly as the Schema.
const isBySchema = Schema.is(Envelope, { onExcessProperty: "error" })

const MEMBERS = ["type", "id", "from", "to", "correlationId", "nonce", "createdAt", "expiresAt", "body", "proof", "extra"] as const
const PROOF_MEMBERS = ["type", "cryptosuite", "created", "verificationMethod", "proofPurpose", "@context", "proofValue", "extra"] as const

describe("isEnvelope against the Schema", () => {
  it.effect("agrees on envelopes with any one member (or proof member) replaced by a wrong or boundary value", () =>
    Effect.gen(function* () {
      const { build } = yield* setup
      const env = yield* build()
      assert.isTrue(isEnvelope(env))
      assert.isFalse(isEnvelope({ ...env, nonce: 1234567890123456 }))
      assert.isFalse(isEnvelope({ ...env, createdAt: [env.createdAt] }))
      assert.isFalse(isEnvelope({ ...env, proof: { ...env.proof, "@context": [1] } }))
      assert.isTrue(isEnvelope({ ...env, proof: { ...env.proof, "@context": ["https://w3id.org/security/data-integrity/v2"] } }))
      fc.assert(
        fc.property(fc.constantFrom(...MEMBERS), fc.constantFrom(...PROOF_MEMBERS), fc.boolean(), wrongValue, (member, proofMember, inProof, value) => {
          const proof: Record<string, unknown> = { ...env.proof }
          const outer: Record<string, unknown> = { ...env }
          if (inProof) {
            if (value === undefined) delete proof[proofMember]
            else proof[proofMember] = value
            outer.proof = proof
          } else if (value === undefined) delete outer[member]
          else outer[member] = value
          assert.strictEqual(isEnvelope(outer), isBySchema(outer), JSON.stringify({ member: inProof ? `proof.${proofMember}` : member, value }))
        }),
        { numRuns: 2_000 }
      )
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("envelopes over a Keys layer without the sync variants", () => {
  // A layer of one's own may offer only the Effect operations; build and validate then go through them.
  const effectOnly = Layer.effect(
    Keys,
    Effect.map(Keys, ({ signSync: _s, verifySync: _v, ...rest }): KeysApi => rest)
  ).pipe(Layer.provide(Keys.noble))

  it.effect("builds, validates, and refuses a forged signature and a replay with the same codes", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const keys = yield* Keys
      assert.isUndefined(keys.signSync)
      const store = makeMemory()
      const env = yield* build()
      assert.strictEqual((yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, store)).id, env.id)
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKeyBytes, bob.did, store)), "REPLAYED")
      const other = yield* build()
      assert.strictEqual(yield* codeOf(validateEnvelope(other, bob.publicKeyBytes, bob.did, store)), "SIGNATURE_INVALID")
      assert.strictEqual(yield* codeOf(validateEnvelope(other, alice.publicKeyBytes.slice(0, 31), bob.did, store)), "SIGNATURE_INVALID")
      // Refused envelopes burnt no nonce: the authentic one still validates once.
      assert.strictEqual((yield* validateEnvelope(other, alice.publicKeyBytes, bob.did, store)).id, other.id)
    }).pipe(Effect.provide(effectOnly)))
})

describe("validateEnvelope on generated envelopes", () => {
  it.effect("an envelope with any one member replaced never validates; when the shape is wrong, the code is MALFORMED", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const env = yield* build()
      const run = Runtime.runPromise(yield* Effect.runtime<Keys>())
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.constantFrom(...MEMBERS), fc.constantFrom(...PROOF_MEMBERS), fc.boolean(), wrongValue, (member, proofMember, inProof, value) => {
            const proof: Record<string, unknown> = { ...env.proof }
            const outer: Record<string, unknown> = { ...env }
            if (inProof) {
              if (value === undefined) delete proof[proofMember]
              else proof[proofMember] = value
              outer.proof = proof
            } else if (value === undefined) delete outer[member]
            else outer[member] = value
            fc.pre(JSON.stringify(outer) !== JSON.stringify(env))
            return run(Effect.gen(function* () {
              const code = yield* codeOf(validateEnvelope(outer, alice.publicKey, bob.did, makeMemory()))
              if (!isBySchema(outer)) assert.strictEqual(code, "MALFORMED", JSON.stringify({ member: inProof ? `proof.${proofMember}` : member, value }))
            }))
          }),
          { numRuns: 300 }
        )
      )
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("Envelope refusals say what they refuse", () => {
  it.effect("each EnvelopeError names the member, the recipient, how far off the time is, the limit or the store", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const env = yield* build({ ttlSeconds: 60 })
      const refusal = (e: unknown, options: Parameters<typeof validateEnvelope>[4] = {}, store: NonceStoreApi = makeMemory(), key: Uint8Array | string = alice.publicKeyBytes) =>
        Effect.flip(validateEnvelope(e, key, bob.did, store, options))
      const cases: ReadonlyArray<readonly [Effect.Effect<EnvelopeError, unknown, Keys>, string, ReadonlyArray<string>]> = [
        [refusal({ ...env, nonce: "short" }), "MALFORMED", ["nonce"]],
        [refusal({ ...env, proof: { ...env.proof, created: "2020-01-01T00:00:00.000Z" } }), "MALFORMED", ["proof.created must equal createdAt"]],
        [refusal({ ...env, proof: { ...env.proof, verificationMethod: "did:mesh:bob#key-1" } }), "MALFORMED", [`proof must be by ${alice.did}#key-1`]],
        [refusal({ ...env, expiresAt: env.createdAt }), "MALFORMED", ["expiresAt must be after createdAt"]],
        [refusal(env, { maxTtlSeconds: 30 }), "TTL_TOO_LONG", ["lifetime exceeds 30 s"]],
        [Effect.flip(validateEnvelope(env, alice.publicKeyBytes, "did:mesh:carol", makeMemory())), "WRONG_RECIPIENT", [`addressed to ${bob.did}`]],
        [refusal({ ...env, body: { capability: "other" } }), "SIGNATURE_INVALID", ["signature does not verify"]],
        [refusal(env, {}, makeMemory(), "%%%"), "SIGNATURE_INVALID", ["not decodable"]],
        [refusal(env, {}, { record: () => Effect.fail(new NonceStoreUnavailable({ message: "database is locked" })) }), "NONCE_STORE_UNAVAILABLE", ["database is locked"]],
        [refusal(env, {}, { record: () => Effect.fail(new NonceQuotaExceeded({ sender: env.from, quota: 3, retryAfterMs: 10 })) }), "NONCE_QUOTA_EXCEEDED", [`${env.from} holds its quota of 3`]]
      ]
      for (const [effect, code, names] of cases) {
        const e = yield* effect
        assert.strictEqual(e._tag, "EnvelopeError")
        assert.strictEqual(e.code, code, names[0])
        for (const n of names) assert.include(e.message, n, code)
      }
      const store = makeMemory()
      yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, store)
      const replay = yield* refusal(env, {}, store)
      assert.strictEqual(replay.code, "REPLAYED")
      for (const n of [env.nonce, env.from]) assert.include(replay.message, n)
      const taken = makeMemory({ capacity: 1 })
      yield* taken.record("did:mesh:someone-else", "n", Number.MAX_SAFE_INTEGER)
      const full = yield* refusal(env, {}, taken)
      assert.strictEqual(full.code, "NONCE_STORE_FULL")
      assert.include(full.message, "1 live nonces")
      yield* TestClock.setTime(T0 - 40_000)
      assert.include((yield* refusal(env)).message, "40000 ms in the future")
      yield* TestClock.setTime(T0 + 100_000)
      assert.include((yield* refusal(env)).message, "expired 40000 ms ago")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("buildEnvelope's refusals name the bound, the type rule, the DID", () =>
    Effect.gen(function* () {
      const { build, alice } = yield* setup
      const ttl = yield* Effect.flip(build({ ttlSeconds: 0 }))
      assert.include(ttl.message, "ttlSeconds must be in (0, 86400], got 0")
      assert.include((yield* Effect.flip(build({ type: "" }))).message, "type must be a string of 1 to 128 characters")
      const bad = yield* Effect.flip(buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: "bob", body: {}, privateKey: alice.privateKey }))
      assert.strictEqual(bad._tag, "InvalidDid")
      assert.include(bad.message, "\"bob\"")
      const badFrom = yield* Effect.flip(buildEnvelope({ type: MESH_REQUEST, from: "alice", to: alice.did, body: {}, privateKey: alice.privateKey }))
      assert.include(badFrom.message, "\"alice\"")
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("Envelope shape details", () => {
  it.effect("a shape refusal says what is wrong: the extra member, the date, the body; a body that is not JSON is MALFORMED", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const env = yield* build()
      assert.strictEqual(env.proof.proofPurpose, "assertionMethod")
      const message = (e: unknown) => Effect.map(Effect.flip(validateEnvelope(e, alice.publicKeyBytes, bob.did, makeMemory())), (x) => `${x.code} ${x.message}`)
      assert.include(yield* message({ ...env, extra: 1 }), "extra")
      assert.include(yield* message({ ...env, createdAt: "2026-02-30T00:00:00Z" }), "not a date (RFC 3339, UTC)")
      assert.include(yield* message({ ...env, body: [] }), "JsonObject")
      const nan = yield* message({ ...env, body: { n: Number.NaN } })
      assert.match(nan, /^MALFORMED .*NaN/)
      const notJson = yield* Effect.flip(buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: bob.did, body: { n: Number.NaN }, privateKey: alice.privateKey }))
      assert.strictEqual(notJson.code, "MALFORMED")
      assert.include(notJson.message, "body is not JSON")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a nonce is base64url from end to end", () =>
    Effect.gen(function* () {
      const { build } = yield* setup
      const env = yield* build()
      for (const [e, ok] of [[{ ...env, nonce: "A".repeat(16) }, true], [{ ...env, nonce: `!${"A".repeat(16)}` }, false], [{ ...env, nonce: `${"A".repeat(16)}!` }, false]] as const) {
        assert.strictEqual(isEnvelope(e), ok, e.nonce)
        assert.strictEqual(isBySchema(e), ok, e.nonce)
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a proof carrying @context is hashed by the generic path, which covers it", () =>
    Effect.gen(function* () {
      const { alice, bob, build } = yield* setup
      const keys = yield* Keys
      const { proof, ...unsecured } = yield* build()
      const options = { type: proof.type, cryptosuite: proof.cryptosuite, created: proof.created, verificationMethod: proof.verificationMethod, proofPurpose: proof.proofPurpose, "@context": ["https://w3id.org/security/data-integrity/v2"] }
      const withContext = { ...unsecured, proof: yield* createProof(keys, alice.privateKey, options, unsecured) }
      yield* validateEnvelope(withContext, alice.publicKeyBytes, bob.did, makeMemory())
      const { "@context": _ctx, ...dropped } = withContext.proof
      assert.strictEqual(yield* codeOf(validateEnvelope({ ...withContext, proof: dropped }, alice.publicKeyBytes, bob.did, makeMemory())), "SIGNATURE_INVALID")
    }).pipe(Effect.provide(KeysNative.layer)))

  it("request and response bodies, and the type names the mesh sends", () => {
    assert.isTrue(Schema.is(RequestBody)({ capability: "echo", params: { a: 1 } }))
    assert.isFalse(Schema.is(RequestBody)({ params: {} }))
    assert.isTrue(Schema.is(ResponseBody)({ capability: "echo", result: null }))
    assert.isFalse(Schema.is(ResponseBody)({ capability: 1, result: null }))
    assert.deepStrictEqual([MESH_REQUEST, MESH_RESPONSE], ["MeshRequest", "MeshResponse"])
  })
})
