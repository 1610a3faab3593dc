/**
 * Strict JSON for everything that arrives from outside (HTTP bodies, envelopes, discovery documents, manifests,
 * approvals). RFC 8785 signs I-JSON (RFC 7493), which forbids duplicate member names: `JSON.parse` keeps the last of
 * two `"to"` members where another parser keeps the first, so the two would read different messages under one
 * signature. A `__proto__` member is refused too, because code that copies the parsed object (spread, Schema
 * decoding) would replace the copy's prototype with it.
 *
 * Cost: `JSON.parse` does the parsing. Member names in the text are counted as the colons preceded (across any JSON
 * whitespace) by a double quote, and compared with the members of the result. Every member name is such a quote, so
 * the count never under-counts; it over-counts only where a string holds `\":`. The result has one member per
 * distinct name of each object, so equal counts prove there is no duplicate; only a text where they differ (or a
 * result holding `__proto__`, or one too deep to count recursively) is scanned exactly. Colons are found with
 * `indexOf`, which runs at memchr speed, rather than a regular expression: about half the cost on a 1 KB body.
 *
 * Floor: core (docs/architecture.md §3).
 */

/** Why a text was refused. */
export type JsonRefusal = "syntax" | "duplicate" | "proto"

/** A refused JSON text; `reason` says why, `member` names the offending member where there is one. */
export class StrictJsonError extends Error {
  constructor(readonly reason: JsonRefusal, readonly member?: string) {
    super(
      reason === "syntax"
        ? "not valid JSON"
        : reason === "duplicate"
          ? `duplicate member name ${JSON.stringify(member)}`
          : "a member named __proto__ is not accepted"
    )
    this.name = "StrictJsonError"
  }
}

const hasOwn = Object.prototype.hasOwnProperty

/** Colons preceded, across JSON whitespace, by a `"`: at least the number of member names in a JSON text. */
const countNameEnds = (text: string): number => {
  let n = 0
  let i = text.indexOf(":")
  while (i >= 0) {
    let j = i - 1
    let c = text.charCodeAt(j)
    while (c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d) c = text.charCodeAt(--j)
    if (c === 0x22 /* " */) n++
    i = text.indexOf(":", i + 1)
  }
  return n
}

/** Members in a parsed value, or -1 when an object holds its own `__proto__`. */
const countMembers = (v: unknown): number => {
  if (typeof v !== "object" || v === null) return 0
  let n = 0
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const c = countMembers(v[i])
      if (c < 0) return -1
      n += c
    }
    return n
  }
  if (hasOwn.call(v, "__proto__")) return -1
  const o = v as Record<string, unknown>
  for (const k in o) {
    n++
    const x = o[k]
    if (typeof x === "object" && x !== null) {
      const c = countMembers(x)
      if (c < 0) return -1
      n += c
    }
  }
  return n
}

/** The first duplicate or `__proto__` member of a text `JSON.parse` accepted, by a full scan. */
const exactScan = (text: string): StrictJsonError | undefined => {
  const stack: Array<Set<string> | null> = []
  const len = text.length
  let i = 0
  while (i < len) {
    const c = text.charCodeAt(i)
    if (c === 0x7b /* { */) {
      stack.push(new Set())
      i++
    } else if (c === 0x5b /* [ */) {
      stack.push(null)
      i++
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop()
      i++
    } else if (c === 0x22 /* " */) {
      const start = i
      i++
      while (i < len) {
        const d = text.charCodeAt(i)
        if (d === 0x5c /* \ */) i += 2
        else if (d === 0x22) break
        else i++
      }
      i++
      let j = i
      while (j < len && (text.charCodeAt(j) === 0x20 || text.charCodeAt(j) === 0x09 || text.charCodeAt(j) === 0x0a || text.charCodeAt(j) === 0x0d)) j++
      if (text.charCodeAt(j) === 0x3a /* : */) {
        const raw = text.slice(start, i)
        const name = raw.includes("\\") ? (JSON.parse(raw) as string) : raw.slice(1, -1)
        if (name === "__proto__") return new StrictJsonError("proto")
        const names = stack[stack.length - 1]
        if (names) {
          if (names.has(name)) return new StrictJsonError("duplicate", name)
          names.add(name)
        }
      }
    } else i++
  }
  return undefined
}

/** Parses I-JSON: throws `StrictJsonError` for invalid JSON, a duplicate member name or a `__proto__` member. */
export const parseJsonStrict = (text: string): unknown => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new StrictJsonError("syntax")
  }
  if (typeof value !== "object" || value === null) return value
  let members: number
  try {
    members = countMembers(value)
  } catch {
    // Nesting too deep for the recursion: the iterative scan decides.
    members = -1
  }
  if (members >= 0 && countNameEnds(text) === members) return value
  const refusal = exactScan(text)
  if (refusal) throw refusal
  return value
}

/** `parseJsonStrict` without throwing: the value, or the refusal. */
export const tryParseJsonStrict = (
  text: string
): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: StrictJsonError } => {
  try {
    return { ok: true, value: parseJsonStrict(text) }
  } catch (e) {
    return { ok: false, error: e instanceof StrictJsonError ? e : new StrictJsonError("syntax") }
  }
}
