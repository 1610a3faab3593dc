import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Runtime from "effect/Runtime"
import * as TestClock from "effect/TestClock"
import fc from "fast-check"
import { KeyNotFound, KeyResolverUnavailable, type KeyResolverApi } from "../../src/core/KeyResolver.js"
import * as MandateCache from "../../src/core/MandateCache.js"
import {
  attenuateTaskMandate,
  attenuateToCart,
  attenuateToPayment,
  chainOf,
  decodeUnverified,
  issueIntentMandate,
  issueModelBudgetMandate,
  issueTaskMandate,
  MAX_CHAIN_LENGTH,
  MAX_TOKEN_LENGTH,
  type Mandate,
  verifyMandate
} from "../../src/core/Mandate.js"
import type { TaskConstraints } from "../../src/core/Constraints.js"
import { toBase64Url, utf8 } from "../../src/core/internal/bytes.js"
import type { Keys } from "../../src/core/Keys.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { numericDate } from "../support/arbitraries.js"
import { cast, headerFor, party, payloadOf, resolverFor, signRaw } from "../support/mandates.js"

// The edges of mandate verification and issuing that the other suites reach only in passing: which link a refusal
// is about (§9.7's recovery depends on it: "request a new mandate from the grantor of the expired link"), the
// boundaries of time, length and depth, the parse cache, and what issuing refuses before it normalizes.
// Callers match on `reason`; a message is asserted only for naming the link, party or value it is about.

const T0 = 1_800_000_000_000
const NOW = T0 / 1000

const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const parties = yield* cast
  const { alice, bob, carol } = parties
  const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, ttlSeconds: 600, constraints: { spendLimitUsd: 10 } })
  const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, ttlSeconds: 60, narrowed: { spendLimitUsd: 5 } })
  return { ...parties, intent, cart, resolver: resolverFor([alice, bob, carol]) }
})

const refusal = <R>(effect: Effect.Effect<unknown, { readonly reason: string; readonly message: string }, R>) =>
  Effect.map(Effect.flip(effect), (e) => ({ reason: e.reason, message: e.message }))

describe("verification names the link it refuses", () => {
  it.effect("REVOKED: every link is asked about, root first, by jti and grantor; the revoked one is named", () =>
    Effect.gen(function* () {
      const { alice, bob, intent, cart, resolver } = yield* setup
      const asked: Array<string> = []
      const revoking = (jti: string | undefined): KeyResolverApi => ({
        ...resolver,
        isMandateRevoked: (j, issuer) => Effect.sync(() => (asked.push(`${j} ${issuer}`), j === jti))
      })
      yield* verifyMandate(cart.token, revoking(undefined))
      assert.deepStrictEqual(asked, [`${intent.jti} ${alice.did}`, `${cart.jti} ${bob.did}`])
      const root = yield* refusal(verifyMandate(cart.token, revoking(intent.jti)))
      assert.strictEqual(root.reason, "REVOKED")
      assert.include(root.message, "link 0")
      assert.include(root.message, intent.jti)
      const leaf = yield* refusal(verifyMandate(cart.token, revoking(cart.jti)))
      assert.strictEqual(leaf.reason, "REVOKED")
      assert.include(leaf.message, "link 1")
      assert.include(leaf.message, cart.jti)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("EXPIRED at the first expired link, root first; NOT_YET_VALID names the link and its nbf", () =>
    Effect.gen(function* () {
      const { alice, bob, intent, cart, resolver } = yield* setup
      yield* TestClock.setTime(T0 + 60_000)
      const leaf = yield* refusal(verifyMandate(cart.token, resolver))
      assert.strictEqual(leaf.reason, "EXPIRED")
      assert.include(leaf.message, "link 1")
      assert.include(leaf.message, String(cart.expiresAt))
      yield* verifyMandate(intent.token, resolver)
      yield* TestClock.setTime(T0 + 600_000)
      const root = yield* refusal(verifyMandate(cart.token, resolver))
      assert.strictEqual(root.reason, "EXPIRED")
      assert.include(root.message, "link 0")
      assert.include(root.message, String(intent.expiresAt))
      // A child whose nbf is ahead of the clock by more than the tolerance, under a valid parent.
      yield* TestClock.setTime(T0)
      const early = yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), nbf: NOW + 31 }, bob.key)
      const e = yield* refusal(verifyMandate(early, resolver))
      assert.strictEqual(e.reason, "NOT_YET_VALID")
      assert.include(e.message, "link 1")
      assert.include(e.message, String(NOW + 31))
      yield* verifyMandate(yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), nbf: NOW + 30 }, bob.key), resolver)
      const earlyRoot = yield* signRaw(headerFor(alice.did), { ...payloadOf(intent.token), nbf: NOW + 5 }, alice.key)
      const r = yield* refusal(verifyMandate(earlyRoot, resolver, { clockToleranceSeconds: 4 }))
      assert.strictEqual(r.reason, "NOT_YET_VALID")
      assert.include(r.message, "link 0")
      yield* verifyMandate(earlyRoot, resolver, { clockToleranceSeconds: 5 })
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("KEY_ROTATED, KIND_MISMATCH and GRANTEE_MISMATCH name the grantor and versions, the kinds, the parties", () =>
    Effect.gen(function* () {
      const { alice, bob, carol, mallory, intent, cart } = yield* setup
      const rotated = yield* refusal(verifyMandate(cart.token, resolverFor([alice, bob, carol], { [alice.did]: 4 })))
      assert.strictEqual(rotated.reason, "KEY_ROTATED")
      assert.include(rotated.message, alice.did)
      assert.include(rotated.message, "4")
      const kind = yield* refusal(verifyMandate(intent.token, alice.key.publicKey, { kinds: ["task", "payment"] }))
      assert.strictEqual(kind.reason, "KIND_MISMATCH")
      for (const k of ["intent", "task", "payment"]) assert.include(kind.message, k)
      yield* verifyMandate(intent.token, alice.key.publicKey, { kinds: ["task", "intent"] })
      const grantee = yield* refusal(verifyMandate(intent.token, alice.key.publicKey, { expectedGrantee: mallory.did }))
      assert.strictEqual(grantee.reason, "GRANTEE_MISMATCH")
      assert.include(grantee.message, bob.did)
      assert.include(grantee.message, mallory.did)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the resolver's failures: KEY_NOT_FOUND, RESOLVER_UNAVAILABLE and an unusable key, each with its detail", () =>
    Effect.gen(function* () {
      const { alice, bob, intent, cart } = yield* setup
      const failing = (e: KeyNotFound | KeyResolverUnavailable): KeyResolverApi => ({ resolve: () => Effect.fail(e) })
      const notFound = yield* refusal(verifyMandate(intent.token, failing(new KeyNotFound({ code: "KEY_NOT_FOUND", message: "no such did", did: alice.did }))))
      assert.deepStrictEqual(notFound, { reason: "KEY_NOT_FOUND", message: "no such did" })
      const down = yield* refusal(verifyMandate(intent.token, failing(new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: "registry down", did: alice.did }))))
      assert.deepStrictEqual(down, { reason: "RESOLVER_UNAVAILABLE", message: "registry down" })
      // A resolved key that is not 32 bytes verifies nothing.
      const short: KeyResolverApi = { resolve: () => Effect.succeed({ publicKey: new Uint8Array(31), keyVersion: 1 }) }
      const unusable = yield* refusal(verifyMandate(intent.token, short))
      assert.strictEqual(unusable.reason, "SIGNATURE_INVALID")
      assert.isAbove(unusable.message.length, 0)
      // One public key vouches for the leaf only: the chain's root grantor has none.
      const single = yield* refusal(verifyMandate(cart.token, bob.key.publicKey))
      assert.strictEqual(single.reason, "KEY_NOT_FOUND")
      assert.include(single.message, alice.did)
      const wrong = yield* refusal(verifyMandate(intent.token, bob.key.publicKey))
      assert.strictEqual(wrong.reason, "SIGNATURE_INVALID")
      assert.include(wrong.message, "link 0")
      assert.include(wrong.message, alice.did)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("time", () => {
  it.effect("generated iat, nbf and exp at and past every bound: MALFORMED, EXPIRED, NOT_YET_VALID or valid, as §9.5 orders them", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const run = Runtime.runPromise(yield* Effect.runtime<Keys>())
      const tolerance = 30
      const isTime = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0
      const expected = (iat: unknown, nbf: unknown, exp: unknown, tol: number) => {
        if (!isTime(iat) || !isTime(nbf) || !isTime(exp) || nbf >= exp || iat > exp) return "MALFORMED"
        if (NOW >= exp) return "EXPIRED"
        if (NOW + tol < nbf) return "NOT_YET_VALID"
        return "valid"
      }
      const seen = new Set<string>()
      const claims = fc.record({ iat: numericDate(NOW, tolerance), nbf: numericDate(NOW, tolerance), exp: numericDate(NOW, tolerance), tol: fc.constantFrom(0, 1, tolerance, undefined) })
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(claims, ({ iat, nbf, exp, tol }) =>
            run(Effect.gen(function* () {
              const payload = { iss: alice.did, aud: bob.did, iat, nbf, exp, jti: "generated-times", kv: 1, kind: "intent", cns: { spendLimitUsd: 1 } }
              const token = yield* signRaw(headerFor(alice.did), payload, alice.key)
              const r = yield* Effect.either(verifyMandate(token, alice.key.publicKey, tol === undefined ? {} : { clockToleranceSeconds: tol }))
              const got = Either.isRight(r) ? "valid" : r.left.reason
              seen.add(got)
              assert.strictEqual(got, expected(iat, nbf, exp, tol ?? tolerance), JSON.stringify({ iat, nbf, exp, tol, now: NOW }))
            }))
          ),
          { numRuns: 300 }
        )
      )
      // The generator reaches every outcome, not only the malformed ones.
      assert.sameMembers([...seen], ["MALFORMED", "EXPIRED", "NOT_YET_VALID", "valid"])
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("chain structure", () => {
  it.effect("CHAIN_BROKEN names the link and both parties; a root cart or payment names its kind", () =>
    Effect.gen(function* () {
      const { alice, mallory, intent, cart, resolver } = yield* setup
      const stolen = yield* signRaw(headerFor(mallory.did), { ...payloadOf(cart.token), iss: mallory.did }, mallory.key)
      const broken = yield* refusal(verifyMandate(stolen, resolverFor([alice, mallory])))
      assert.strictEqual(broken.reason, "CHAIN_BROKEN")
      assert.include(broken.message, "link 1")
      assert.include(broken.message, mallory.did)
      assert.include(broken.message, intent.grantee)
      for (const kind of ["cart", "payment"]) {
        const cns = kind === "cart" ? { spendLimitUsd: 1 } : { amountUsd: 1, merchant: "shop.example" }
        const root = yield* signRaw(headerFor(alice.did), { ...payloadOf(intent.token), kind, cns }, alice.key)
        const e = yield* refusal(verifyMandate(root, resolver))
        assert.strictEqual(e.reason, "CHAIN_BROKEN", kind)
        assert.include(e.message, kind)
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a child may expire with its parent, not a second after; a wider child names its link", () =>
    Effect.gen(function* () {
      const { bob, intent, cart, resolver } = yield* setup
      const withParent = yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), exp: intent.expiresAt }, bob.key)
      assert.strictEqual((yield* verifyMandate(withParent, resolver)).expiresAt, intent.expiresAt)
      const after = yield* refusal(verifyMandate(yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), exp: intent.expiresAt + 1 }, bob.key), resolver))
      assert.strictEqual(after.reason, "ATTENUATION_WIDENED")
      assert.include(after.message, "link 1")
      const wider = yield* refusal(verifyMandate(yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), cns: { spendLimitUsd: 11 } }, bob.key), resolver))
      assert.strictEqual(wider.reason, "ATTENUATION_WIDENED")
      assert.include(wider.message, "link 1")
      // Issued with a lifetime past the parent's, the child is cut to it and verifies.
      const cut = yield* attenuateToCart({ parent: intent, granteeDid: cart.grantee, grantorPrivateKey: bob.key, ttlSeconds: 601, narrowed: { spendLimitUsd: 5 } })
      assert.strictEqual(cut.expiresAt, intent.expiresAt)
      yield* verifyMandate(cut.token, resolver)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect(`DEPTH_EXCEEDED for a chain of ${MAX_CHAIN_LENGTH + 1} links names the limit`, () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* setup
      // Parsing stops at the depth before any signature or constraint is checked, so one key signs every link.
      const payload = { iss: alice.did, aud: alice.did, iat: NOW, nbf: NOW, exp: NOW + 60, jti: "deep", kv: 1, kind: "task", cns: { allowed: [], maxDelegationDepth: 100 } }
      let token = yield* signRaw(headerFor(alice.did), payload, alice.key)
      for (let i = 1; i <= MAX_CHAIN_LENGTH; i++) token = yield* signRaw(headerFor(alice.did), { ...payload, jti: `deep-${i}`, prf: token }, alice.key)
      const e = yield* refusal(verifyMandate(token, resolverFor([alice, bob])))
      assert.deepStrictEqual(e, { reason: "DEPTH_EXCEEDED", message: `chain longer than ${MAX_CHAIN_LENGTH} links` })
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a cns problem names its link in a chain, and only the problem in a single token", () =>
    Effect.gen(function* () {
      const { alice, bob, intent, cart, resolver } = yield* setup
      const badLeaf = yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), cns: { spendLimitUsd: 5, tip: 1 } }, bob.key)
      const leaf = yield* refusal(verifyMandate(badLeaf, resolver))
      assert.strictEqual(leaf.reason, "MALFORMED")
      assert.include(leaf.message, "link 1: cns:")
      assert.include(leaf.message, "tip")
      const badRoot = yield* signRaw(headerFor(alice.did), { ...payloadOf(intent.token), cns: { spendLimitUsd: 10, tip: 1 } }, alice.key)
      const root = yield* refusal(verifyMandate(badRoot, resolver))
      assert.strictEqual(root.reason, "MALFORMED")
      assert.isTrue(root.message.startsWith("cns: "), root.message)
      assert.include(root.message, "tip")
      const overBadRoot = yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), prf: badRoot }, bob.key)
      assert.include((yield* refusal(verifyMandate(overBadRoot, resolver))).message, "link 0: cns:")
      // decodeUnverified refuses the same, and reads a good chain to its leaf.
      const d = decodeUnverified(badRoot)
      assert.isTrue(Either.isLeft(d) && d.left.reason === "MALFORMED" && d.left.message.includes("tip"))
      const good = decodeUnverified(cart.token)
      assert.isTrue(Either.isRight(good) && good.right.jti === cart.jti && good.right.parent?.jti === intent.jti)
    }).pipe(Effect.provide(KeysNative.layer)))
})

/**
 * A root task token of exactly `length` characters, grown through its `cns` lists and `jti` (the payload segment's
 * length is ceil(4n/3) for n bytes, so it is never 1 more than a multiple of 4: another grantor then fits).
 */
const tokenOfLength = (length: number) =>
  Effect.gen(function* () {
    const parties = yield* cast
    for (const grantor of [parties.alice, parties.bob, parties.dave, parties.mallory]) {
      const headerLength = toBase64Url(utf8(JSON.stringify(headerFor(grantor.did)))).length
      const segment = length - headerLength - 2 - 86
      if (segment % 4 === 1) continue
      const bytes = Math.floor(segment / 4) * 3 + (segment % 4 === 0 ? 0 : (segment % 4) - 1)
      const lists: Record<string, Array<string>> = { allowed: [], blocked: [], dataAccess: [], humanGates: [] }
      const payload = { iss: grantor.did, aud: parties.bob.did, iat: NOW, nbf: NOW, exp: NOW + 60, jti: "j", kv: 1, kind: "task", cns: { ...lists, maxDelegationDepth: 0 } }
      const size = () => utf8(JSON.stringify(payload)).length
      // Whole 256-character names while one more fits, then one name for the rest, then the jti for the last bytes.
      for (const [key, list] of Object.entries(lists)) {
        for (let i = 0; i < 64; i++) {
          const room = bytes - size() - (list.length === 0 ? 2 : 3)
          if (room < 8) break
          list.push(`${key}${i}-`.padEnd(Math.min(256, room), "x"))
        }
      }
      payload.cns = { ...lists, maxDelegationDepth: 0 }
      payload.jti = "j".repeat(1 + bytes - size())
      const token = yield* signRaw(headerFor(grantor.did), payload, grantor.key)
      return { token, grantor }
    }
    return yield* Effect.die("no grantor fits")
  })

describe("sizes", () => {
  it.effect(`a token of exactly ${MAX_TOKEN_LENGTH} characters verifies; the parse cache keeps a token of exactly its maxTokenLength`, () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { token, grantor } = yield* tokenOfLength(MAX_TOKEN_LENGTH)
      assert.strictEqual(token.length, MAX_TOKEN_LENGTH)
      assert.strictEqual((yield* verifyMandate(token, grantor.key.publicKey)).grantor, grantor.did)
      const cache = MandateCache.make({ maxTokenLength: token.length })
      yield* verifyMandate(token, grantor.key.publicKey, { cache })
      assert.strictEqual(cache.chains.size, 1)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("the parse cache", () => {
  it.effect("a chain is parsed once: the same decoded mandate comes back while the cache holds it", () =>
    Effect.gen(function* () {
      const { cart, resolver } = yield* setup
      const cache = MandateCache.make()
      const first = yield* verifyMandate(cart.token, resolver, { cache })
      assert.strictEqual(yield* verifyMandate(cart.token, resolver, { cache }), first)
      const decoded = decodeUnverified(cart.token, cache)
      assert.isTrue(Either.isRight(decoded) && decoded.right === first)
      // Without a cache, each call decodes anew.
      assert.notStrictEqual(yield* verifyMandate(cart.token, resolver, { cache: MandateCache.make() }), first)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a header segment's kid is remembered, and what is remembered is what the next token is checked against", () =>
    Effect.gen(function* () {
      const { alice, bob, intent } = yield* setup
      const cache = MandateCache.make()
      const [h] = intent.token.split(".") as [string]
      yield* verifyMandate(intent.token, alice.key.publicKey, { cache })
      assert.strictEqual(cache.headers.get(h), `${alice.did}#key-1`)
      // A planted entry for the segment shows the lookup is used: the token's own kid is no longer read.
      const planted = MandateCache.make()
      planted.headers.set(h, `${bob.did}#key-1`)
      const e = yield* refusal(verifyMandate(intent.token, alice.key.publicKey, { cache: planted }))
      assert.deepStrictEqual(e, { reason: "MALFORMED", message: "kid must be the grantor's #key-1" })
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("decoded mandates", () => {
  it.effect("depth counts the links above; chainOf lists the chain root first; the JSON view shows expiry as a date", () =>
    Effect.gen(function* () {
      const { carol, dave, intent, cart } = yield* setup
      const payment = yield* attenuateToPayment({ parent: cart, granteeDid: dave.did, grantorPrivateKey: carol.key, amountUsd: 1, merchant: "shop.example" })
      assert.deepStrictEqual([intent.depth, cart.depth, payment.depth], [0, 1, 2])
      assert.deepStrictEqual(chainOf(payment).map((m) => m.jti), [intent.jti, cart.jti, payment.jti])
      assert.deepStrictEqual(chainOf(intent).map((m) => m.jti), [intent.jti])
      const json = JSON.parse(JSON.stringify(cart)) as Record<string, unknown>
      assert.strictEqual(json["expiry"], new Date(cart.expiresAt * 1000).toISOString())
      assert.strictEqual(json["jti"], cart.jti)
      assert.strictEqual(json["depth"], 1)
      assert.strictEqual((json["parent"] as Record<string, unknown>)["expiry"], new Date(intent.expiresAt * 1000).toISOString())
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("issuing refuses before it signs", () => {
  it.effect("INVALID_DID names the party; INVALID_TTL and a bad keyVersion at and past their bounds", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const base = { grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } }
      const grantee = yield* Effect.flip(issueIntentMandate({ ...base, granteeDid: "did:web:bob" }))
      assert.strictEqual(grantee.code, "INVALID_DID")
      assert.include(grantee.message, "grantee")
      assert.include(grantee.message, "did:web:bob")
      const grantor = yield* Effect.flip(issueIntentMandate({ ...base, grantorDid: "alice" }))
      assert.strictEqual(grantor.code, "INVALID_DID")
      assert.include(grantor.message, "grantor")
      for (const ttlSeconds of [0, -1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) {
        assert.strictEqual((yield* Effect.flip(issueIntentMandate({ ...base, ttlSeconds }))).code, "INVALID_TTL", String(ttlSeconds))
      }
      const shortest = yield* issueIntentMandate({ ...base, ttlSeconds: 1 })
      assert.strictEqual(shortest.expiresAt - shortest.notBefore, 1)
      for (const keyVersion of [0, -1, 1.5, Number.MAX_SAFE_INTEGER + 1]) {
        assert.strictEqual((yield* Effect.flip(issueIntentMandate({ ...base, keyVersion }))).code, "INVALID_CONSTRAINTS", String(keyVersion))
      }
      assert.strictEqual((yield* issueIntentMandate({ ...base, keyVersion: 1 })).keyVersion, 1)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("task constraints are checked as given, before defaults are written: an unknown member is not dropped", () =>
    Effect.gen(function* () {
      const { alice, bob, carol } = yield* setup
      const root = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["a", "b"], maxDelegationDepth: 2 } })
      const bad: ReadonlyArray<unknown> = [
        { allowed: ["a"], maxDelegationDepth: 0, extra: true },
        { allowed: "ab", maxDelegationDepth: 0 },
        { allowed: ["a"], computeLimit: { cpuSeconds: 1 }, maxDelegationDepth: 0 }
      ]
      for (const constraints of bad) {
        const issued = yield* Effect.flip(issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: constraints as TaskConstraints }))
        assert.strictEqual(issued.code, "INVALID_CONSTRAINTS", JSON.stringify(constraints))
        const attenuated = yield* Effect.flip(attenuateTaskMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: constraints as TaskConstraints }))
        assert.strictEqual(attenuated.code, "INVALID_CONSTRAINTS", JSON.stringify(constraints))
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the parent: PARENT_INVALID carries why, PARENT_EXPIRED names when, a chain of the limit takes no child", () =>
    Effect.gen(function* () {
      const { alice, bob, carol, intent } = yield* setup
      const invalid = yield* Effect.flip(attenuateToCart({ parent: "a.b.c", granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } }))
      assert.strictEqual(invalid.code, "PARENT_INVALID")
      assert.include(invalid.message, "MALFORMED")
      yield* TestClock.setTime(intent.expiresAt * 1000 - 1000)
      yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } })
      yield* TestClock.setTime(intent.expiresAt * 1000)
      const expired = yield* Effect.flip(attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } }))
      assert.strictEqual(expired.code, "PARENT_EXPIRED")
      assert.include(expired.message, String(intent.expiresAt))
      // A model-budget root is written with exactly the constraints given.
      yield* TestClock.setTime(T0)
      const cns = { token_budget: 1, cost_budget_usd: 0.5, quality_threshold: 0, task_type: "CODE" as const, expected_steps: 0 }
      assert.deepStrictEqual(payloadOf((yield* issueModelBudgetMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: cns })).token).cns, cns)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("the token's segments and the parties", () => {
  it.effect("an empty segment is refused for that segment; a token that is not a string for that, cache or not", () =>
    Effect.gen(function* () {
      const { intent } = yield* setup
      const [h, p, s] = intent.token.split(".") as [string, string, string]
      const cases: ReadonlyArray<readonly [string, string]> = [[`.${p}.${s}`, "header"], [`${h}..${s}`, "payload"], [`${h}.${p}.`, "signature"]]
      for (const [token, segment] of cases) {
        const e = yield* refusal(verifyMandate(token, new Uint8Array(32)))
        assert.strictEqual(e.reason, "MALFORMED", segment)
        assert.include(e.message, segment)
      }
      for (const token of [null, undefined, {}, ["a.b.c"]]) {
        for (const cache of [MandateCache.make(), undefined]) {
          const e = yield* refusal(verifyMandate(token as unknown as string, new Uint8Array(32), cache === undefined ? {} : { cache }))
          assert.deepStrictEqual(e, { reason: "MALFORMED", message: "token is not a string" }, JSON.stringify(token))
        }
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("KIND_MISMATCH lists the kinds expected; a parent object whose grantee is not the signing DID is CHAIN_BROKEN", () =>
    Effect.gen(function* () {
      const { alice, bob, carol, intent } = yield* setup
      const kind = yield* refusal(verifyMandate(intent.token, alice.key.publicKey, { kinds: ["task", "payment"] }))
      assert.include(kind.message, "task or payment")
      // A Mandate given as an object is read as given; its grantee, spelled otherwise than the DID it normalizes to,
      // is not the grantor the child would be signed by.
      const e = yield* Effect.flip(attenuateToCart({ parent: { ...intent, grantee: "did:mesh:BOB" }, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } }))
      assert.strictEqual(e.code, "CHAIN_BROKEN")
      assert.include(e.message, "did:mesh:BOB")
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("issuing refusals that share a code name their cause", () => {
  it.effect("INVALID_TTL names ttlSeconds; a bad keyVersion, INVALID_CONSTRAINTS like a bad cns, names keyVersion; the chain limit names its length", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const base = { grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["a"], maxDelegationDepth: 1000 } }
      assert.include((yield* Effect.flip(issueTaskMandate({ ...base, ttlSeconds: 0 }))).message, "ttlSeconds")
      assert.include((yield* Effect.flip(issueTaskMandate({ ...base, keyVersion: 0 }))).message, "keyVersion")
      // A chain at the protocol's limit: its leaf's grantee may not attenuate, though maxDelegationDepth would allow it.
      let leaf: Mandate<"task"> = yield* issueTaskMandate(base)
      let holder = bob
      for (let i = 1; i < MAX_CHAIN_LENGTH; i++) {
        const next = yield* party(`agent-${i}`, 40 + i)
        leaf = yield* attenuateTaskMandate({ parent: leaf, granteeDid: next.did, grantorPrivateKey: holder.key, constraints: { allowed: ["a"], maxDelegationDepth: 1000 - i } })
        holder = next
      }
      assert.strictEqual(leaf.depth, MAX_CHAIN_LENGTH - 1)
      const e = yield* Effect.flip(attenuateTaskMandate({ parent: leaf, granteeDid: alice.did, grantorPrivateKey: holder.key, constraints: { allowed: ["a"], maxDelegationDepth: 1 } }))
      assert.strictEqual(e.code, "DELEGATION_DEPTH_EXCEEDED")
      assert.include(e.message, String(MAX_CHAIN_LENGTH))
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("the error classes", () => {
  it.effect("are tagged MandateInvalid and MandateIssueError, as callers match them", () =>
    Effect.gen(function* () {
      const { alice, bob, intent } = yield* setup
      const refused = yield* Effect.flip(verifyMandate(intent.token, bob.key.publicKey))
      assert.strictEqual(refused._tag, "MandateInvalid")
      assert.strictEqual(refused.code, "MANDATE_INVALID")
      const caught = yield* Effect.catchTag(verifyMandate(intent.token, bob.key.publicKey), "MandateInvalid", (e) => Effect.succeed(e.reason))
      assert.strictEqual(caught, "SIGNATURE_INVALID")
      const notIssued = yield* Effect.flip(issueIntentMandate({ grantorDid: alice.did, granteeDid: "bob", privateKey: alice.key, constraints: { spendLimitUsd: 1 } }))
      assert.strictEqual(notIssued._tag, "MandateIssueError")
    }).pipe(Effect.provide(KeysNative.layer)))
})
