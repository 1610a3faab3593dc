import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { toBase64Url, utf8 } from "../../src/core/internal/bytes.js"
import { MAX_TOKEN_LENGTH, verifyMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { cast, headerFor, resolverFor, signRaw } from "../support/mandates.js"

// One header member or claim at a time set to a wrong type, a value just past its bound, or removed: every such
// token, however validly signed, is MANDATE_INVALID with reason MALFORMED, and the message names what is wrong.

const T0 = 1_800_000_000_000
const NOW = T0 / 1000

describe("mandate claims at and past their bounds", () => {
  it.effect("each wrong header member or claim is MALFORMED, naming it; the bounds themselves are accepted", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const resolver = resolverFor([alice, bob])
      const payload = { iss: alice.did, aud: bob.did, iat: NOW, nbf: NOW, exp: NOW + 600, jti: "j".repeat(22), kv: 1, kind: "task", cns: { allowed: [], maxDelegationDepth: 0 } }
      const header = headerFor(alice.did)
      const verify = (h: unknown, p: unknown) =>
        Effect.flatMap(signRaw(h, p, alice.key), (token) => Effect.either(verifyMandate(token, resolver, { expectedGrantee: bob.did })))
      const without = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([key]) => key !== k))
      const headerCases: ReadonlyArray<readonly [unknown, string]> = [
        [{ ...header, zip: "DEF" }, "unsupported header member \"zip\""],
        [{ ...header, alg: "ES256" }, "alg must be EdDSA"],
        [without(header, "alg"), "alg must be EdDSA"],
        [{ ...header, typ: "JWT" }, "typ must be mandate+jwt"],
        [{ ...header, kid: 1 }, "kid must be the grantor's #key-1"],
        [{ ...header, kid: `${bob.did}#key-1` }, "kid must be the grantor's #key-1"],
        [[header], "header is not base64url I-JSON"]
      ]
      const claimCases: ReadonlyArray<readonly [unknown, string]> = [
        [{ ...payload, sub: "x" }, "unknown claim \"sub\""],
        [{ ...payload, iss: "did:mesh:Alice" }, "iss must be a lower-case did:mesh DID"],
        [{ ...payload, aud: 7 }, "aud must be a lower-case did:mesh DID"],
        [{ ...payload, iat: NOW + 0.5 }, "iat, nbf and exp must be NumericDate integers"],
        [{ ...payload, nbf: -1 }, "iat, nbf and exp must be NumericDate integers"],
        [without(payload, "exp"), "iat, nbf and exp must be NumericDate integers"],
        [{ ...payload, exp: NOW }, "exp must come after iat and nbf"],
        [{ ...payload, iat: NOW + 601 }, "exp must come after iat and nbf"],
        [{ ...payload, jti: "" }, "jti must be a string of 1..128 characters"],
        [{ ...payload, jti: "j".repeat(129) }, "jti must be a string of 1..128 characters"],
        [{ ...payload, jti: 5 }, "jti must be a string of 1..128 characters"],
        [{ ...payload, kv: 0 }, "kv must be a positive integer"],
        [{ ...payload, kv: 1.5 }, "kv must be a positive integer"],
        [{ ...payload, kv: "1" }, "kv must be a positive integer"],
        [{ ...payload, kind: "Task" }, "unknown kind"],
        [{ ...payload, kind: 1 }, "unknown kind"],
        [{ ...payload, cns: [] }, "cns must be an object"],
        [[payload], "payload is not base64url I-JSON"]
      ]
      for (const [h, names] of headerCases) {
        const r = yield* verify(h, payload)
        assert.isTrue(r._tag === "Left" && r.left.reason === "MALFORMED" && r.left.message.includes(names), `${names}: ${JSON.stringify(r)}`.slice(0, 300))
      }
      for (const [p, names] of claimCases) {
        const r = yield* verify(header, p)
        assert.isTrue(r._tag === "Left" && r.left.reason === "MALFORMED" && r.left.message.includes(names), `${names}: ${JSON.stringify(r)}`.slice(0, 300))
      }
      // The bounds: a jti of 1 and of 128 characters, kv 1, nbf 0, iat equal to exp.
      for (const p of [{ ...payload, jti: "j" }, { ...payload, jti: "j".repeat(128) }, { ...payload, nbf: 0 }, { ...payload, iat: NOW + 600, nbf: NOW }]) {
        const r = yield* verify(header, p)
        assert.strictEqual(r._tag, "Right", JSON.stringify(p))
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the token itself: not a string, not three segments, too long, a signature not of 64 bytes", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const resolver = resolverFor([alice, bob])
      const payload = { iss: alice.did, aud: bob.did, iat: NOW, nbf: NOW, exp: NOW + 600, jti: "jti-token-shape", kv: 1, kind: "task", cns: { allowed: [], maxDelegationDepth: 0 } }
      const token = yield* signRaw(headerFor(alice.did), payload, alice.key)
      const [h, p, s] = token.split(".") as [string, string, string]
      const refused = (t: unknown) => Effect.map(Effect.flip(verifyMandate(t as string, resolver)), (e) => `${e.reason} ${e.message}`)
      assert.strictEqual(yield* refused(42), "MALFORMED token is not a string")
      for (const t of [`${h}.${p}`, `${h}.${p}.${s}.${s}`, `${h}${p}${s}`]) assert.include(yield* refused(t), "three segments", t.slice(0, 20))
      assert.include(yield* refused(`${h}.${p}.${s}${"A".repeat(MAX_TOKEN_LENGTH)}`), `longer than ${MAX_TOKEN_LENGTH}`)
      assert.include(yield* refused(`${h}.${p}.${s.slice(0, -4)}`), "64 bytes")
      assert.include(yield* refused(`${h}.${p}.${toBase64Url(utf8("x".repeat(65)))}`), "64 bytes")
    }).pipe(Effect.provide(KeysNative.layer)))
})
