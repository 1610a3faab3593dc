import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { KeyRevoked } from "../src/core/Did.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { KeyResolver, makeStatic } from "../src/core/KeyResolver.js"
import {
  attenuateModelBudgetMandate,
  attenuateTaskMandate,
  attenuateToCart,
  attenuateToPayment,
  decodeUnverified,
  issueIntentMandate,
  issueModelBudgetMandate,
  issueTaskMandate,
  type IssueFailure,
  MAX_CHAIN_LENGTH,
  type Mandate,
  type MandateInvalidReason,
  verifyMandate,
  verifyMandateChain
} from "../src/core/Mandate.js"
import { cast, headerFor, type Party, payloadOf, resolverFor, signRaw } from "./support/mandates.js"

const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

const run = <A, E>(effect: Effect.Effect<A, E, Keys>) => Effect.provide(effect, KeysNative.layer)

const reasonOf = <A>(effect: Effect.Effect<A, { readonly reason: MandateInvalidReason }, Keys>) =>
  Effect.map(Effect.flip(effect), (e) => e.reason)

const taskRoot = (from: Party, to: Party, overrides: Record<string, unknown> = {}) =>
  issueTaskMandate({
    grantorDid: from.did,
    granteeDid: to.did,
    privateKey: from.key,
    constraints: {
      allowed: ["search", "summarize", "send_email"],
      blocked: ["delete"],
      humanGates: ["send_email"],
      actionLimits: { send_email: 5 },
      computeLimit: { llmTokens: 10_000, webRequests: 10 },
      dataAccess: ["crm:read", "crm:write"],
      maxDelegationDepth: 3,
      ...overrides
    }
  })

describe("issuing", () => {
  it.effect("an intent mandate exposes token, grantor, grantee, expiry, constraints and keyVersion", () =>
    run(Effect.gen(function* () {
      yield* TestClock.setTime(1_700_000_000_000)
      const { alice, bob } = yield* cast
      const m = yield* issueIntentMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        constraints: { spendLimitUsd: 250.5, allowedMerchants: ["shop.example"] }
      })
      assert.strictEqual(m.kind, "intent")
      assert.strictEqual(m.grantor, alice.did)
      assert.strictEqual(m.grantee, bob.did)
      assert.strictEqual(m.expiresAt, 1_700_000_000 + 3600)
      assert.strictEqual(m.expiry.getTime(), (1_700_000_000 + 3600) * 1000)
      assert.deepStrictEqual(m.constraints, { spendLimitUsd: 250.5, allowedMerchants: ["shop.example"] })
      assert.strictEqual(m.keyVersion, 1)
      assert.strictEqual(m.depth, 0)
      const [h] = m.token.split(".")
      assert.deepStrictEqual(JSON.parse(Buffer.from(h!, "base64url").toString()), headerFor(alice.did))
      const p = payloadOf(m.token)
      assert.deepStrictEqual(Object.keys(p), ["iss", "aud", "iat", "nbf", "exp", "jti", "kv", "kind", "cns"])
      assert.match(p.jti as string, /^[A-Za-z0-9_-]{22}$/)
      assert.notStrictEqual(p.jti, payloadOf((yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } })).token).jti)
      // Verifies with the grantor's public key alone, and through a resolver.
      const v = yield* verifyMandate(m.token, alice.key.publicKey)
      assert.strictEqual(v.token, m.token)
      yield* verifyMandate(m.token, resolverFor([alice]), { expectedGrantee: bob.did })
    })))

  it.effect("DIDs are normalized to lower case; the key may be given as a seed; keyVersion and ttl are honoured", () =>
    run(Effect.gen(function* () {
      const { alice } = yield* cast
      const m = yield* issueIntentMandate({
        grantorDid: "did:mesh:ALICE",
        granteeDid: "did:mesh:Bob",
        privateKey: new Uint8Array(32).fill(1),
        constraints: { spendLimitUsd: 1 },
        ttlSeconds: 60,
        keyVersion: 3
      })
      assert.strictEqual(m.grantor, alice.did)
      assert.strictEqual(m.grantee, "did:mesh:bob")
      assert.strictEqual(m.keyVersion, 3)
      assert.strictEqual(m.expiresAt - m.issuedAt, 60)
      yield* verifyMandate(m.token, resolverFor([alice], { [alice.did]: 3 }), { expectedGrantee: "did:mesh:BOB" })
    })))

  it.effect("refuses bad input before signing: constraints, DIDs, ttl", () =>
    run(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const base = { grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key }
      const codes = yield* Effect.all([
        issueIntentMandate({ ...base, constraints: { spendLimitUsd: -1 } }),
        issueIntentMandate({ ...base, constraints: { spendLimitUsd: 0.1 + 0.2 } }),
        issueIntentMandate({ ...base, constraints: { spendLimitUsd: 1, allowedMerchants: [""] } }),
        issueIntentMandate({ ...base, grantorDid: "alice", constraints: { spendLimitUsd: 1 } }),
        issueIntentMandate({ ...base, ttlSeconds: 0, constraints: { spendLimitUsd: 1 } }),
        issueTaskMandate({ ...base, constraints: { allowed: ["x"], maxDelegationDepth: -1 } }),
        issueModelBudgetMandate({ ...base, constraints: { token_budget: 1, cost_budget_usd: 1, quality_threshold: 1.5, task_type: "CODE", expected_steps: 1 } })
      ].map((e: Effect.Effect<unknown, IssueFailure, Keys>) => Effect.map(Effect.flip(e), (x) => x.code)))
      assert.deepStrictEqual(codes, ["INVALID_CONSTRAINTS", "INVALID_CONSTRAINTS", "INVALID_CONSTRAINTS", "INVALID_DID", "INVALID_TTL", "INVALID_CONSTRAINTS", "INVALID_CONSTRAINTS"])
      const bad = yield* Effect.flip(issueIntentMandate({ ...base, privateKey: new Uint8Array(7), constraints: { spendLimitUsd: 1 } }))
      assert.strictEqual(bad.code, "MALFORMED_KEY")
    })))
})

describe("encoding", () => {
  it.effect("non-ASCII names survive issuing and verification exactly (UTF-8 in the payload)", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      // Enough names that the cart's payload (which holds the intent) is long, taking the parsed-strings scan.
      const merchants = ["café.example", "ÿ-shop", "日本.example", "emoji 🛒", ...Array.from({ length: 60 }, (_, i) => `m-${i}.example`)]
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1, allowedMerchants: merchants } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1, allowedMerchants: ["café.example"] } })
      assert.isAbove(Buffer.from(cart.token.split(".")[1]!, "base64url").length, 1024)
      const v = yield* verifyMandate(cart.token, resolverFor([alice, bob]))
      assert.deepStrictEqual(v.parent?.constraints, { spendLimitUsd: 1, allowedMerchants: merchants })
      assert.deepStrictEqual(v.constraints, { spendLimitUsd: 1, allowedMerchants: ["café.example"] })
      // Invalid UTF-8 in a signed payload is MALFORMED, not mis-decoded.
      const [h] = intent.token.split(".")
      const bad = Buffer.concat([Buffer.from('{"iss":"did:mesh:alice","aud":"did:mesh:bob","iat":0,"nbf":0,"exp":10,"jti":"x","kv":1,"kind":"intent","cns":{"spendLimitUsd":1,"allowedMerchants":["'), Buffer.from([0xc3, 0x28]), Buffer.from('"]}}')]).toString("base64url")
      const keys = yield* Keys
      const sig = yield* keys.sign(alice.key, new TextEncoder().encode(`${h}.${bad}`))
      assert.strictEqual(yield* reasonOf(verifyMandate(`${h}.${bad}.${Buffer.from(sig).toString("base64url")}`, alice.key.publicKey)), "MALFORMED")
    })))
})

describe("decoded mandates", () => {
  it.effect("are immutable, so a caller cannot alter what the next verification of the same token sees", () =>
    run(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const m = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["search"], maxDelegationDepth: 0 } })
      const v1 = (yield* verifyMandate(m.token, alice.key.publicKey)) as Mandate<"task">
      assert.throws(() => (v1.constraints.allowed as Array<string>).push("delete"))
      assert.throws(() => Object.assign(v1, { grantee: "did:mesh:mallory" }))
      v1.expiry.setTime(0)
      const v2 = (yield* verifyMandate(m.token, alice.key.publicKey)) as Mandate<"task">
      assert.deepStrictEqual(v2.constraints.allowed, ["search"])
      assert.strictEqual(v2.expiry.getTime(), m.expiresAt * 1000)
    })))
})

describe("spending chains", () => {
  it.effect("intent → cart → payment: the child's grantor is the parent's grantee and prf holds the parent token", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol, dave } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 100, allowedMerchants: ["a.example", "b.example"] } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 40, allowedMerchants: ["a.example"] } })
      const payment = yield* attenuateToPayment({ parent: cart.token, granteeDid: dave.did, grantorPrivateKey: carol.key, amountUsd: 39.99, merchant: "a.example" })
      assert.strictEqual(cart.grantor, bob.did)
      assert.strictEqual(payloadOf(cart.token).prf, intent.token)
      assert.strictEqual(payloadOf(payment.token).prf, cart.token)
      assert.strictEqual(payment.depth, 2)
      assert.deepStrictEqual(payment.constraints, { amountUsd: 39.99, merchant: "a.example" })
      const v = yield* verifyMandate(payment.token, resolverFor([alice, bob, carol]), { expectedGrantee: dave.did })
      assert.strictEqual(v.parent?.parent?.token, intent.token)
      // A payment straight from the intent is fine too.
      yield* attenuateToPayment({ parent: intent, granteeDid: dave.did, grantorPrivateKey: bob.key, amountUsd: 100, merchant: "b.example" })
    })))

  it.effect("attenuation is checked at issue time: wider children are refused and nothing is signed", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 100, allowedMerchants: ["a.example"] } })
      const common = { parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key }
      const codes = yield* Effect.all([
        attenuateToCart({ ...common, narrowed: { spendLimitUsd: 100.000001, allowedMerchants: ["a.example"] } }),
        attenuateToCart({ ...common, narrowed: { spendLimitUsd: 10, allowedMerchants: ["a.example", "z.example"] } }),
        attenuateToCart({ ...common, narrowed: { spendLimitUsd: 10 } }),
        attenuateToPayment({ ...common, amountUsd: 101, merchant: "a.example" }),
        attenuateToPayment({ ...common, amountUsd: 1, merchant: "z.example" }),
        attenuateToCart({ ...common, parent: "not a token", narrowed: { spendLimitUsd: 1 } })
      ].map((e: Effect.Effect<unknown, IssueFailure, Keys>) => Effect.map(Effect.flip(e), (x) => x.code)))
      assert.deepStrictEqual(codes, ["ATTENUATION_WIDENED", "ATTENUATION_WIDENED", "ATTENUATION_WIDENED", "ATTENUATION_WIDENED", "ATTENUATION_WIDENED", "PARENT_INVALID"])
      const payment = yield* attenuateToPayment({ ...common, amountUsd: 1, merchant: "a.example" })
      const again = yield* Effect.flip(attenuateToCart({ parent: payment, granteeDid: bob.did, grantorPrivateKey: carol.key, narrowed: { spendLimitUsd: 1 } }))
      assert.strictEqual(again.code, "CHAIN_BROKEN")
    })))

  it.effect("attenuating as a DID that is not the parent's grantee is GRANTEE_MISMATCH, before anything is signed", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 100 } })
      const task = yield* taskRoot(alice, bob, { maxDelegationDepth: 1 })
      const asCarol = { granteeDid: alice.did, grantorPrivateKey: carol.key, grantorDid: carol.did }
      const codes = yield* Effect.all([
        attenuateToCart({ ...asCarol, parent: intent, narrowed: { spendLimitUsd: 1 } }),
        attenuateToPayment({ ...asCarol, parent: intent.token, amountUsd: 1, merchant: "a.example" }),
        attenuateTaskMandate({ ...asCarol, parent: task, constraints: { allowed: ["search"], maxDelegationDepth: 0 } }),
        attenuateModelBudgetMandate({ ...asCarol, parent: intent, constraints: { tokenBudget: 1 } as never })
      ].map((e: Effect.Effect<unknown, IssueFailure, Keys>) => Effect.map(Effect.flip(e), (x) => x.code)))
      assert.deepStrictEqual(codes, ["GRANTEE_MISMATCH", "GRANTEE_MISMATCH", "GRANTEE_MISMATCH", "GRANTEE_MISMATCH"])
      // Named as the grantee (any case), the child is signed.
      const child = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, grantorDid: bob.did.toUpperCase().replace("DID:MESH:", "did:mesh:"), narrowed: { spendLimitUsd: 1 } })
      assert.strictEqual(child.grantor, bob.did)
    })))

  it.effect("a child never outlives its parent: the ttl is cut to the parent's expiry; an expired parent is refused", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, ttlSeconds: 100, constraints: { spendLimitUsd: 1 } })
      yield* TestClock.adjust("40 seconds")
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 }, ttlSeconds: 3600 })
      assert.strictEqual(cart.expiresAt, intent.expiresAt)
      yield* TestClock.adjust("60 seconds")
      const e = yield* Effect.flip(attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } }))
      assert.strictEqual(e.code, "PARENT_EXPIRED")
    })))
})

describe("verification reasons", () => {
  it.effect("EXPIRED at exp (TestClock), for the leaf and for any link of the chain", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, ttlSeconds: 600, constraints: { spendLimitUsd: 5 } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 5 }, ttlSeconds: 60 })
      const resolver = resolverFor([alice, bob])
      yield* TestClock.adjust("59 seconds")
      yield* verifyMandate(cart.token, resolver)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* reasonOf(verifyMandate(cart.token, resolver)), "EXPIRED")
      yield* verifyMandate(intent.token, resolver)
      yield* TestClock.adjust("540 seconds")
      assert.strictEqual(yield* reasonOf(verifyMandate(intent.token, resolver)), "EXPIRED")
    })))

  it.effect("NOT_YET_VALID when nbf is ahead of the clock by more than the tolerance", () =>
    run(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const payload = { iss: alice.did, aud: bob.did, iat: 0, nbf: 100, exp: 1000, jti: "j1", kv: 1, kind: "intent", cns: { spendLimitUsd: 1 } }
      const token = yield* signRaw(headerFor(alice.did), payload, alice.key)
      assert.strictEqual(yield* reasonOf(verifyMandate(token, alice.key.publicKey)), "NOT_YET_VALID")
      yield* TestClock.adjust("70 seconds") // 100 - 30 s tolerance
      yield* verifyMandate(token, alice.key.publicKey)
      assert.strictEqual(yield* reasonOf(verifyMandate(token, alice.key.publicKey, { clockToleranceSeconds: 0 })), "NOT_YET_VALID")
    })))

  it.effect("GRANTEE_MISMATCH when someone other than the grantee presents it; KIND_MISMATCH for the wrong kind", () =>
    run(Effect.gen(function* () {
      const { alice, bob, mallory } = yield* cast
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } })
      assert.strictEqual(yield* reasonOf(verifyMandate(m.token, alice.key.publicKey, { expectedGrantee: mallory.did })), "GRANTEE_MISMATCH")
      assert.strictEqual(yield* reasonOf(verifyMandate(m.token, alice.key.publicKey, { kinds: ["task"] })), "KIND_MISMATCH")
    })))

  it.effect("KEY_ROTATED: signed under kv 1, the resolver now says kv 2", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } })
      yield* verifyMandate(m.token, resolverFor([alice]))
      // Alice rotated to a new key (here: carol's seed) at version 2.
      const rotated = makeStatic({ [alice.did]: { publicKey: carol.key.publicKey, keyVersion: 2 } })
      const e = yield* Effect.flip(verifyMandate(m.token, rotated))
      assert.strictEqual(e.reason, "KEY_ROTATED")
      assert.strictEqual(e.code, "MANDATE_INVALID")
      // Re-issued under the current key and version, it verifies again.
      const reissued = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: carol.key, keyVersion: 2, constraints: { spendLimitUsd: 1 } })
      yield* verifyMandate(reissued.token, rotated)
      // A rotation of a link above the leaf invalidates the whole chain.
      const cart = yield* attenuateToCart({ parent: m, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } })
      const rotatedChain = makeStatic({ [alice.did]: { publicKey: alice.key.publicKey, keyVersion: 2 }, [bob.did]: { publicKey: bob.key.publicKey, keyVersion: 1 } })
      assert.strictEqual(yield* reasonOf(verifyMandate(cart.token, rotatedChain)), "KEY_ROTATED")
    })))

  it.effect("KEY_NOT_FOUND, KEY_REVOKED and REVOKED come from the resolver", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } })
      assert.strictEqual(yield* reasonOf(verifyMandate(m.token, resolverFor([bob]))), "KEY_NOT_FOUND")
      const revokedKey = {
        resolve: (did: string) => Effect.fail(new KeyRevoked({ code: "KEY_REVOKED", message: "revoked", verificationMethod: `${did}#key-1`, revoked: "2026-01-01T00:00:00Z" }))
      }
      assert.strictEqual(yield* reasonOf(verifyMandate(m.token, revokedKey)), "KEY_REVOKED")
      const revokedMandate = { ...resolverFor([alice]), isMandateRevoked: (jti: string) => Effect.succeed(jti === m.jti) }
      assert.strictEqual(yield* reasonOf(verifyMandate(m.token, revokedMandate)), "REVOKED")
      // A single public key cannot vouch for the links above the leaf.
      const cart = yield* attenuateToCart({ parent: m, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 1 } })
      assert.strictEqual(yield* reasonOf(verifyMandate(cart.token, bob.key.publicKey)), "KEY_NOT_FOUND")
      // verifyMandateChain takes the resolver from context.
      yield* Effect.provideService(verifyMandateChain(cart.token), KeyResolver, resolverFor([alice, bob]))
    })))

  it.effect("SIGNATURE_INVALID for the wrong key, a different valid signature, or a forged link", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol, mallory } = yield* cast
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } })
      assert.strictEqual(yield* reasonOf(verifyMandate(m.token, mallory.key.publicKey)), "SIGNATURE_INVALID")
      // Mallory re-signs alice's payload with her own key under alice's name.
      const [h, p] = m.token.split(".")
      const keys = yield* Keys
      const forgedSig = yield* keys.sign(mallory.key, new TextEncoder().encode(`${h}.${p}`))
      const forged = `${h}.${p}.${Buffer.from(forgedSig).toString("base64url")}`
      assert.strictEqual(yield* reasonOf(verifyMandate(forged, alice.key.publicKey)), "SIGNATURE_INVALID")
      // A forged parent inside an otherwise well-signed child.
      const forgedIntent = yield* signRaw(headerFor(alice.did), { ...payloadOf(m.token), cns: { spendLimitUsd: 1000 } }, mallory.key)
      const child = yield* attenuateToCart({ parent: forgedIntent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 900 } })
      assert.strictEqual(yield* reasonOf(verifyMandate(child.token, resolverFor([alice, bob]))), "SIGNATURE_INVALID")
    })))

  it.effect("MALFORMED for anything that is not a well-formed mandate token", () =>
    run(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 1 } })
      const [h, p, s] = m.token.split(".") as [string, string, string]
      const good = payloadOf(m.token)
      const sign = (header: unknown, payload: unknown) => signRaw(header, payload, alice.key)
      const tokens = [
        "",
        "abc",
        `${h}.${p}`,
        `${h}.${p}.${s}.x`,
        `${h}=.${p}.${s}`,
        `${h}.${p}.${s}=`,
        `${h}.${p}.${s.slice(0, -2)}`,
        ` ${m.token}`,
        `${h}.+${p.slice(1)}.${s}`,
        // Same signature bytes, spelled with non-zero trailing bits: a re-encoding.
        `${h}.${p}.${s.slice(0, -1)}${B64URL[B64URL.indexOf(s.at(-1)!) + 1]}`,
        yield* sign({ ...headerFor(alice.did), alg: "none" }, good),
        yield* sign({ ...headerFor(alice.did), typ: "JWT" }, good),
        yield* sign({ ...headerFor(alice.did), kid: "did:mesh:bob#key-1" }, good),
        yield* sign({ ...headerFor(alice.did), crit: ["b64"] }, good),
        yield* sign({ alg: "EdDSA", typ: "mandate+jwt" }, good),
        yield* sign(headerFor(alice.did), { ...good, extra: 1 }),
        yield* sign(headerFor(alice.did), { ...good, kind: "loan" }),
        yield* sign(headerFor(alice.did), { ...good, exp: "soon" }),
        yield* sign(headerFor(alice.did), { ...good, exp: good.iat }),
        yield* sign(headerFor(alice.did), { ...good, kv: 0 }),
        yield* sign(headerFor(alice.did), { ...good, jti: "" }),
        yield* sign(headerFor(alice.did), { ...good, aud: "did:mesh:BOB" }),
        yield* sign(headerFor(alice.did), { ...good, cns: { spendLimitUsd: 1, unknown: true } }),
        yield* sign(headerFor(alice.did), { ...good, cns: { spendLimitUsd: 0.30000000000000004 } }),
        yield* sign(headerFor(alice.did), { ...good, prf: 42 }),
        yield* sign(headerFor(alice.did), "a string payload"),
        `${yield* sign(headerFor(alice.did), good)}`.replace(/^[^.]+/, Buffer.from("not json").toString("base64url"))
      ]
      for (const t of tokens) {
        assert.notStrictEqual(t, m.token)
        const e = yield* Effect.flip(verifyMandate(t, alice.key.publicKey))
        assert.strictEqual(e.reason, "MALFORMED", `${t}: ${e.message}`)
      }
    })))

  it.effect("CHAIN_BROKEN when a child is not granted by its parent's grantee, or a cart has no parent", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol, mallory } = yield* cast
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 10 } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 5 } })
      // Mallory, who is not the grantee, wraps bob's intent in her own cart.
      const stolen = yield* signRaw(headerFor(mallory.did), { ...payloadOf(cart.token), iss: mallory.did }, mallory.key)
      const resolver = resolverFor([alice, bob, mallory])
      assert.strictEqual(yield* reasonOf(verifyMandate(stolen, resolver)), "CHAIN_BROKEN")
      const rootCart = yield* signRaw(headerFor(alice.did), { ...payloadOf(intent.token), kind: "cart" }, alice.key)
      assert.strictEqual(yield* reasonOf(verifyMandate(rootCart, resolver)), "CHAIN_BROKEN")
      // An intent is never a child.
      const nested = yield* signRaw(headerFor(bob.did), { ...payloadOf(cart.token), kind: "intent" }, bob.key)
      assert.strictEqual(yield* reasonOf(verifyMandate(nested, resolver)), "CHAIN_BROKEN")
    })))

  it.effect("ATTENUATION_WIDENED when a legitimately signed child is wider than its parent (constraints or expiry)", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const resolver = resolverFor([alice, bob])
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 10, allowedMerchants: ["a.example"] } })
      const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 5, allowedMerchants: ["a.example"] } })
      const widen = (patch: Record<string, unknown>) => signRaw(headerFor(bob.did), { ...payloadOf(cart.token), ...patch }, bob.key)
      for (const patch of [
        { cns: { spendLimitUsd: 10.000001, allowedMerchants: ["a.example"] } },
        { cns: { spendLimitUsd: 5 } },
        { cns: { spendLimitUsd: 5, allowedMerchants: ["a.example", "b.example"] } },
        { exp: intent.expiresAt + 1 }
      ]) {
        assert.strictEqual(yield* reasonOf(verifyMandate(yield* widen(patch), resolver)), "ATTENUATION_WIDENED", JSON.stringify(patch))
      }
      const task = yield* taskRoot(alice, bob)
      const child = yield* attenuateTaskMandate({ parent: task, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...task.constraints, maxDelegationDepth: 2 } })
      const widenTask = (cns: Record<string, unknown>) =>
        signRaw(headerFor(bob.did), { ...payloadOf(child.token), cns: { ...child.constraints, ...cns } }, bob.key)
      for (const cns of [
        { allowed: ["search", "summarize", "send_email", "delete"] },
        { blocked: [] },
        { humanGates: [] },
        { actionLimits: { send_email: 6 } },
        { actionLimits: {} },
        { computeLimit: { llmTokens: 10_001, webRequests: 10 } },
        { computeLimit: { webRequests: 10 } },
        { dataAccess: ["crm:read", "hr:read"] },
        { maxDelegationDepth: 3 }
      ]) {
        assert.strictEqual(yield* reasonOf(verifyMandate(yield* widenTask(cns), resolver)), "ATTENUATION_WIDENED", JSON.stringify(cns))
      }
      const strictRoot = yield* taskRoot(alice, bob, { reversibleOnly: true, sandbox: true })
      const strictChild = yield* attenuateTaskMandate({ parent: strictRoot, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...strictRoot.constraints, maxDelegationDepth: 1 } })
      for (const cns of [{ reversibleOnly: false }, { sandbox: false }]) {
        const t = yield* signRaw(headerFor(bob.did), { ...payloadOf(strictChild.token), cns: { ...strictChild.constraints, ...cns } }, bob.key)
        assert.strictEqual(yield* reasonOf(verifyMandate(t, resolver)), "ATTENUATION_WIDENED", JSON.stringify(cns))
      }
    })))

  it.effect("DEPTH_EXCEEDED past maxDelegationDepth, and past the protocol's chain limit", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol, dave } = yield* cast
      const root = yield* taskRoot(alice, bob, { maxDelegationDepth: 1 })
      const child = yield* attenuateTaskMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...root.constraints, maxDelegationDepth: 0 } })
      const refused = yield* Effect.flip(attenuateTaskMandate({ parent: child, granteeDid: dave.did, grantorPrivateKey: carol.key, constraints: { ...child.constraints, maxDelegationDepth: 0 } }))
      assert.strictEqual(refused.code, "DELEGATION_DEPTH_EXCEEDED")
      // Carol signs a grandchild anyway.
      const grandchild = yield* signRaw(headerFor(carol.did), { ...payloadOf(child.token), iss: carol.did, aud: dave.did, prf: child.token }, carol.key)
      assert.strictEqual(yield* reasonOf(verifyMandate(grandchild, resolverFor([alice, bob, carol]))), "DEPTH_EXCEEDED")
      // However deep the constraints allow, a chain holds at most MAX_CHAIN_LENGTH links.
      const parties: Array<Party> = [alice, bob]
      let m: Mandate = yield* taskRoot(alice, bob, { maxDelegationDepth: 1000 })
      const keys = yield* Keys
      for (let i = 1; i < MAX_CHAIN_LENGTH; i++) {
        const next: Party = { did: `did:mesh:agent-${i}`, key: yield* keys.importPrivateKey(new Uint8Array(32).fill(100 + i)) }
        m = yield* attenuateTaskMandate({ parent: m, granteeDid: next.did, grantorPrivateKey: parties[parties.length - 1]!.key, constraints: { ...(m as Mandate<"task">).constraints, maxDelegationDepth: 1000 - i } })
        parties.push(next)
      }
      yield* verifyMandate(m.token, resolverFor(parties))
      const last = parties[parties.length - 1]!
      const tooDeep = yield* Effect.flip(attenuateTaskMandate({ parent: m, granteeDid: alice.did, grantorPrivateKey: last.key, constraints: { ...(m as Mandate<"task">).constraints, maxDelegationDepth: 1 } }))
      assert.strictEqual(tooDeep.code, "DELEGATION_DEPTH_EXCEEDED")
      const forcedDeep = yield* signRaw(headerFor(last.did), { ...payloadOf(m.token), iss: last.did, aud: alice.did, prf: m.token }, last.key)
      assert.strictEqual(yield* reasonOf(verifyMandate(forcedDeep, resolverFor(parties))), "DEPTH_EXCEEDED")
    })))
})

describe("task and model-budget mandates", () => {
  it.effect("a task mandate is written with every member at its default and attenuates within its parent", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const m = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["search"], maxDelegationDepth: 2 } })
      assert.deepStrictEqual(m.constraints, { allowed: ["search"], blocked: [], reversibleOnly: false, humanGates: [], actionLimits: {}, computeLimit: {}, dataAccess: [], sandbox: false, maxDelegationDepth: 2 })
      const c = yield* attenuateTaskMandate({ parent: m, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { allowed: ["search"], blocked: ["x"], reversibleOnly: true, sandbox: true, actionLimits: { search: 3 }, computeLimit: { llmTokens: 5 }, maxDelegationDepth: 1 } })
      yield* verifyMandate(c.token, resolverFor([alice, bob]), { expectedGrantee: carol.did, kinds: ["task"] })
      const root = yield* taskRoot(alice, bob)
      const codes = yield* Effect.all([
        { allowed: ["search", "delete"], maxDelegationDepth: 2 },
        { ...root.constraints, blocked: [], maxDelegationDepth: 2 },
        { ...root.constraints, maxDelegationDepth: 3 },
        { ...root.constraints, computeLimit: { llmTokens: 10_000 }, maxDelegationDepth: 2 }
      ].map((constraints) => Effect.map(Effect.flip(attenuateTaskMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints })), (e) => e.code)))
      assert.deepStrictEqual(codes, ["ATTENUATION_WIDENED", "ATTENUATION_WIDENED", "ATTENUATION_WIDENED", "ATTENUATION_WIDENED"])
    })))

  it.effect("model-budget mandates: issued, attenuated (budgets only shrink, quality only rises), verified", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const constraints = { token_budget: 50_000, cost_budget_usd: 2.5, quality_threshold: 0.7, task_type: "CODE" as const, expected_steps: 8 }
      const root = yield* issueModelBudgetMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints })
      assert.deepStrictEqual(root.constraints, constraints)
      const child = yield* attenuateModelBudgetMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...constraints, token_budget: 10_000, cost_budget_usd: 0.5, quality_threshold: 0.8, expected_steps: 3 } })
      const v = yield* verifyMandate(child.token, resolverFor([alice, bob]), { expectedGrantee: carol.did, kinds: ["model-budget"] })
      assert.strictEqual(v.kind, "model-budget")
      const codes = yield* Effect.all([
        { token_budget: 50_001 },
        { cost_budget_usd: 2.500001 },
        { quality_threshold: 0.69 },
        { task_type: "REASONING" as const },
        { expected_steps: 9 }
      ].map((patch) => Effect.map(Effect.flip(attenuateModelBudgetMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...constraints, ...patch } })), (e) => e.code)))
      assert.deepStrictEqual(codes, Array(5).fill("ATTENUATION_WIDENED"))
      const wider = yield* signRaw(headerFor(bob.did), { ...payloadOf(child.token), cns: { ...constraints, token_budget: 60_000 } }, bob.key)
      assert.strictEqual(yield* reasonOf(verifyMandate(wider, resolverFor([alice, bob]))), "ATTENUATION_WIDENED")
    })))

  it.effect("decodeUnverified reads a chain without checking it", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const root = yield* taskRoot(alice, bob)
      const child = yield* attenuateTaskMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...root.constraints, maxDelegationDepth: 0 } })
      const d = decodeUnverified(child.token)
      assert.strictEqual(d._tag, "Right")
      if (d._tag === "Right") assert.strictEqual(d.right.parent?.jti, root.jti)
    })))
})
