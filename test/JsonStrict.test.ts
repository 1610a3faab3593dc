import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { parseJsonStrict, StrictJsonError, tryParseJsonStrict } from "../src/core/internal/json.js"

const hasOwn = Object.prototype.hasOwnProperty

/** True when a parsed value holds an own `__proto__` member anywhere. */
const holdsProto = (v: unknown): boolean => {
  if (typeof v !== "object" || v === null) return false
  if (!Array.isArray(v) && hasOwn.call(v, "__proto__")) return true
  return Object.values(v).some(holdsProto)
}

const refusal = (text: string): StrictJsonError | undefined => {
  const r = tryParseJsonStrict(text)
  return r.ok ? undefined : r.error
}

/** A small deterministic generator of spelling choices, so one integer seed decides a whole spelling. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return (n: number): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) % n
  }
}

const WS = [" ", "\t", "\n", "\r"]
const ws = (r: (n: number) => number): string => Array.from({ length: r(3) }, () => WS[r(4)]!).join("")

/** A JSON string literal for `s` in a random legal spelling: code units raw or `\uXXXX` (either case), short escapes. */
const spell = (s: string, r: (n: number) => number): string => {
  let out = "\""
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    const u = () => {
      const hex = c.toString(16).padStart(4, "0")
      return `\\u${r(2) === 0 ? hex : hex.toUpperCase()}`
    }
    if (c === 0x22) out += r(2) === 0 ? "\\\"" : u()
    else if (c === 0x5c) out += r(2) === 0 ? "\\\\" : u()
    else if (c < 0x20) out += u()
    else out += r(3) === 0 ? u() : s[i]
  }
  return out + "\""
}

/**
 * Serializes `v` with random whitespace and spellings; the `dupAt`-th object (in document order) gets one of its names
 * a second time (or a fresh name twice when it is empty), at a random position. Returns the text and the name.
 */
const serializeWithDuplicate = (v: unknown, dupAt: number, seed: number): { text: string; name: string | undefined } => {
  const r = prng(seed)
  let objects = 0
  let name: string | undefined
  const go = (x: unknown): string => {
    if (typeof x !== "object" || x === null) return ws(r) + JSON.stringify(x) + ws(r)
    if (Array.isArray(x)) return `${ws(r)}[${x.map(go).join(",")}${x.length === 0 ? ws(r) : ""}]${ws(r)}`
    const members: Array<[string, string]> = Object.entries(x).map(([k, val]) => [k, go(val)])
    if (objects++ === dupAt) {
      const keys = Object.keys(x)
      name = keys.length > 0 ? keys[r(keys.length)]! : "to"
      if (keys.length === 0) members.push([name, go(1)])
      members.splice(r(members.length + 1), 0, [name, go(r(2) === 0 ? "shadow" : { nested: [1, 2] })])
    }
    const body = members.map(([k, val]) => `${ws(r)}${spell(k, r)}${ws(r)}:${val}`).join(",")
    return `${ws(r)}{${body}${members.length === 0 ? ws(r) : ""}}${ws(r)}`
  }
  const text = go(v)
  return { text, name }
}

const countObjects = (v: unknown): number =>
  typeof v !== "object" || v === null ? 0 : (Array.isArray(v) ? 0 : 1) + Object.values(v).reduce<number>((n, x) => n + countObjects(x), 0)

// Strings that exercise the over-counting path: quotes, colons, backslashes, braces and non-ASCII inside strings.
const trickyString = fc.string({ unit: fc.constantFrom("\"", ":", "\\", " ", "\n", "a", "{", "}", ",", "é", "\u2028", "😀") })
const { value: jsonWithTricky } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.constantFrom(null, true, false, 0, -1.5, 1e21),
    trickyString,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(trickyString, fc.string()), tie("value"), { maxKeys: 4 })
  )
}))

const anyJson = fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: "grapheme" }), jsonWithTricky)
const objectRoot = fc.tuple(fc.string(), anyJson).map(([k, v]) => ({ [k]: v }) as unknown)
const noProto = (v: unknown) => !holdsProto(v)

describe("parseJsonStrict (I-JSON)", () => {
  it("agrees with JSON.parse on any JSON.stringify output (compact and pretty-printed)", () => {
    fc.assert(
      fc.property(anyJson, fc.constantFrom(undefined, 2, "\t"), (v, indent) => {
        const text = JSON.stringify(v, null, indent)
        const expected: unknown = JSON.parse(text)
        if (holdsProto(expected)) {
          assert.strictEqual(refusal(text)?.reason, "proto")
        } else {
          assert.deepStrictEqual(parseJsonStrict(text), expected)
        }
      }),
      { numRuns: 1500 }
    )
  })

  it("accepts any duplicate-free object text in any legal spelling (escapes, whitespace)", () => {
    fc.assert(
      fc.property(anyJson.filter(noProto), fc.integer(), (v, seed) => {
        // dupAt -1: no duplicate is injected, only the spelling is varied.
        const { text } = serializeWithDuplicate(v, -1, seed)
        assert.deepStrictEqual(parseJsonStrict(text), JSON.parse(text))
      }),
      { numRuns: 1000 }
    )
  })

  it("refuses an object text with a duplicate name injected at any depth, in any spelling", () => {
    fc.assert(
      fc.property(objectRoot.filter(noProto), fc.nat(), fc.integer(), (v, pick, seed) => {
        const { text, name } = serializeWithDuplicate(v, pick % countObjects(v), seed)
        assert.isDefined(name)
        // JSON.parse itself takes it (keeping the last), which is the danger.
        JSON.parse(text)
        const e = refusal(text)
        assert.strictEqual(e?.reason, "duplicate", text)
        assert.strictEqual(e?.member, name)
      }),
      { numRuns: 1500 }
    )
  })

  it("refuses the duplicates of the issue in every spelling", () => {
    for (
      const text of [
        `{"to":"did:mesh:bob","to":"did:mesh:mallory"}`,
        `{"to":"a", "to" :"b"}`,
        `{"to":"a","t\\u006f":"b"}`,
        `{"\\u0074\\u006F":"a","to":"b"}`,
        `{"to":"a",\n"to"\r\n\t :"b"}`,
        `{"body":{"x":1},"body":{"x":1}}`,
        `[{"a":1},{"b":{"c":[{"d":1,"d":1}]}}]`
      ]
    ) {
      assert.strictEqual(refusal(text)?.reason, "duplicate", text)
    }
    // The same name in different objects is fine.
    assert.deepStrictEqual(parseJsonStrict(`{"a":{"a":1},"b":[{"a":2},{"a":3}]}`), { a: { a: 1 }, b: [{ a: 2 }, { a: 3 }] })
  })

  it("refuses __proto__ as a member name in any spelling and at any depth; accepts it as a value", () => {
    for (
      const text of [
        `{"__proto__":{"admin":true}}`,
        `{"\\u005f_proto__":{"admin":true}}`,
        `{"\\u005F\\u005Fproto\\u005f\\u005f":1}`,
        `{"context":{"__proto__":{"admin":true}}}`,
        `[1,{"a":[{"__proto__" :null}]}]`
      ]
    ) {
      assert.strictEqual(refusal(text)?.reason, "proto", text)
    }
    for (const text of [`{"a":"__proto__"}`, `["__proto__"]`, `"__proto__"`, `{"__proto_":1,"proto__":2}`, `{"a":"\\"__proto__\\":1"}`]) {
      assert.deepStrictEqual(parseJsonStrict(text), JSON.parse(text), text)
    }
    const parsed = parseJsonStrict(`{"a":"__proto__"}`) as object
    assert.strictEqual(Object.getPrototypeOf(parsed), Object.prototype)
  })

  it("refuses invalid JSON as syntax, whatever it is", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        let valid = true
        try {
          JSON.parse(s)
        } catch {
          valid = false
        }
        if (!valid) assert.strictEqual(refusal(s)?.reason, "syntax")
      }),
      { numRuns: 500 }
    )
    for (const s of ["", "{", "{\"a\":1,}", "[1,]", "{'a':1}", "NaN"]) assert.strictEqual(refusal(s)?.reason, "syntax", s)
  })

  it("does not crash on deep nesting: 100 000 levels of arrays and objects parse, a duplicate at the bottom is refused", () => {
    const n = 100_000
    assert.isArray(parseJsonStrict("[".repeat(n) + "]".repeat(n)))
    assert.isObject(parseJsonStrict(`{"a":`.repeat(n) + "1" + "}".repeat(n)))
    assert.strictEqual(refusal(`{"a":`.repeat(n) + `{"b":1,"b":2}` + "}".repeat(n))?.reason, "duplicate")
    assert.strictEqual(refusal(`[`.repeat(n) + `{"__proto__":1}` + "]".repeat(n))?.reason, "proto")
  })
})
