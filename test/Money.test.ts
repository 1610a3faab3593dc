import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import fc from "fast-check"
import { formatUsd, formatUsdString, isUsd, MAX_MICROS, type Micros, parseUsd } from "../src/core/Money.js"

const micros = (x: number | string) => Either.getOrThrow(parseUsd(x))

describe("Money", () => {
  it("reads decimals exactly as micro-dollars", () => {
    assert.strictEqual(micros(0), 0)
    assert.strictEqual(micros(-0), 0)
    assert.strictEqual(micros(0.1), 100_000)
    assert.strictEqual(micros(0.2), 200_000)
    assert.strictEqual(micros(0.3), 300_000)
    assert.strictEqual(micros(19.99), 19_990_000)
    assert.strictEqual(micros(0.000001), 1)
    assert.strictEqual(micros(1e-6), 1)
    assert.strictEqual(micros(1.5e3), 1_500_000_000)
    assert.strictEqual(micros("12.340000"), 12_340_000)
    assert.strictEqual(micros(999_999_999.999999), 999_999_999_999_999)
  })

  it("0.1 + 0.2 is not a price: it has more than six decimals and is refused, never rounded", () => {
    assert.isTrue(Either.isLeft(parseUsd(0.1 + 0.2)))
    // Whereas the exact sum of the two amounts is exactly 0.3.
    assert.strictEqual(micros(0.1) + micros(0.2), micros(0.3))
  })

  it("refuses negatives, NaN, infinities, more than six decimals and amounts past the safe range", () => {
    for (const bad of [-1, -0.000001, Number.NaN, Number.POSITIVE_INFINITY, 1e-7, 0.0000015, 1e21, 1_000_000_000, "1,5", "", " ", "0x10", "1.2.3", "-0"]) {
      const r = parseUsd(bad)
      assert.isTrue(Either.isLeft(r), String(bad))
      if (Either.isLeft(r)) assert.strictEqual(r.left.code, "INVALID_AMOUNT")
    }
  })

  it("formats back to the same decimal (property: parse ∘ format = id on micros)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_MICROS }), (m) => {
        assert.strictEqual(micros(formatUsd(m as Micros)), m)
        assert.strictEqual(micros(formatUsdString(m as Micros)), m)
      })
    )
    assert.strictEqual(formatUsdString(1 as Micros), "0.000001")
    assert.strictEqual(formatUsdString(12_500_000 as Micros), "12.5")
  })

  it("sums of micros never drift, whatever the float sum does (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 100_000_000 }), { maxLength: 50 }), (parts) => {
        const total = parts.reduce((a, b) => a + b, 0)
        const viaDecimals = parts.map((p) => micros(formatUsd(p as Micros))).reduce((a, b) => a + b, 0)
        assert.strictEqual(viaDecimals, total)
      })
    )
  })

  it("reads exponents of any width and trims a string's surrounding space", () => {
    assert.strictEqual(micros("123e-02"), 1_230_000)
    assert.strictEqual(micros("5e-1"), 500_000)
    assert.strictEqual(micros("1e2"), 100_000_000)
    assert.strictEqual(micros("12e+01"), 120_000_000)
    assert.strictEqual(micros(" 1.5 "), 1_500_000)
    assert.strictEqual(micros("\t0.25\n"), 250_000)
    // Zeros past the sixth decimal carry no value, so they are not "more than six decimals".
    assert.strictEqual(micros("0.1000000000"), 100_000)
    assert.strictEqual(micros("000012.5"), 12_500_000)
    // The exponent bound: 30 is read (and refused only for its size), 31 is refused before any expansion.
    assert.isTrue(Either.isLeft(parseUsd("1e30")))
    assert.isTrue(Either.isRight(parseUsd("0e30")))
    assert.isTrue(Either.isLeft(parseUsd("0e31")))
    // Nine whole digits are the most; ten are refused.
    assert.strictEqual(micros("999999999"), 999_999_999_000_000)
    assert.isTrue(Either.isLeft(parseUsd("1000000000")))
  })

  it("formats whole dollars without a point, and cents without trailing zeros", () => {
    assert.strictEqual(formatUsdString(3_000_000 as Micros), "3")
    assert.strictEqual(formatUsdString(0 as Micros), "0")
    assert.strictEqual(formatUsdString(10_000_000 as Micros), "10")
    assert.strictEqual(formatUsdString(10_500_000 as Micros), "10.5")
    assert.strictEqual(formatUsd(3_000_000 as Micros), 3)
    assert.strictEqual(formatUsd(1 as Micros), 0.000001)
  })

  it("isUsd holds for valid amounts only, and only for numbers", () => {
    assert.isTrue(isUsd(0))
    assert.isTrue(isUsd(19.99))
    assert.isFalse(isUsd(-1))
    assert.isFalse(isUsd(1e-7))
    assert.isFalse(isUsd("1.5"))
    assert.isFalse(isUsd(null))
  })

  it("a refusal says which amount and why, in words", () => {
    const reason = (x: number | string) => {
      const r = parseUsd(x)
      return Either.isLeft(r) ? r.left.message : "accepted"
    }
    assert.match(reason(Number.NaN), /NaN.*finite/)
    assert.match(reason(-2), /-2 is negative/)
    assert.match(reason("abc"), /"abc".*decimal/)
    assert.match(reason("1e31"), /1e31.*range/)
    assert.match(reason("0.0000001"), /0\.0000001.*six decimals/)
    assert.match(reason("1234567890"), /1234567890.*largest/)
  })

  it("leading zeros do not count against the nine whole digits; a refusal is an InvalidAmount", () => {
    assert.strictEqual(micros("00000000001"), 1_000_000)
    assert.strictEqual(micros("0000000000999999999.5"), 999_999_999_500_000)
    assert.strictEqual(micros("0.5e1"), 5_000_000)
    assert.strictEqual(micros("5e-1"), 500_000)
    assert.strictEqual(micros("000"), 0)
    const r = parseUsd(-1)
    assert.isTrue(Either.isLeft(r) && r.left._tag === "InvalidAmount" && r.left.code === "INVALID_AMOUNT")
  })
})
