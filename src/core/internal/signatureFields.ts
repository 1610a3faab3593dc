/**
 * The mesh-sig fields as signers write them, read without the general structured-field parser: a Signature-Input of
 * one member whose inner list holds plain strings and whose parameters are strings without escapes or integers in
 * their canonical form; a Signature of one byte sequence. Such text is exactly its own serialization, so the
 * signature base reuses it instead of serializing the parameters again. Anything else answers undefined and takes
 * the general parser, which decides as it always did; a property test keeps the two readings equal
 * (test/HttpSignatureFields.test.ts).
 *
 * Floor: core (docs/architecture.md §3).
 */
import type { BareItem, InnerList, Item } from "structured-headers"

/** One Signature-Input member read by the fast path: its label, the member, and its text after `label=`. */
export interface SimpleInput {
  readonly label: string
  readonly input: InnerList
  readonly serialized: string
}

const isKeyStart = (c: number): boolean => (c >= 97 && c <= 122) || c === 42 // a-z, *
const isKeyChar = (c: number): boolean => isKeyStart(c) || (c >= 48 && c <= 57) || c === 95 || c === 45 || c === 46 // 0-9 _ - .
const isDigit = (c: number): boolean => c >= 48 && c <= 57
// Inside a string: printable ASCII but `"` and `\` (an escape takes the general parser).
const isPlainStringChar = (c: number): boolean => c >= 0x20 && c <= 0x7e && c !== 0x22 && c !== 0x5c

/** The end of an sf-key starting at `i` (i itself when there is none). */
const keyEnd = (s: string, i: number): number => {
  if (!isKeyStart(s.charCodeAt(i))) return i
  let j = i + 1
  while (j < s.length && isKeyChar(s.charCodeAt(j))) j++
  return j
}

/** The index of the closing quote of a plain string whose opening quote is at `i - 1`, or -1. */
const stringEnd = (s: string, i: number): number => {
  for (let j = i; j < s.length; j++) {
    const c = s.charCodeAt(j)
    if (c === 0x22) return j
    if (!isPlainStringChar(c)) return -1
  }
  return -1
}

/** A Signature-Input in the simple form, or undefined (then the general parser reads it). */
export const parseSimpleSignatureInput = (field: string): SimpleInput | undefined => {
  const labelEnd = keyEnd(field, 0)
  if (labelEnd === 0 || field.charCodeAt(labelEnd) !== 61 /* = */ || field.charCodeAt(labelEnd + 1) !== 40 /* ( */) return undefined
  const items: Array<Item> = []
  let i = labelEnd + 2
  if (field.charCodeAt(i) !== 41 /* ) */) {
    for (;;) {
      if (field.charCodeAt(i) !== 34) return undefined
      const end = stringEnd(field, i + 1)
      if (end < 0) return undefined
      items.push([field.slice(i + 1, end), new Map()])
      i = end + 1
      const c = field.charCodeAt(i)
      if (c === 41) break
      if (c !== 32 || field.charCodeAt(i + 1) !== 34) return undefined
      i++
    }
  }
  i++
  const params = new Map<string, BareItem>()
  while (i < field.length) {
    if (field.charCodeAt(i) !== 59 /* ; */) return undefined
    const end = keyEnd(field, i + 1)
    if (end === i + 1 || field.charCodeAt(end) !== 61) return undefined
    const key = field.slice(i + 1, end)
    if (params.has(key)) return undefined
    i = end + 1
    const c = field.charCodeAt(i)
    if (c === 34) {
      const close = stringEnd(field, i + 1)
      if (close < 0) return undefined
      params.set(key, field.slice(i + 1, close))
      i = close + 1
    } else {
      // An integer as the serializer writes it: no leading zero, no "-0", at most 15 digits.
      const start = i
      if (c === 45) i++
      const first = field.charCodeAt(i)
      if (!isDigit(first) || (first === 48 && (c === 45 || isDigit(field.charCodeAt(i + 1))))) return undefined
      while (isDigit(field.charCodeAt(i))) i++
      const digits = i - start - (c === 45 ? 1 : 0)
      if (digits > 15) return undefined
      params.set(key, Number(field.slice(start, i)))
    }
    const next = field.charCodeAt(i)
    if (i < field.length && next !== 59) return undefined
  }
  return { label: field.slice(0, labelEnd), input: [items, params], serialized: field.slice(labelEnd + 1) }
}

const SIMPLE_SIGNATURE = /^([a-z*][a-z0-9_.*-]*)=:([A-Za-z0-9+/=]*):$/

/** A Signature of one member holding one byte sequence without parameters, or undefined. */
export const parseSimpleSignature = (field: string): { readonly label: string; readonly bytes: Uint8Array } | undefined => {
  const m = SIMPLE_SIGNATURE.exec(field)
  if (m === null) return undefined
  let binary: string
  try {
    // The general parser decodes byte sequences with atob too, so both read the same bytes.
    binary = atob(m[2]!)
  } catch {
    return undefined
  }
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return { label: m[1]!, bytes }
}

/** The Content-Digest a signer writes for a body of this SHA-256 digest: `sha-256=:<base64>:`. */
export const simpleDigestField = (digest: Uint8Array): string => {
  let binary = ""
  for (let i = 0; i < digest.length; i++) binary += String.fromCharCode(digest[i]!)
  return `sha-256=:${btoa(binary)}:`
}
