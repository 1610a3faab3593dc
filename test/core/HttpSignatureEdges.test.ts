import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import { generateDid, type MeshIdentity } from "../../src/core/Did.js"
import { checkRequest, type SignableRequest, signatureBase, signRequest, type VerifyRequestOptions, verifyRequest } from "../../src/core/HttpSignature.js"
import { KeyResolverUnavailable, makeStatic } from "../../src/core/KeyResolver.js"
import { utf8 } from "../../src/core/internal/bytes.js"
import { makeMemory, NonceStoreUnavailable } from "../../src/core/NonceStore.js"
import * as KeysNative from "../../src/node/KeysNative.js"

const T0 = 1_800_000_000_000
const TARGET = "https://agent.example/v1/run?stream=0"
const POST = { method: "POST", url: TARGET, body: utf8("{\"capability\":\"echo\"}") }
const vm = (id: MeshIdentity) => `${id.did}#key-1`

const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const alice = yield* generateDid("alice")
  const resolveKey = makeStatic({ [alice.did]: { publicKey: alice.publicKeyBytes, keyVersion: 1 } }).resolve
  const req = yield* Effect.map(
    signRequest(POST, { privateKey: alice.privateKey, keyId: vm(alice), nonce: "nonce-0123456789abcdef" }),
    (headers): SignableRequest => ({ ...POST, headers: { ...headers } })
  )
  return { alice, resolveKey, req }
})

describe("HttpSignature refusals say what they refuse", () => {
  it.effect("each HttpSignatureError names the field, component, parameter, DID or store at fault", () =>
    Effect.gen(function* () {
      const { alice, resolveKey, req } = yield* setup
      const input = req.headers["signature-input"] as string
      const withHeaders = (headers: Record<string, string | undefined>): SignableRequest => ({ ...req, headers: { ...req.headers, ...headers } })
      const editInput = (from: string | RegExp, to: string) => withHeaders({ "signature-input": input.replace(from, to) })
      const refusal = (r: SignableRequest, options: Partial<VerifyRequestOptions> = {}) =>
        Effect.flip(verifyRequest(r, { resolveKey, nonceStore: makeMemory(), ...options }))
      const down = new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: "registry down", did: alice.did })
      const cases: ReadonlyArray<readonly [SignableRequest, Partial<VerifyRequestOptions>, string, ReadonlyArray<string>]> = [
        [withHeaders({ signature: undefined }), {}, "SIGNATURE_MISSING", ["Signature and Signature-Input"]],
        [editInput("tag=\"mesh-sig\"", "tag=\"other\""), {}, "SIGNATURE_MISSING", ["tag=\"mesh-sig\""]],
        [withHeaders({ "signature-input": "sig1=(((" }), {}, "SIGNATURE_MALFORMED", ["Signature-Input is not a structured-field dictionary"]],
        [withHeaders({ signature: "sig1=not base64" }), {}, "SIGNATURE_MALFORMED", ["Signature is not a structured-field dictionary"]],
        [withHeaders({ signature: (req.headers["signature"] as string).replace("sig1=", "sig2=") }), {}, "SIGNATURE_MALFORMED", ["sig1"]],
        [editInput("\"@target-uri\" ", ""), {}, "SIGNATURE_MALFORMED", ["sig1 does not cover @target-uri"]],
        [editInput("\"content-digest\"", "\"content-digest\" \"@method\""), {}, "SIGNATURE_MALFORMED", ["\"@method\" is covered twice"]],
        [editInput("\"content-digest\"", "\"content-digest\";sf"), {}, "SIGNATURE_MALFORMED", ["\"content-digest\";sf"]],
        [editInput("created=1800000000", "created=\"1800000000\""), {}, "SIGNATURE_MALFORMED", ["created and expires"]],
        [editInput("expires=1800000060", "expires=1800000000"), {}, "SIGNATURE_MALFORMED", ["expires must be after created"]],
        [editInput(/;nonce="[^"]*"/, ""), {}, "SIGNATURE_MALFORMED", ["nonce"]],
        [editInput("alg=\"ed25519\"", "alg=\"rsa-pss-sha512\""), {}, "SIGNATURE_MALFORMED", ["alg must be \"ed25519\""]],
        [editInput("#key-1", "#key-2"), {}, "SIGNATURE_MALFORMED", ["keyid"]],
        [withHeaders({ "content-digest": undefined }), {}, "DIGEST_MISMATCH", ["no Content-Digest"]],
        [withHeaders({ "content-digest": "sha-256=:not bytes" }), {}, "SIGNATURE_MALFORMED", ["Content-Digest"]],
        [withHeaders({ "content-digest": "sha-512=:AAAA:" }), {}, "DIGEST_MISMATCH", ["sha-256"]],
        [{ ...req, body: utf8("{}") }, {}, "DIGEST_MISMATCH", ["digest of the body"]],
        [req, { resolveKey: () => Effect.fail(down) }, "RESOLVER_UNAVAILABLE", ["registry down"]],
        [{ ...req, method: "PUT" }, {}, "SIGNATURE_INVALID", ["sig1", alice.did]]
      ]
      for (const [r, options, code, names] of cases) {
        const e = yield* refusal(r, options)
        assert.strictEqual(e._tag, "HttpSignatureError")
        assert.strictEqual(e.code, code, names[0])
        for (const n of names) assert.include(e.message, n, code)
      }
      const unknown = yield* refusal(req, { resolveKey: makeStatic({}).resolve })
      assert.strictEqual(unknown.code, "KEY_NOT_FOUND")
      assert.include(unknown.message, alice.did)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the time window and the nonce store: how far off, which nonce and DID, which limit", () =>
    Effect.gen(function* () {
      const { alice, resolveKey, req } = yield* setup
      const at = (ms: number, options: Partial<VerifyRequestOptions> = {}) =>
        Effect.zipRight(TestClock.setTime(ms), Effect.flip(verifyRequest(req, { resolveKey, nonceStore: makeMemory(), ...options })))
      assert.include((yield* at(T0 - 40_000)).message, "40000 ms in the future")
      assert.include((yield* at(T0 + 100_000)).message, "expired 40000 ms ago")
      assert.include((yield* at(T0 + 100_000, { maxAgeSeconds: 30 })).message, "created more than 30 s ago")
      yield* TestClock.setTime(T0)
      const nonceStore = makeMemory()
      yield* verifyRequest(req, { resolveKey, nonceStore })
      const replay = yield* Effect.flip(verifyRequest(req, { resolveKey, nonceStore }))
      assert.strictEqual(replay.code, "REPLAYED")
      for (const n of ["nonce-0123456789abcdef", alice.did]) assert.include(replay.message, n)
      const full = makeMemory({ capacity: 1 })
      yield* full.record("did:mesh:someone-else", "n", Number.MAX_SAFE_INTEGER)
      assert.include((yield* Effect.flip(verifyRequest(req, { resolveKey, nonceStore: full }))).message, "1 live nonces")
      const quota = makeMemory({ capacity: 4, perSenderQuota: 1 })
      yield* quota.record(alice.did, "other", T0 + 45_000)
      const over = yield* Effect.flip(verifyRequest(req, { resolveKey, nonceStore: quota }))
      assert.strictEqual(over.code, "NONCE_QUOTA_EXCEEDED")
      assert.include(over.message, `${alice.did} holds its quota of 1`)
      assert.strictEqual(over.retryAfterSeconds, 45)
      const broken = { record: () => Effect.fail(new NonceStoreUnavailable({ message: "database locked" })) }
      assert.include((yield* Effect.flip(verifyRequest(req, { resolveKey, nonceStore: broken }))).message, "database locked")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("checkRequest: a caller the allow-list refuses is named, before its key is looked up", () =>
    Effect.gen(function* () {
      const { alice, req } = yield* setup
      let lookedUp = 0
      const e = yield* Effect.flip(checkRequest(req, {
        resolveKey: () => Effect.sync(() => void lookedUp++).pipe(Effect.zipRight(Effect.die("not asked"))),
        isAllowed: (did) => did !== alice.did
      }))
      assert.strictEqual(e._tag, "CallerNotAllowed")
      assert.strictEqual(e.code, "CALLER_NOT_ALLOWED")
      assert.include(e.message, alice.did)
      assert.strictEqual(lookedUp, 0)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("signatureBase names the URL, the absent field, the component with a line break; signRequest refuses a bad ttl", () =>
    Effect.gen(function* () {
      const { alice } = yield* setup
      const input = [[["@method", new Map()], ["x-trace", new Map()]], new Map()] as never
      const problem = (r: Parameters<typeof signatureBase>[0]) => {
        const b = signatureBase(r, input)
        return Either.isLeft(b) ? `${b.left.code} ${b.left.message}` : b.right
      }
      assert.include(problem({ method: "POST", url: "/relative", headers: { "x-trace": "1" } }), "SIGNATURE_MALFORMED \"/relative\" is not an absolute URI")
      assert.include(problem({ method: "POST", url: TARGET, headers: {} }), "SIGNATURE_INVALID covered field x-trace is absent")
      assert.include(problem({ method: "POST", url: TARGET, headers: { "x-trace": "a\nb" } }), "SIGNATURE_MALFORMED covered component x-trace holds a line break")
      assert.include(problem({ method: "POST", url: TARGET, headers: { "x-trace": ["a ", " b"] } }), "\"x-trace\": a, b")
      for (const ttlSeconds of [0, 1.5, -1]) {
        const exit = yield* Effect.exit(signRequest(POST, { privateKey: alice.privateKey, keyId: vm(alice), ttlSeconds }))
        assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes(`ttlSeconds must be a positive whole number, got ${ttlSeconds}`), String(ttlSeconds))
      }
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("HttpSignature components and parameters at their edges", () => {
  it("derived @query is ? without a query; field names are checked whole; an empty field is absent; items must be names", () => {
    const base = (names: ReadonlyArray<unknown>, r: Parameters<typeof signatureBase>[0]) => {
      const b = signatureBase(r, [names.map((n) => [n, new Map()]), new Map()] as never)
      return Either.isLeft(b) ? `${b.left.code} ${b.left.message}` : b.right
    }
    assert.strictEqual(base(["@query"], { method: "GET", url: "https://agent.example/v1/run", headers: {} }), "\"@query\": ?\n\"@signature-params\": (\"@query\")")
    assert.strictEqual(base(["@query"], { method: "GET", url: TARGET, headers: {} }), "\"@query\": ?stream=0\n\"@signature-params\": (\"@query\")")
    assert.include(base(["x-trace("], { method: "GET", url: TARGET, headers: { "x-trace(": "1" } }), "SIGNATURE_MALFORMED unsupported covered component")
    assert.include(base(["x-trace"], { method: "GET", url: TARGET, headers: { "x-trace": [] } }), "SIGNATURE_INVALID covered field x-trace is absent")
    assert.include(base([1], { method: "GET", url: TARGET, headers: { "1": "one" } }), "SIGNATURE_MALFORMED unsupported covered component 1")
    const withParam = signatureBase({ method: "GET", url: TARGET, headers: {} }, [[["@method", new Map([["req", true]])]], new Map()] as never)
    assert.isTrue(Either.isLeft(withParam) && withParam.left.code === "SIGNATURE_MALFORMED")
  })

  it.effect("a keyid whose DID part is not a DID, and a created that is not an integer, are malformed", () =>
    Effect.gen(function* () {
      const { resolveKey, req } = yield* setup
      const input = req.headers["signature-input"] as string
      const edit = (from: RegExp | string, to: string): SignableRequest => ({ ...req, headers: { ...req.headers, "signature-input": input.replace(from, to) } })
      for (const r of [edit(/keyid="[^"]*"/, "keyid=\"bad#key-1\""), edit("created=1800000000", "created=1800000000.5")]) {
        const e = yield* Effect.flip(verifyRequest(r, { resolveKey, nonceStore: makeMemory() }))
        assert.strictEqual(e.code, "SIGNATURE_MALFORMED", r.headers["signature-input"] as string)
      }
    }).pipe(Effect.provide(KeysNative.layer)))
})
