import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { base58btc } from "multiformats/bases/base58"
import { decodeBase58, encodeBase58 } from "../src/core/internal/base58.js"
import { fromBase64, fromMultibase58, randomNonceBytes, toBase64, toMultibase58 } from "../src/core/internal/bytes.js"

describe("bytes", () => {
  it("base58btc agrees with multiformats on arbitrary bytes, leading zeros included", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), fc.nat(4), (tail, zeros) => {
        const b = new Uint8Array([...new Uint8Array(zeros), ...tail])
        const ours = toMultibase58(b)
        assert.strictEqual(ours, base58btc.encode(b))
        assert.deepStrictEqual(fromMultibase58(ours), b)
        assert.deepStrictEqual(decodeBase58(ours.slice(1)), base58btc.decode(ours))
      }),
      { numRuns: 2000 }
    )
    assert.strictEqual(encodeBase58(new Uint8Array(0)), "")
    assert.strictEqual(encodeBase58(new Uint8Array([0, 0])), "11")
    assert.deepStrictEqual(decodeBase58(""), new Uint8Array(0))
    assert.deepStrictEqual(decodeBase58("11"), new Uint8Array([0, 0]))
    assert.throws(() => decodeBase58("0OIl"))
    assert.throws(() => fromMultibase58("m123"))
  })

  it("base58btc decodes arbitrary strings of its alphabet as multiformats does, signature-sized ones included", () => {
    const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    const digits = fc.string({ unit: fc.constantFrom(...alphabet), maxLength: 120 })
    fc.assert(
      fc.property(fc.nat(3), digits, (ones, s) => {
        const text = "1".repeat(ones) + s
        assert.deepStrictEqual(decodeBase58(text), base58btc.decode(`z${text}`))
      }),
      { numRuns: 2000 }
    )
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 64, maxLength: 64 }), (b) => {
        assert.strictEqual(encodeBase58(b), base58btc.encode(b).slice(1))
        assert.deepStrictEqual(decodeBase58(encodeBase58(b)), b)
      }),
      { numRuns: 1000 }
    )
    for (const b of [new Uint8Array(64).fill(255), new Uint8Array([0, 255]), new Uint8Array([1]), new Uint8Array([255, 0, 0])]) {
      assert.strictEqual(encodeBase58(b), base58btc.encode(b).slice(1))
    }
  })

  it("base64 round-trips and tolerates missing padding", () => {
    const b = new Uint8Array([1, 2, 3, 4])
    assert.strictEqual(toBase64(b), "AQIDBA==")
    assert.deepStrictEqual(fromBase64("AQIDBA"), b)
  })

  it("pooled nonce bytes never repeat a slice", () => {
    const seen = new Set<string>()
    for (let i = 0; i < 1000; i++) seen.add(toBase64(randomNonceBytes(16)))
    assert.strictEqual(seen.size, 1000)
  })
})
