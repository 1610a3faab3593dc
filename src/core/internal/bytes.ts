/**
 * Byte codecs shared by the core. Runtime-agnostic: TextEncoder/TextDecoder and multiformats' RFC 4648 codecs.
 *
 * Floor: core (docs/architecture.md §3).
 */
import { encodeBase58, decodeBase58 } from "./base58.js"
import { base64pad, base64url } from "multiformats/bases/base64"
import { base16 } from "multiformats/bases/base16"

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true })

/** UTF-8 bytes of a string. */
export const utf8 = (s: string): Uint8Array => encoder.encode(s)

/** Decodes UTF-8, throwing on invalid sequences. */
export const fromUtf8 = (b: Uint8Array): string => decoder.decode(b)

/** Standard base64 with padding (RFC 4648 §4). */
export const toBase64 = (b: Uint8Array): string => base64pad.baseEncode(b)

/** Decodes standard base64; accepts missing padding. Throws on other input. */
export const fromBase64 = (s: string): Uint8Array => {
  const padded = s.length % 4 === 0 ? s : s + "=".repeat(4 - (s.length % 4))
  return base64pad.baseDecode(padded)
}

/** base64url without padding (RFC 4648 §5), as JOSE uses. */
export const toBase64Url = (b: Uint8Array): string => base64url.baseEncode(b)

/** Decodes base64url without padding. Throws on other input. */
export const fromBase64Url = (s: string): Uint8Array => base64url.baseDecode(s)

/** Lower-case hex. */
export const toHex = (b: Uint8Array): string => base16.baseEncode(b)

/** Decodes hex (either case). */
export const fromHex = (s: string): Uint8Array => base16.baseDecode(s.toLowerCase())

/** Multibase base58btc (`z` prefix). */
export const toMultibase58 = (b: Uint8Array): string => `z${encodeBase58(b)}`

/** Decodes a multibase base58btc string (`z` prefix). Throws on other input. */
export const fromMultibase58 = (s: string): Uint8Array => {
  if (!s.startsWith("z")) throw new Error("not a base58btc multibase string")
  return decodeBase58(s.slice(1))
}

/** Concatenates byte arrays. */
export const concat = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  let n = 0
  for (const p of parts) n += p.length
  const out = new Uint8Array(n)
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

/** Constant-time equality for byte arrays of equal length; false for different lengths. */
export const equalBytes = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}

/** Fills a new array from the platform CSPRNG. */
export const randomBytes = (n: number): Uint8Array => crypto.getRandomValues(new Uint8Array(n))

// One CSPRNG call per 256 nonces instead of one each: the call, not the bytes, is what costs.
const POOL_SIZE = 4096
let pool = new Uint8Array(0)
let poolOffset = 0

/** Fresh CSPRNG bytes for public, single-use values (nonces, ids), drawn from a pooled buffer. Never for keys. */
export const randomNonceBytes = (n: number): Uint8Array => {
  if (n > POOL_SIZE) return randomBytes(n)
  if (poolOffset + n > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_SIZE))
    poolOffset = 0
  }
  const out = pool.slice(poolOffset, poolOffset + n)
  poolOffset += n
  return out
}
