import { assert, describe, it } from "@effect/vitest"
import canonicalize from "canonicalize"
import * as Either from "effect/Either"
import * as fc from "fast-check"
import { canonicalFast, canonicalJson } from "../src/core/Canonical.js"

/** What the package answers: its text, or the refusal (an exception, or undefined for a value with no JSON form). */
const reference = (value: unknown): string | "refused" => {
  try {
    return canonicalize(value) ?? "refused"
  } catch {
    return "refused"
  }
}

const ours = (value: unknown): string | "refused" => Either.getOrElse(canonicalJson(value), () => "refused" as const)

// Strings that stress the escaping and the ordering: lone and paired surrogates, controls, non-ASCII keys.
const edgeStrings = fc.constantFrom("", "\u0000", "\u001f", "\u007f", "\"", "\\", "\ud800", "\udfff", "\ud83d\ude00", "\ud83d", "a\udc00b", "é", "\u20ac", "\ufeff", "\u2028", "\ud7ff", "\ue000", "Z", "a", "10", "1", "__proto__")
const strings = fc.oneof(fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }), fc.string(), edgeStrings)
const numbers = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(-0, 0, 1e21, 1e-7, 1e-6, 1e20, 123456789012345680000, Number.MAX_VALUE, Number.MIN_VALUE, -Number.MIN_VALUE, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2, 0.1 + 0.2, NaN, Infinity, -Infinity)
)
const leaves = fc.oneof(strings, numbers, fc.boolean(), fc.constant(null))

const { value: arbitraryValue } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, leaves, tie("array"), tie("object"), tie("odd")),
  array: fc.array(tie("value"), { maxLength: 6 }),
  object: fc.dictionary(strings, tie("value"), { maxKeys: 6 }),
  // Shapes the fast path hands to the package: members that are undefined, symbols or functions, holes, a null
  // prototype, a toJSON, a Date, a class instance, a bigint.
  odd: fc.oneof(
    fc.constant(undefined),
    fc.constant(Symbol("s")),
    fc.constant(() => 1),
    fc.constant(10n),
    fc.sparseArray(leaves, { maxLength: 5 }),
    fc.array(fc.oneof(leaves, fc.constant(undefined)), { maxLength: 4 }),
    fc.dictionary(strings, fc.oneof(leaves, fc.constant(undefined), fc.constant(Symbol("t"))), { maxKeys: 4 }).map((o) => Object.assign(Object.create(null) as object, o)),
    fc.dictionary(strings, leaves, { maxKeys: 3 }).map((o) => ({ ...o, toJSON: () => o })),
    fc.date({ noInvalidDate: true }),
    fc.constant(new (class Point { x = 1 })())
  )
}))

describe("canonicalJson", () => {
  it("equals canonicalize on arbitrary values, refusals included", () => {
    fc.assert(fc.property(arbitraryValue, (value) => assert.strictEqual(ours(value), reference(value))), { numRuns: 3_000 })
  })

  it("equals canonicalize on arbitrary JSON (fast-check's jsonValue, with and without full unicode)", () => {
    fc.assert(fc.property(fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: "binary" })), (value) => assert.strictEqual(ours(value), reference(value))), { numRuns: 3_000 })
  })

  it("the fast path answers only what canonicalize answers the same way", () => {
    fc.assert(
      fc.property(arbitraryValue, (value) => {
        const fast = canonicalFast(value)
        fc.pre(fast !== undefined)
        assert.strictEqual(fast, canonicalize(value))
      }),
      { numRuns: 3_000 }
    )
  })

  it("writes the shapes of signed bodies itself", () => {
    const body = { capability: "summarize", params: { text: "héllo \u2028 \"q\"", n: -0, big: 1e21, small: 5e-324, list: [1, "two", null, true, { z: 1, a: [] }] } }
    assert.strictEqual(canonicalFast(body), canonicalize(body))
    assert.strictEqual(canonicalFast(body), `{"capability":"summarize","params":{"big":1e+21,"list":[1,"two",null,true,{"a":[],"z":1}],"n":0,"small":5e-324,"text":"héllo \u2028 \\"q\\""}}`)
  })

  it("orders keys by UTF-16 code units, non-ASCII and astral keys included", () => {
    const value = { "\ud83d\ude00": 1, "\ufb01": 2, é: 3, e: 4, E: 5, "10": 6, "2": 7, "": 8 }
    assert.strictEqual(canonicalFast(value), `{"":8,"10":6,"2":7,"E":5,"e":4,"é":3,"\ud83d\ude00":1,"\ufb01":2}`)
    assert.strictEqual(canonicalFast(value), canonicalize(value))
  })

  it("refuses what has no JCS form, as canonicalize does", () => {
    for (const value of [NaN, Infinity, { a: -Infinity }, ["\ud800"], { "\udc00": 1 }, undefined, 10n]) {
      assert.isTrue(Either.isLeft(canonicalJson(value)), String(value))
      assert.isUndefined(canonicalFast(value))
    }
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic["self"] = { back: cyclic }
    assert.isTrue(Either.isLeft(canonicalJson(cyclic)))
  })
})
