import { assert, describe, it } from "@effect/vitest"
import canonicalize from "canonicalize"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Logger from "effect/Logger"
import * as TestClock from "effect/TestClock"
import * as fc from "fast-check"
import { generateDid, type MeshIdentity } from "../src/core/Did.js"
import { buildEnvelope, canonicalCheckedEnvelope, canonicalEnvelope, Envelope, isEnvelope, MESH_REQUEST, newCorrelationId, validateEnvelope } from "../src/core/Envelope.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeMemory } from "../src/core/NonceStore.js"
import { toBase64 } from "../src/core/internal/bytes.js"

const parties = Effect.gen(function* () {
  const alice = yield* generateDid("alice", "http://127.0.0.1:1")
  const bob = yield* generateDid("bob")
  const carol = yield* generateDid("carol")
  return { alice, bob, carol }
})

const request = (from: MeshIdentity, to: MeshIdentity, extra: { ttlSeconds?: number } = {}) =>
  buildEnvelope({
    type: MESH_REQUEST,
    from: from.did,
    to: to.did,
    body: { capability: "echo", params: { text: "hi", n: 1 } },
    privateKey: from.privateKey,
    ...extra
  })

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) =>
  Effect.map(Effect.flip(e), (err) => err.code)

describe("Envelope", () => {
  it.effect("builds a signed envelope with every field, and it validates once", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      yield* TestClock.setTime(Date.UTC(2026, 5, 1))
      const env = yield* request(alice, bob)
      assert.deepStrictEqual(Object.keys(env).sort(), ["body", "correlationId", "createdAt", "expiresAt", "from", "id", "nonce", "proof", "to", "type"])
      assert.strictEqual(env.createdAt, "2026-06-01T00:00:00.000Z")
      assert.strictEqual(env.expiresAt, "2026-06-01T00:05:00.000Z")
      assert.strictEqual(env.proof.verificationMethod, `${alice.did}#key-1`)
      assert.strictEqual(env.proof.cryptosuite, "eddsa-jcs-2022")
      const store = makeMemory()
      const ok = yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, store)
      assert.deepStrictEqual(ok, env)
      // publicKeyB64 works as well as raw bytes; a second validation is a replay.
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKey, bob.did, store)), "REPLAYED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("accepts the key as raw seed bytes, PKCS#8 or base64, and keeps a given correlationId", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      const correlationId = newCorrelationId()
      for (const privateKey of [alice.privateKey.seed, alice.privateKey.toPkcs8(), toBase64(alice.privateKey.toPkcs8())]) {
        const env = yield* buildEnvelope({ type: "MeshResponse", from: alice.did, to: bob.did, correlationId, body: { capability: "echo", result: 1 }, privateKey })
        assert.strictEqual(env.correlationId, correlationId)
        yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, makeMemory())
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("refuses to build with a bad DID, key, TTL, type or body", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      const base = { type: MESH_REQUEST, from: alice.did as string, to: bob.did as string, body: {}, privateKey: alice.privateKey }
      assert.strictEqual(yield* codeOf(buildEnvelope({ ...base, from: "alice" })), "INVALID_DID")
      assert.strictEqual(yield* codeOf(buildEnvelope({ ...base, privateKey: new Uint8Array(5) })), "MALFORMED_KEY")
      assert.strictEqual(yield* codeOf(buildEnvelope({ ...base, ttlSeconds: 0 })), "TTL_TOO_LONG")
      assert.strictEqual(yield* codeOf(buildEnvelope({ ...base, ttlSeconds: 86_401 })), "TTL_TOO_LONG")
      assert.strictEqual(yield* codeOf(buildEnvelope({ ...base, type: "" })), "MALFORMED")
      assert.strictEqual(yield* codeOf(buildEnvelope({ ...base, body: { n: Number.NaN } })), "MALFORMED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("every refusal code, in validation order", () =>
    Effect.gen(function* () {
      const { alice, bob, carol } = yield* parties
      yield* TestClock.setTime(1_800_000_000_000)
      const env = yield* request(alice, bob)
      const v = (e: unknown, opts: Parameters<typeof validateEnvelope>[4] = {}, key: Uint8Array = alice.publicKeyBytes, me: string = bob.did) =>
        codeOf(validateEnvelope(e, key, me, makeMemory(), opts))

      assert.strictEqual(yield* v({ ...env, nonce: undefined }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, nonce: "short" }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, createdAt: "yesterday" }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, body: [1, 2] }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, proof: { ...env.proof, cryptosuite: "eddsa-rdfc-2022" } }), "MALFORMED")
      assert.strictEqual(yield* v({ ...env, expiresAt: env.createdAt }), "MALFORMED")
      assert.strictEqual(yield* v("not an envelope"), "MALFORMED")
      assert.strictEqual(yield* v(env, {}, alice.publicKeyBytes, carol.did), "WRONG_RECIPIENT")
      assert.strictEqual(yield* v(env, { maxTtlSeconds: 60 }), "TTL_TOO_LONG")
      assert.strictEqual(yield* v({ ...env, body: { capability: "echo", params: { text: "hi", n: 2 } } }), "SIGNATURE_INVALID")
      assert.strictEqual(yield* v(env, {}, carol.publicKeyBytes), "SIGNATURE_INVALID")
      assert.strictEqual(yield* v(env, {}, new Uint8Array(3)), "SIGNATURE_INVALID")
      // A full store refuses rather than forgetting.
      const full = makeMemory({ capacity: 1 })
      yield* validateEnvelope(yield* request(carol, bob), carol.publicKeyBytes, bob.did, full)
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKeyBytes, bob.did, full)), "NONCE_STORE_FULL")
      // Addressee is checked before the signature: a forged envelope to someone else is WRONG_RECIPIENT.
      assert.strictEqual(yield* v({ ...env, to: carol.did }, {}, alice.publicKeyBytes, bob.did), "WRONG_RECIPIENT")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("time window: NOT_YET_VALID and EXPIRED honour the clock tolerance (TestClock)", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      const t0 = 1_800_000_000_000
      yield* TestClock.setTime(t0)
      const env = yield* request(alice, bob, { ttlSeconds: 60 })
      const at = (ms: number, tol?: number) =>
        Effect.zipRight(TestClock.setTime(ms), Effect.either(validateEnvelope(env, alice.publicKeyBytes, bob.did, makeMemory(), tol === undefined ? {} : { clockToleranceMs: tol })))
      assert.strictEqual((yield* at(t0 - 30_000))._tag, "Right") // sender's clock ahead by the default tolerance
      const early = yield* at(t0 - 30_001)
      assert.isTrue(early._tag === "Left" && early.left.code === "NOT_YET_VALID")
      assert.strictEqual((yield* at(t0 + 60_000 + 29_999))._tag, "Right")
      const late = yield* at(t0 + 60_000 + 30_000)
      assert.isTrue(late._tag === "Left" && late.left.code === "EXPIRED")
      const strict = yield* at(t0 + 60_000, 0)
      assert.isTrue(strict._tag === "Left" && strict.left.code === "EXPIRED")
      assert.strictEqual((yield* at(t0 + 59_999, 0))._tag, "Right")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the nonce is recorded only after the signature verifies", () =>
    Effect.gen(function* () {
      const { alice, bob, carol } = yield* parties
      const env = yield* request(alice, bob)
      const store = makeMemory()
      // Forgery with the same nonce, signed by carol: refused without burning the nonce.
      assert.strictEqual(yield* codeOf(validateEnvelope(env, carol.publicKeyBytes, bob.did, store)), "SIGNATURE_INVALID")
      yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, store)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a nonce may be reused once its envelope can no longer validate, not before", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      const store = makeMemory()
      yield* TestClock.setTime(1_800_000_000_000)
      const env = yield* request(alice, bob, { ttlSeconds: 10 })
      yield* validateEnvelope(env, alice.publicKeyBytes, bob.did, store)
      yield* TestClock.adjust("39 seconds")
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKeyBytes, bob.did, store)), "REPLAYED")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(yield* codeOf(validateEnvelope(env, alice.publicKeyBytes, bob.did, store)), "EXPIRED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("skipSignature accepts without checking and says so in the log", () =>
    Effect.gen(function* () {
      const { alice, bob, carol } = yield* parties
      const env = yield* request(alice, bob)
      const lines: Array<string> = []
      const logger = Logger.make(({ message, logLevel }) => lines.push(`${logLevel.label} ${String(message)}`))
      yield* validateEnvelope(env, carol.publicKeyBytes, bob.did, makeMemory(), { skipSignature: true }).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      assert.isTrue(lines.some((l) => l.startsWith("WARN") && l.includes("NOT checked")), lines.join("\n"))
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the same envelope validated by 200 concurrent fibers is accepted exactly once", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      const env = yield* request(alice, bob)
      const store = makeMemory()
      const results = yield* Effect.forEach(
        Array.from({ length: 200 }, () => env),
        (e) => Effect.either(validateEnvelope(e, alice.publicKeyBytes, bob.did, store)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter((r) => r._tag === "Right").length, 1)
      assert.isTrue(results.every((r) => r._tag === "Right" || r.left.code === "REPLAYED"))
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("property: changing any field or any character of a signed envelope fails validation", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      // Built and checked on the real clock: fast-check's synchronous properties run outside the TestClock.
      const env = Effect.runSync(request(alice, bob).pipe(Effect.provide(KeysNative.layer)))
      const json = JSON.stringify(env)
      const paths = leafPaths(env)
      const check = (mutated: unknown) =>
        Effect.runSync(Effect.either(validateEnvelope(mutated, alice.publicKeyBytes, bob.did, makeMemory())).pipe(Effect.provide(KeysNative.layer)))
      assert.strictEqual(check(env)._tag, "Right")
      // Any leaf replaced by a different JSON value.
      fc.assert(
        fc.property(fc.constantFrom(...paths), fc.jsonValue(), (p, value) => {
          fc.pre(JSON.stringify(value) !== JSON.stringify(getPath(env, p)))
          assert.strictEqual(check(setPath(env, p, value))._tag, "Left")
        }),
        { numRuns: 300 }
      )
      // Any single character of the serialized envelope changed, as long as it still parses.
      fc.assert(
        fc.property(fc.nat(json.length - 1), fc.integer({ min: 32, max: 126 }), (i, c) => {
          const s = json.slice(0, i) + String.fromCharCode(c) + json.slice(i + 1)
          fc.pre(s !== json)
          let parsed: unknown
          try {
            parsed = JSON.parse(s)
          } catch {
            return
          }
          fc.pre(JSON.stringify(parsed) !== json)
          assert.strictEqual(check(parsed)._tag, "Left", s)
        }),
        { numRuns: 500 }
      )
    }).pipe(Effect.provide(KeysNative.layer)))
})

type Path = ReadonlyArray<string>
const leafPaths = (v: unknown, prefix: Path = []): Array<Path> =>
  typeof v === "object" && v !== null ? Object.entries(v).flatMap(([k, x]) => [...leafPaths(x, [...prefix, k]), ...(typeof x === "object" && x !== null ? [[...prefix, k]] : [])]) : [prefix]
const getPath = (v: unknown, p: Path): unknown => p.reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], v)
const setPath = (v: unknown, p: Path, value: unknown): unknown => {
  if (p.length === 0) return value
  const [k, ...rest] = p
  const o = v as Record<string, unknown>
  return { ...o, [k!]: setPath(o[k!], rest, value) }
}

describe("Envelope fast paths agree with the generic ones", () => {
  const base = Effect.runSync(
    Effect.gen(function* () {
      const { alice, bob } = yield* parties
      return yield* request(alice, bob)
    }).pipe(Effect.provide(KeysNative.layer))
  )
  const decode = Schema.decodeUnknownEither(Envelope, { onExcessProperty: "error" })

  it("canonicalEnvelope equals canonicalize on arbitrary strings and bodies", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" }), fc.jsonValue(), fc.string({ unit: "binary" }), fc.string(), fc.string(), (type, id, params, created, correlationId, proofPurpose) => {
        const { proof, ...u } = { ...base, type, id, correlationId, body: { capability: "x", params } }
        const { proofValue: _pv, ...o } = { ...proof, created, proofPurpose }
        const fast = canonicalEnvelope(u, o)
        const slow = [canonicalize(o), canonicalize(u)]
        if (fast !== undefined) assert.deepStrictEqual([fast.options, fast.unsecured], slow)
        else assert.isTrue([type, id, created].some((s) => /[\uD800-\uDFFF]/.test(s)) || JSON.stringify(params).includes("\\u"))
      }),
      { numRuns: 1000 }
    )
  })

  it("canonicalCheckedEnvelope equals canonicalEnvelope on every envelope that passes the checks made before hashing", () => {
    const paths = ["from", "to", "nonce", "createdAt", "expiresAt", "proof.created", "proof.type", "proof.cryptosuite", "proof.verificationMethod", "proof.@context"]
    const odd = fc.constantFrom("did:mesh:Alice", "did:mesh:al\"ice", "did:mesh:bob", "2026-01-01T00:00:00Z", "2026-01-01t00:00:00z", "AAAAAAAAAAAAAAAA\\AA", "AAAAAAAAAAAAAAAAAAAAAA", "DataIntegrityProof", "eddsa-jcs-2022", `${base.from}#key-1`, ["a"])
    const text = fc.string({ unit: "binary", minLength: 1, maxLength: 40 })
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.oneof(odd, text), text, text, text, text, fc.jsonValue(), (p, value, type, id, correlationId, proofPurpose, params) => {
        const frame = { ...base, type, id, correlationId, body: { capability: "x", params }, proof: { ...base.proof, proofPurpose } }
        const [a, b] = p.split(".") as [string, string | undefined]
        const mutated: Record<string, unknown> = b === undefined ? { ...frame, [a]: value } : { ...frame, proof: { ...frame.proof, [b]: value } }
        if (!isEnvelope(mutated) || mutated.proof.created !== mutated.createdAt || mutated.proof.verificationMethod !== `${mutated.from}#key-1`) return
        const { proof, ...u } = mutated
        const { proofValue: _pv, ...o } = proof
        assert.deepStrictEqual(canonicalCheckedEnvelope(u, o), canonicalEnvelope(u, o))
      }),
      { numRuns: 2000 }
    )
  })

  it("isEnvelope judges exactly as the Envelope schema (excess properties refused)", () => {
    const paths = ["type", "id", "from", "to", "correlationId", "nonce", "createdAt", "expiresAt", "body", "proof", "proof.type", "proof.cryptosuite", "proof.created", "proof.verificationMethod", "proof.proofPurpose", "proof.@context", "proof.proofValue", "extra", "proof.extra"]
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.oneof(fc.jsonValue(), fc.constant(undefined), fc.constantFrom("did:mesh:Alice", "did:mesh:ok", "2026-01-01T00:00:00Z", "zabc", "AAAAAAAAAAAAAAAAAAAAAA", ["a"], [1])), (p, value) => {
        const [a, b] = p.split(".") as [string, string | undefined]
        const mutated: Record<string, unknown> = b === undefined ? { ...base, [a]: value } : { ...base, proof: { ...base.proof, [b]: value } }
        assert.strictEqual(isEnvelope(mutated), Either.isRight(decode(mutated)), `${p} = ${JSON.stringify(value)}`)
      }),
      { numRuns: 2000 }
    )
    assert.isTrue(isEnvelope(base))
  })
})
