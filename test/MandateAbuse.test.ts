import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as jose from "jose"
import { MAX_LIST_ENTRIES } from "../src/core/Constraints.js"
import { Keys, type PrivateKey } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { issueIntentMandate, issueTaskMandate, MAX_TOKEN_LENGTH, verifyMandate } from "../src/core/Mandate.js"
import { toBase64Url, utf8 } from "../src/core/internal/bytes.js"
import { cast, headerFor, payloadOf, resolverFor, signRaw } from "./support/mandates.js"

const run = <A, E>(effect: Effect.Effect<A, E, Keys>) => Effect.provide(effect, KeysNative.layer)

/** Signs a header and payload given as JSON text, byte for byte (duplicates and all). */
const signText = (headerText: string, payloadText: string, key: PrivateKey) =>
  Effect.gen(function* () {
    const input = `${toBase64Url(utf8(headerText))}.${toBase64Url(utf8(payloadText))}`
    return `${input}.${toBase64Url(yield* (yield* Keys).sign(key, utf8(input)))}`
  })

const names = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`)

describe("mandate tokens are I-JSON", () => {
  it.effect("a validly signed token naming a claim twice (or a header member, or __proto__) is MALFORMED, though jose reads it", () =>
    run(Effect.gen(function* () {
      const { alice, bob, mallory } = yield* cast
      const m = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 5 } })
      const good = JSON.stringify(payloadOf(m.token))
      const header = JSON.stringify(headerFor(alice.did))
      const twiceAud = good.replace(/}$/, `,"aud":"${mallory.did}"`) + "}"
      const tokens = [
        yield* signText(header, twiceAud, alice.key),
        yield* signText(header, good.replace(`"aud":`, `"aud" :"${mallory.did}","\\u0061ud":`), alice.key),
        yield* signText(header.replace(/}$/, `,"kid":"${alice.did}#key-1"}`), good, alice.key),
        yield* signText(header, good.replace(/}$/, `,"__proto__":{"kind":"intent"}}`), alice.key)
      ]
      for (const t of tokens) {
        const e = yield* Effect.flip(verifyMandate(t, alice.key.publicKey))
        assert.strictEqual(e.reason, "MALFORMED", e.message)
        assert.include(e.message, "I-JSON")
      }
      // The danger: a stock JWS library verifies the first and reads the last "aud", another parser the first.
      const key = yield* Effect.promise(() => jose.importJWK({ kty: "OKP", crv: "Ed25519", x: Buffer.from(alice.key.publicKey).toString("base64url") }, "EdDSA"))
      const { payload } = yield* Effect.promise(() => jose.compactVerify(tokens[0]!, key))
      assert.strictEqual(JSON.parse(new TextDecoder().decode(payload)).aud, mallory.did)
      // The same claims once each verify.
      assert.strictEqual((yield* verifyMandate(yield* signText(header, good, alice.key), alice.key.publicKey)).grantee, bob.did)
    })))
})

describe("constraint lists are bounded", () => {
  it.effect(`a list of more than ${MAX_LIST_ENTRIES} entries is refused: MALFORMED when verifying, INVALID_CONSTRAINTS when issuing`, () =>
    run(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      const good = payloadOf((yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 5 } })).token)
      const sign = (cns: unknown, kind = "intent") => signRaw(headerFor(alice.did), { ...good, kind, cns }, alice.key)
      const at = yield* sign({ spendLimitUsd: 5, allowedMerchants: names(MAX_LIST_ENTRIES, "m") })
      assert.strictEqual((yield* verifyMandate(at, alice.key.publicKey)).grantee, bob.did)
      const task = { allowed: ["a"], blocked: [], reversibleOnly: false, humanGates: [], actionLimits: {}, computeLimit: {}, dataAccess: [], sandbox: false, maxDelegationDepth: 0 }
      const over = [
        yield* sign({ spendLimitUsd: 5, allowedMerchants: names(1024, "m") }),
        yield* sign({ spendLimitUsd: 5, allowedMerchants: names(MAX_LIST_ENTRIES + 1, "m") }),
        ...(yield* Effect.forEach(["allowed", "blocked", "humanGates", "dataAccess"], (k) => sign({ ...task, [k]: names(1024, "c") }, "task"))),
        yield* sign({ ...task, actionLimits: Object.fromEntries(names(MAX_LIST_ENTRIES + 1, "c").map((c) => [c, 1])) }, "task")
      ]
      for (const t of over) {
        assert.isAtMost(t.length, MAX_TOKEN_LENGTH)
        const e = yield* Effect.flip(verifyMandate(t, alice.key.publicKey))
        assert.strictEqual(e.reason, "MALFORMED", e.message)
        assert.match(e.message, new RegExp(`more than ${MAX_LIST_ENTRIES}`))
      }
      const refused = yield* Effect.flip(issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 5, allowedMerchants: names(MAX_LIST_ENTRIES + 1, "m") } }))
      assert.strictEqual(refused.code, "INVALID_CONSTRAINTS")
      const refusedTask = yield* Effect.flip(issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: names(MAX_LIST_ENTRIES + 1, "c"), maxDelegationDepth: 0 } }))
      assert.strictEqual(refusedTask.code, "INVALID_CONSTRAINTS")
    })))

  it.effect("the leaf's signature is checked first: a forged leaf over huge lists is SIGNATURE_INVALID, not MALFORMED", () =>
    run(Effect.gen(function* () {
      const { alice, bob, carol, mallory } = yield* cast
      const root = payloadOf((yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 5 } })).token)
      // A root with 1024 merchants, signed by its grantor, and a cart below it "by bob" with 1024 more, signed by mallory.
      const parent = yield* signRaw(headerFor(alice.did), { ...root, cns: { spendLimitUsd: 5, allowedMerchants: names(1024, "m") } }, alice.key)
      const leaf = { ...root, iss: bob.did, aud: carol.did, jti: "forged", kind: "cart", cns: { spendLimitUsd: 5, allowedMerchants: names(1024, "x") }, prf: parent }
      const forged = yield* signRaw(headerFor(bob.did), leaf, mallory.key)
      assert.isAtMost(forged.length, MAX_TOKEN_LENGTH)
      const resolver = resolverFor([alice, bob])
      const e = yield* Effect.flip(verifyMandate(forged, resolver))
      assert.strictEqual(e.reason, "SIGNATURE_INVALID", e.message)
      assert.include(e.message, "link 1")
      // Signed by bob for real, the same token is refused for its lists.
      const signed = yield* signRaw(headerFor(bob.did), leaf, bob.key)
      assert.strictEqual((yield* Effect.flip(verifyMandate(signed, resolver))).reason, "MALFORMED")
      // A forged leaf over a forged root: the leaf is reported, before the root.
      const forgedRoot = yield* signRaw(headerFor(alice.did), root, mallory.key)
      const overForgedRoot = yield* signRaw(headerFor(bob.did), { ...leaf, cns: { spendLimitUsd: 1 }, prf: forgedRoot }, mallory.key)
      assert.include((yield* Effect.flip(verifyMandate(overForgedRoot, resolver))).message, "link 1")
      // Signed by bob over the forged root: now the root's signature is what fails.
      const overForgedRootSigned = yield* signRaw(headerFor(bob.did), { ...leaf, cns: { spendLimitUsd: 1 }, prf: forgedRoot }, bob.key)
      const r = yield* Effect.flip(verifyMandate(overForgedRootSigned, resolver))
      assert.strictEqual(r.reason, "SIGNATURE_INVALID")
      assert.include(r.message, "link 0")
    })))

  it.effect("cns that is not an object is a parse failure: MALFORMED even under a forged signature (§9.5 step 1)", () =>
    run(Effect.gen(function* () {
      const { alice, bob, mallory } = yield* cast
      const root = payloadOf((yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 5 } })).token)
      for (const cns of [5, null, [], "x"]) {
        for (const key of [alice.key, mallory.key]) {
          const token = yield* signRaw(headerFor(alice.did), { ...root, cns }, key)
          const e = yield* Effect.flip(verifyMandate(token, resolverFor([alice, bob])))
          assert.strictEqual(e.reason, "MALFORMED", `${JSON.stringify(cns)}: ${e.message}`)
          assert.include(e.message, "cns must be an object")
        }
      }
    })))
})

describe("constraints given as outside objects", () => {
  it.effect("an own __proto__ member is refused as unknown instead of becoming a prototype", () =>
    run(Effect.gen(function* () {
      const { alice, bob } = yield* cast
      // JSON.parse (not our strict parser) makes __proto__ an own member, as a caller's object may have it.
      const spending = JSON.parse(`{"spendLimitUsd":5,"__proto__":{"allowedMerchants":["shop"]}}`)
      const e = yield* Effect.flip(issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: spending }))
      assert.strictEqual(e.code, "INVALID_CONSTRAINTS")
      const actionLimits = JSON.parse(`{"__proto__":{"send_email":1}}`)
      const t = yield* Effect.flip(issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["send_email"], actionLimits, maxDelegationDepth: 0 } }))
      assert.strictEqual(t.code, "INVALID_CONSTRAINTS")
    })))
})
