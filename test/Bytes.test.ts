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
    assert.throws(() => decodeBase58("0OIl"))
    assert.throws(() => fromMultibase58("m123"))
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
