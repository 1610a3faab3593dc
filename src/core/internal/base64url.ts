/**
 * Strict unpadded base64url decoding for JWS segments: one byte string has exactly one accepted encoding, so a
 * re-encoded token (padding, `+/` alphabet, non-zero trailing bits, whitespace) is refused before any signature is
 * checked. Built on the web-standard `atob` (every runtime we target has it), which is several times faster than
 * a JavaScript loop; this runs on every link of every chain verified.
 *
 * Floor: core (docs/architecture.md §3).
 */
import { parseJsonStrict } from "./json.js"

// `atob` is forgiving: it also takes `+`, `/`, `=` padding and ASCII whitespace. Those are the only characters
// outside the base64url alphabet it does not reject itself, so refusing them up front leaves exactly base64url
// (and `indexOf` is much faster than a regular expression over a long segment).
const FORGIVEN = ["+", "/", "=", " ", "\t", "\n", "\f", "\r"]
const hasForgiven = (s: string): boolean => {
  for (const c of FORGIVEN) if (s.indexOf(c) >= 0) return true
  return false
}
const NON_ASCII = /[\u0080-\u00ff]/
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

/** The binary string (one char per byte) of canonical unpadded base64url, or undefined for any other input. */
const decodeToBinaryString = (s: string): string | undefined => {
  const rem = s.length % 4
  if (rem === 1 || hasForgiven(s)) return undefined
  if (rem !== 0) {
    // The last character's unused low bits (4 after two characters, 2 after three) must be zero, or two
    // spellings would decode to the same bytes.
    const last = ALPHABET.indexOf(s[s.length - 1]!)
    if (last < 0 || (last & (rem === 2 ? 0x0f : 0x03)) !== 0) return undefined
  }
  try {
    return atob(s.replace(/-/g, "+").replace(/_/g, "/"))
  } catch {
    return undefined
  }
}

/** Decodes canonical unpadded base64url, or returns undefined for any other input. */
export const decodeBase64UrlStrict = (s: string): Uint8Array | undefined => {
  const bin = decodeToBinaryString(s)
  if (bin === undefined) return undefined
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return out
}

const decoder = new TextDecoder("utf-8", { fatal: true })

/** Decodes canonical unpadded base64url holding UTF-8 text, or returns undefined for any other input. */
export const decodeBase64UrlText = (s: string): string | undefined => {
  const bin = decodeToBinaryString(s)
  return bin === undefined ? undefined : binaryToText(bin)
}

const binaryToText = (bin: string): string | undefined => {
  if (!NON_ASCII.test(bin)) return bin
  const bytes = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i)
  try {
    return decoder.decode(bytes)
  } catch {
    return undefined
  }
}

/** True when a string (or any string or key inside a JSON value) has a character outside ASCII. */
const hasNonAscii = (u: unknown, skipKey: string | undefined): boolean => {
  if (typeof u === "string") return NON_ASCII_ANY.test(u)
  if (typeof u !== "object" || u === null) return false
  if (Array.isArray(u)) {
    for (const x of u) if (hasNonAscii(x, undefined)) return true
    return false
  }
  for (const k in u) {
    if (NON_ASCII_ANY.test(k)) return true
    if (k !== skipKey && hasNonAscii((u as Record<string, unknown>)[k], undefined)) return true
  }
  return false
}
const NON_ASCII_ANY = /[^\x20-\x7e]/

/**
 * Decodes canonical unpadded base64url holding UTF-8 I-JSON; undefined for anything else, a duplicate member name
 * or a `__proto__` member included (a JWS header or payload naming a claim twice reads differently in another
 * parser). Parses the decoded bytes as if they were ASCII first, which is exact whenever no string came out with a
 * character outside printable ASCII; only then is the text decoded as UTF-8 (fatal) and parsed again. `opaqueKey`
 * names a top-level member whose string the caller checks itself (a nested token: base64url and dots only), so it
 * is not scanned here.
 */
export const decodeBase64UrlJson = (s: string, opaqueKey?: string): unknown => {
  const bin = decodeToBinaryString(s)
  if (bin === undefined) return undefined
  try {
    // A short text is cheapest to scan whole; a long one is mostly the opaque member, so scan the parsed strings.
    if (bin.length <= 1024 && !NON_ASCII.test(bin)) return parseJsonStrict(bin)
    const fast: unknown = parseJsonStrict(bin)
    if (!hasNonAscii(fast, opaqueKey)) return fast
    const text = binaryToText(bin)
    return text === undefined ? undefined : parseJsonStrict(text)
  } catch {
    return undefined
  }
}
