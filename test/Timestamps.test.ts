import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as fc from "fast-check"
import { verifyApproval } from "../src/core/Approval.js"
import { buildEnvelope, isEnvelope, validateEnvelope } from "../src/core/Envelope.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeMemory } from "../src/core/NonceStore.js"
import { signMessage } from "../src/core/Proof.js"
import { formatUtcTimestamp, parseByPattern, parseUtcTimestamp } from "../src/core/internal/timestamp.js"
import { cast, resolverFor } from "./support/mandates.js"

const T0 = Date.UTC(2026, 0, 1)

describe("RFC 3339 UTC timestamps", () => {
  it("read every UTC spelling, fractions of any length truncated to the millisecond", () => {
    const cases: ReadonlyArray<readonly [string, number]> = [
      ["2026-01-01T00:00:00Z", T0],
      ["2026-01-01T00:00:00.000Z", T0],
      ["2026-01-01t00:00:00z", T0],
      ["2026-01-01T00:00:00+00:00", T0],
      ["2026-01-01T00:00:00-00:00", T0],
      ["2026-01-01T00:00:00.5+00:00", T0 + 500],
      ["2026-01-01T00:15:00.123456+00:00", T0 + 900_123],
      ["2026-01-01T00:00:00.999999999999Z", T0 + 999],
      ["2024-02-29T23:59:59Z", Date.UTC(2024, 1, 29, 23, 59, 59)],
      ["0050-01-01T00:00:00Z", new Date(Date.UTC(2000, 0, 1)).setUTCFullYear(50)]
    ]
    for (const [s, ms] of cases) assert.strictEqual(parseUtcTimestamp(s), ms, s)
  })

  it("refuse other offsets, impossible dates and other syntaxes", () => {
    for (
      const s of [
        "2026-01-01T02:00:00+02:00",
        "2026-01-01T00:00:00+0000",
        "2026-01-01T00:00:00",
        "2026-01-01 00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-12-31T23:59:60Z",
        "2026-01-01T00:00:00.Z",
        "2026-1-01T00:00:00Z",
        "1767225600000"
      ]
    ) {
      assert.isUndefined(parseUtcTimestamp(s), s)
    }
  })

  it("agree with toISOString on every instant", () => {
    fc.assert(
      fc.property(fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }), (ms) => {
        const iso = new Date(ms).toISOString()
        assert.strictEqual(parseUtcTimestamp(iso), ms)
        assert.strictEqual(parseUtcTimestamp(iso.replace("Z", "+00:00")), ms)
      }),
      { numRuns: 2000 }
    )
  })

  it("write as toISOString on every instant, and read near-ISO strings as the pattern does", () => {
    fc.assert(
      fc.property(fc.oneof(fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }), fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.double({ min: -8.64e15, max: 8.64e15, noNaN: true })), (ms) => {
        assert.strictEqual(formatUtcTimestamp(ms), new Date(ms).toISOString())
      }),
      { numRuns: 3000 }
    )
    assert.throws(() => formatUtcTimestamp(Number.NaN))
    // Strings of the ISO form with any character of a small alphabet in any place: impossible dates, other
    // separators, lower-case letters, years below 1000.
    const char = fc.constantFrom(..."0123456789-T:.Zzt+ ")
    fc.assert(
      fc.property(fc.integer({ min: -30_610_224_000_000, max: 253_402_300_799_999 }), fc.array(fc.tuple(fc.nat(23), char), { maxLength: 3 }), (ms, edits) => {
        const chars = [...new Date(ms).toISOString()]
        for (const [i, c] of edits) chars[i] = c
        const s = chars.join("")
        assert.strictEqual(parseUtcTimestamp(s), parseByPattern(s), s)
      }),
      { numRuns: 5000 }
    )
    for (const s of ["0999-12-31T23:59:59.999Z", "0050-01-01T00:00:00.000Z", "2024-02-29T00:00:00.000Z", "2025-02-29T00:00:00.000Z"]) {
      assert.strictEqual(parseUtcTimestamp(s), parseByPattern(s), s)
    }
  })
})

describe("approvals and envelopes from other implementations", () => {
  it.effect("an approval written as Python's isoformat() writes it (+00:00, microseconds) verifies", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice } = yield* cast
      const resolver = resolverFor([alice])
      const fields = { type: "MeshApproval", taskId: "task-1", capability: "send_email", decision: "approve" }
      const expected = { taskId: "task-1", capability: "send_email", grantor: alice.did }
      for (
        const [expiresAt, created, ms] of [
          ["2026-01-01T00:15:00.123456+00:00", "2026-01-01T00:00:00+00:00", T0 + 900_123],
          ["2026-01-01T00:15:00-00:00", "2026-01-01T00:00:00.000000+00:00", T0 + 900_000],
          ["2026-01-01t00:15:00z", "2026-01-01T00:00:00Z", T0 + 900_000]
        ] as const
      ) {
        const signed = yield* signMessage({ ...fields, expiresAt }, alice.key, `${alice.did}#key-1`, { created })
        assert.deepStrictEqual(yield* verifyApproval(signed, expected, resolver), { decision: "approve", expiresAt: ms })
      }
      for (const [expiresAt, created] of [["2026-01-01T02:15:00+02:00", "2026-01-01T00:00:00Z"], ["2026-01-01T00:15:00Z", "2026-02-30T00:00:00Z"]]) {
        const signed = yield* signMessage({ ...fields, expiresAt }, alice.key, `${alice.did}#key-1`, { created: created! })
        assert.strictEqual((yield* Effect.flip(verifyApproval(signed, expected, resolver))).code, "APPROVAL_MALFORMED")
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("an envelope stamped +00:00 validates; one stamped +02:00 is MALFORMED", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const built = yield* buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body: { capability: "echo" }, privateKey: alice.key })
      const { proof: _proof, ...unsecured } = built
      const restamp = (createdAt: string, expiresAt: string) =>
        signMessage({ ...unsecured, nonce: `${unsecured.nonce}${createdAt.length}`, createdAt, expiresAt }, alice.key, `${alice.did}#key-1`, { created: createdAt })
      const python = yield* restamp("2026-01-01T00:00:00.000000+00:00", "2026-01-01T00:05:00+00:00")
      assert.isTrue(isEnvelope(python))
      const ok = yield* validateEnvelope(python, alice.key.publicKey, bob.did, makeMemory())
      assert.strictEqual(ok.createdAt, "2026-01-01T00:00:00.000000+00:00")
      const offset = yield* restamp("2026-01-01T02:00:00+02:00", "2026-01-01T02:05:00+02:00")
      assert.strictEqual((yield* Effect.flip(validateEnvelope(offset, alice.key.publicKey, bob.did, makeMemory()))).code, "MALFORMED")
    }).pipe(Effect.provide(KeysNative.layer)))
})
