/**
 * RFC 8785 JSON Canonicalization Scheme: the bytes that get signed everywhere in the mesh.
 *
 * `canonicalJson` writes the common shapes (plain objects and dense arrays of strings, finite numbers, booleans and
 * null) itself and hands anything else to the `canonicalize` package: every signed message is canonicalized on
 * its hot path, and the package's recursion (a `Set` of ancestors, a `map` and a `join` per level, a lone-surrogate
 * scan per string) cost more than the signature's hashing. A property test keeps both equal on arbitrary values.
 *
 * Floor: core (docs/architecture.md §3).
 */
import canonicalize from "canonicalize"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { utf8 } from "./internal/bytes.js"

/** A value that has no JCS form: NaN, Infinity, a lone surrogate, a cycle, or nothing JSON can hold. */
export class NotCanonicalizable extends Schema.TaggedError<NotCanonicalizable>()("NotCanonicalizable", {
  code: Schema.Literal("NOT_CANONICALIZABLE"),
  message: Schema.String
}) {}

const SURROGATE = /[\uD800-\uDFFF]/

/** True when every surrogate in `s` is half of a pair; a lone one has no JCS form. */
const isWellFormed = (s: string): boolean => {
  if (!SURROGATE.test(s)) return true
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0xd800 || c > 0xdfff) continue
    if (c > 0xdbff) return false
    const next = s.charCodeAt(i + 1)
    if (!(next >= 0xdc00 && next <= 0xdfff)) return false
    i++
  }
  return true
}
// Printable ASCII but `"` and `\`: JSON writes such a string as it is, between quotes, which is cheaper than asking
// JSON.stringify for it (most keys and many values are such strings: DIDs, nonces, timestamps).
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/** True when JSON (and so JCS) writes `s` as it is between quotes: printable ASCII but `"` and `\`. */
export const isPlainString = (s: string): boolean => PLAIN.test(s)

/** The JCS string literal of `s`, or undefined when it holds a lone surrogate. */
export const quote = (s: string): string | undefined => (PLAIN.test(s) ? `"${s}"` : isWellFormed(s) ? JSON.stringify(s) : undefined)

// Deeper than this the package decides (it detects cycles, which the fast path does not look for).
const MAX_FAST_DEPTH = 64

const isPlainObject = (o: object): boolean => {
  const proto = Object.getPrototypeOf(o)
  return proto === Object.prototype || proto === null
}

/**
 * The JCS text of `value` when it is made only of the shapes written here, else undefined (the package decides):
 * a well-formed string, a finite number, a boolean, null, a dense array or a plain object (no `toJSON`)
 * of such values; object members that are undefined or symbols are left out, as the package does.
 */
export const canonicalFast = (value: unknown, depth = 0): string | undefined => {
  switch (typeof value) {
    case "string":
      return quote(value)
    case "number":
      // ECMAScript's Number-to-String is JCS's number form (-0 is "0", 1e21 is "1e+21").
      return Number.isFinite(value) ? String(value) : undefined
    case "boolean":
      return value ? "true" : "false"
    case "object": {
      if (value === null) return "null"
      if (depth >= MAX_FAST_DEPTH || typeof (value as { toJSON?: unknown }).toJSON === "function") return undefined
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== Array.prototype) return undefined
        let out = "["
        for (let i = 0; i < value.length; i++) {
          // A hole or an undefined element is written differently by the package (empty, or null): let it decide.
          const element: unknown = value[i]
          const text = element === undefined ? undefined : canonicalFast(element, depth + 1)
          if (text === undefined) return undefined
          out += i === 0 ? text : `,${text}`
        }
        return `${out}]`
      }
      if (!isPlainObject(value)) return undefined
      const record = value as Record<string, unknown>
      const keys = Object.keys(record)
      if (keys.length > 1) keys.sort()
      let out = "{"
      let first = true
      for (const key of keys) {
        const member = record[key]
        if (member === undefined || typeof member === "symbol") continue
        const name = quote(key)
        if (name === undefined) return undefined
        const text = canonicalFast(member, depth + 1)
        if (text === undefined) return undefined
        out += `${first ? "" : ","}${name}:${text}`
        first = false
      }
      return `${out}}`
    }
    default:
      return undefined
  }
}

/** The JCS string of a JSON value. */
export const canonicalJson = (value: unknown): Either.Either<string, NotCanonicalizable> => {
  const fast = canonicalFast(value)
  if (fast !== undefined) return Either.right(fast)
  try {
    const out = canonicalize(value)
    return out === undefined
      ? Either.left(new NotCanonicalizable({ code: "NOT_CANONICALIZABLE", message: "value has no JSON form" }))
      : Either.right(out)
  } catch (e) {
    return Either.left(new NotCanonicalizable({ code: "NOT_CANONICALIZABLE", message: e instanceof Error ? e.message : String(e) }))
  }
}

/** The UTF-8 bytes of the JCS form of a JSON value. */
export const canonicalBytes = (value: unknown): Either.Either<Uint8Array, NotCanonicalizable> =>
  Either.map(canonicalJson(value), utf8)
