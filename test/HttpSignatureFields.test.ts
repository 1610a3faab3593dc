import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type BareItem, type InnerList, isInnerList, parseDictionary, serializeDictionary, serializeInnerList, Token } from "structured-headers"
import { parseSimpleSignature, parseSimpleSignatureInput, simpleDigestField } from "../src/core/internal/signatureFields.js"

/** The general parser's reading of a single-member dictionary, or "refused". */
const general = (field: string) => {
  try {
    return parseDictionary(field)
  } catch {
    return "refused" as const
  }
}

const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 24 })
const key = fc.stringMatching(/^[a-z*][a-z0-9_.*-]{0,8}$/)
const bareItem: fc.Arbitrary<BareItem> = fc.oneof(
  printable,
  fc.integer({ min: -999_999_999_999_999, max: 999_999_999_999_999 }),
  fc.constant(true),
  fc.constant(false),
  fc.double({ min: -1000, max: 1000, noNaN: true }).map((d) => Math.round(d * 1000) / 1000),
  fc.stringMatching(/^[A-Za-z*][A-Za-z0-9:/!#$%&'*+.^_`|~-]{0,6}$/).map((t) => new Token(t))
)
// Most members are in the simple form, so the fast path is exercised; the rest carry what sends it to the parser.
const simpleParam: fc.Arbitrary<BareItem> = fc.oneof(printable.filter((s) => !/["\\]/.test(s)), fc.integer({ min: -999_999_999_999_999, max: 999_999_999_999_999 }))
const member = (param: fc.Arbitrary<BareItem>, item: fc.Arbitrary<string>): fc.Arbitrary<InnerList> =>
  fc.tuple(fc.array(item, { maxLength: 5 }), fc.uniqueArray(fc.tuple(key, param), { maxLength: 7, selector: ([k]) => k })).map(
    ([items, params]): InnerList => [items.map((name) => [name, new Map()]), new Map(params)]
  )
const anyMember = fc.oneof(member(simpleParam, printable.filter((s) => !/["\\]/.test(s))), member(bareItem, printable))
const serialized = fc.tuple(key, anyMember).map(([label, m]) => serializeDictionary(new Map([[label, m]])))

// Edits that reach the parser's corners: spaces, tabs, escapes, signs, dots, leading zeros, commas, other members.
const edit = fc.tuple(fc.nat(), fc.constantFrom(" ", "  ", "\t", "\\", "\"", "-", "0", "00", ".", ",", ";", "=", "(", ")", "?1", "a", "*", ", b=1", ":", "é"), fc.boolean())
const edited = fc.tuple(serialized, fc.array(edit, { maxLength: 3 })).map(([s, edits]) =>
  edits.reduce((t, [at, text, replace]) => {
    const i = at % (t.length + 1)
    return t.slice(0, i) + text + t.slice(replace ? i + 1 : i)
  }, s)
)

const sameAsGeneral = (field: string) => {
  const fast = parseSimpleSignatureInput(field)
  if (fast === undefined) return
  const parsed = general(field)
  assert.notStrictEqual(parsed, "refused", `fast path read what the parser refuses: ${field}`)
  if (parsed === "refused") return
  assert.deepStrictEqual([...parsed.keys()], [fast.label], field)
  const m = parsed.get(fast.label)!
  assert.isTrue(isInnerList(m), field)
  assert.deepStrictEqual(m, fast.input, field)
  assert.strictEqual(serializeInnerList(m as InnerList), fast.serialized, field)
}

describe("mesh-sig fields read without the general parser", () => {
  it("a Signature-Input the fast path reads is read the same by the parser, and is its own serialization", () => {
    fc.assert(fc.property(serialized, sameAsGeneral), { numRuns: 3_000 })
    fc.assert(fc.property(edited, sameAsGeneral), { numRuns: 5_000 })
  })

  it("every member a signer writes in the simple form takes the fast path", () => {
    fc.assert(
      fc.property(key, member(simpleParam, printable.filter((s) => !/["\\]/.test(s))), (label, m) => {
        const field = serializeDictionary(new Map([[label, m]]))
        assert.isDefined(parseSimpleSignatureInput(field), field)
      }),
      { numRuns: 2_000 }
    )
    const signed = 'sig1=("@method" "@target-uri" "content-digest");created=1795698423;expires=1795702023;nonce="R8Gr61gePhcfkwD5BraA4A";alg="ed25519";keyid="did:mesh:bench-caller#key-1";tag="mesh-sig"'
    assert.strictEqual(parseSimpleSignatureInput(signed)?.input[1].get("tag"), "mesh-sig")
  })

  it("refuses to read the forms that need the parser", () => {
    for (const field of ['sig1=("a";x=1)', 'sig1=( "a")', 'sig1=("a"  "b")', 'sig1=("a");x=?1', 'sig1=("a");x', 'sig1=("a");x=1.5', 'sig1=("a");x=-0', 'sig1=("a");x=007', 'sig1=("a");x=tok', 'sig1=("a\\"b")', 'sig1=("a"), sig2=("b")', 'sig1=("a");x=1;x=2', ' sig1=("a")', 'sig1=("a");x=1234567890123456', 'Sig1=("a")']) {
      assert.isUndefined(parseSimpleSignatureInput(field), field)
    }
  })

  it("a Signature's byte sequence reads as the parser reads it", () => {
    const field = fc.oneof(
      fc.tuple(key, fc.uint8Array({ maxLength: 80 })).map(([label, b]) => serializeDictionary(new Map([[label, [b, new Map()]]]))),
      fc.tuple(key, fc.string({ unit: fc.constantFrom(..."AB+/=az09"), maxLength: 12 })).map(([label, s]) => `${label}=:${s}:`),
      fc.tuple(key, fc.uint8Array({ maxLength: 8 }), fc.constantFrom(";a=1", ", b=:AA==:", " ", "")).map(([label, b, tail]) => `${label}=:${btoa(String.fromCharCode(...b))}:${tail}`)
    )
    fc.assert(
      fc.property(field, (f) => {
        const fast = parseSimpleSignature(f)
        const parsed = general(f)
        if (fast === undefined) return
        assert.notStrictEqual(parsed, "refused", f)
        if (parsed === "refused") return
        assert.deepStrictEqual([...parsed.keys()], [fast.label], f)
        const m = parsed.get(fast.label)!
        assert.isFalse(isInnerList(m))
        assert.deepStrictEqual(new Uint8Array(m[0] as ArrayBuffer), fast.bytes, f)
        assert.strictEqual(m[1].size, 0)
      }),
      { numRuns: 3_000 }
    )
  })

  it("the Content-Digest a signer writes parses to its digest", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (digest) => {
        const parsed = general(simpleDigestField(digest))
        assert.notStrictEqual(parsed, "refused")
        if (parsed === "refused") return
        assert.deepStrictEqual(new Uint8Array(parsed.get("sha-256")![0] as ArrayBuffer), digest)
      }),
      { numRuns: 500 }
    )
  })
})
