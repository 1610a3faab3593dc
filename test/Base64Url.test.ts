import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { decodeBase64UrlStrict, decodeBase64UrlText } from "../src/core/internal/base64url.js"

/** The reference: a string is accepted exactly when it is the canonical base64url spelling of its bytes. */
const isCanonical = (s: string) => /^[A-Za-z0-9_-]*$/.test(s) && Buffer.from(s, "base64url").toString("base64url") === s

describe("strict base64url", () => {
  it("accepts exactly the canonical unpadded base64url spelling of some bytes (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 24 }), fc.uint8Array({ maxLength: 24 }), (junk, bytes) => {
        const good = Buffer.from(bytes).toString("base64url")
        for (const s of [junk, good, good + junk, junk + good, `${good}=`, ` ${good}`]) {
          const ours = decodeBase64UrlStrict(s)
          assert.strictEqual(ours !== undefined, isCanonical(s), JSON.stringify(s))
          if (ours !== undefined) assert.deepStrictEqual(Buffer.from(ours), Buffer.from(s, "base64url"))
        }
      }),
      { numRuns: 3000 }
    )
  })

  it("refuses padding, the standard alphabet, whitespace and non-zero trailing bits", () => {
    for (const s of ["QQ==", "QQ=", "a+b/", "QR", "QUJ", "Q Q", "QQ\n", "Q"]) assert.isUndefined(decodeBase64UrlStrict(s), s)
    assert.deepStrictEqual(Array.from(decodeBase64UrlStrict("QUI")!), [65, 66])
    assert.deepStrictEqual(Array.from(decodeBase64UrlStrict("QUE")!), [65, 65])
    assert.deepStrictEqual(Array.from(decodeBase64UrlStrict("")!), [])
  })

  it("decodes UTF-8 text, ASCII fast and anything else through a fatal decoder", () => {
    assert.strictEqual(decodeBase64UrlText(Buffer.from('{"a":"b"}').toString("base64url")), '{"a":"b"}')
    assert.strictEqual(decodeBase64UrlText(Buffer.from('{"m":"café ☕"}').toString("base64url")), '{"m":"café ☕"}')
    assert.isUndefined(decodeBase64UrlText(Buffer.from([0xc3, 0x28]).toString("base64url")))
  })
})
