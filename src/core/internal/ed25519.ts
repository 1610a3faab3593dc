/**
 * Ed25519 encodings and the one verification rule both key layers apply before the curve equation.
 *
 * Floor: core (docs/architecture.md §3).
 */
import { concat, equalBytes, fromBase64, fromHex, toBase64 } from "./bytes.js"

/** DER prefix of a PKCS#8 v1 Ed25519 private key (RFC 8410): the 32-byte seed follows. */
export const PKCS8_PREFIX = fromHex("302e020100300506032b657004220420")
/** DER prefix of a PKCS#8 v2 (OneAsymmetricKey) Ed25519 private key; seed, then `a1 23 03 21 00` and the public key. */
const PKCS8_V2_PREFIX = fromHex("3051020101300506032b657004220420")
const PKCS8_V2_PUB_TAG = fromHex("8121")
/** DER prefix of an Ed25519 SubjectPublicKeyInfo: the 32-byte public key follows. */
export const SPKI_PREFIX = fromHex("302a300506032b6570032100")

const startsWith = (b: Uint8Array, prefix: Uint8Array) =>
  b.length >= prefix.length && equalBytes(b.subarray(0, prefix.length), prefix)

/** Wraps a 32-byte seed as PKCS#8 v1 DER. */
export const seedToPkcs8 = (seed: Uint8Array): Uint8Array => concat(PKCS8_PREFIX, seed)

/** Wraps a 32-byte public key as SPKI DER. */
export const publicToSpki = (pub: Uint8Array): Uint8Array => concat(SPKI_PREFIX, pub)

/**
 * The seed inside a raw seed or a PKCS#8 (v1 or v2) DER blob, with the public key a v2 blob carries;
 * undefined when the bytes are neither.
 */
export const parsePrivateKeyBytes = (
  b: Uint8Array
): { readonly seed: Uint8Array; readonly embeddedPublicKey?: Uint8Array } | undefined => {
  if (b.length === 32) return { seed: b.slice() }
  if (b.length === 48 && startsWith(b, PKCS8_PREFIX)) return { seed: b.slice(16) }
  // v2 with the public key as [1] IMPLICIT BIT STRING: 16 + 32 + 2 + 1 + 32 = 83 bytes.
  if (b.length === 83 && startsWith(b, PKCS8_V2_PREFIX) && equalBytes(b.subarray(48, 50), PKCS8_V2_PUB_TAG) && b[50] === 0) {
    return { seed: b.slice(16, 48), embeddedPublicKey: b.slice(51) }
  }
  return undefined
}

/** The group order L = 2^252 + 27742317777372353535851937790883648493. */
export const L = (1n << 252n) + 27742317777372353535851937790883648493n

/** Little-endian bytes → bigint. */
export const bytesToBigIntLE = (b: Uint8Array): bigint => {
  let n = 0n
  for (let i = b.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(b[i]!)
  return n
}

/** True when the 32-byte encoding's y coordinate is ≥ p = 2^255 − 19 (a non-canonical encoding). */
const isNonCanonicalY = (enc: Uint8Array): boolean => {
  if ((enc[31]! & 0x7f) !== 0x7f) return false
  for (let i = 30; i >= 1; i--) if (enc[i] !== 0xff) return false
  return enc[0]! >= 0xed
}

// Encodings of the eight points of small order, plus the sign-bit variants of the two with x = 0.
const SMALL_ORDER = [
  "0100000000000000000000000000000000000000000000000000000000000000",
  "0100000000000000000000000000000000000000000000000000000000000080",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
  "0000000000000000000000000000000000000000000000000000000000000000",
  "0000000000000000000000000000000000000000000000000000000000000080",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85"
].map(fromHex)

/** True when the public key encodes a point of small order (a key that can "sign" without a secret). */
export const isSmallOrderEncoding = (pub: Uint8Array): boolean => SMALL_ORDER.some((p) => equalBytes(p, pub))

/**
 * True for a public key we accept anywhere a key enters (registration, rotation, challenges, DID documents, identity
 * files, resolver answers): 32 bytes, a canonical encoding, and not one of the small-order points, under which a stock
 * verifier accepts a universal forgery (R = identity, S = 0).
 */
export const isAcceptablePublicKey = (pub: Uint8Array): boolean =>
  pub.length === 32 && !isNonCanonicalY(pub) && !isSmallOrderEncoding(pub)

/**
 * The raw 32 bytes of a `publicKeyB64` given in standard base64 with or without padding (Go's `RawStdEncoding`,
 * Rust's `STANDARD_NO_PAD`); undefined for anything else. Keys are compared as these bytes, never as text.
 */
export const decodePublicKeyB64 = (s: string): Uint8Array | undefined => {
  if (!/^[A-Za-z0-9+/]{43}=?$/.test(s)) return undefined
  try {
    const b = fromBase64(s)
    return b.length === 32 && toBase64(b).slice(0, 43) === s.slice(0, 43) ? b : undefined
  } catch {
    return undefined
  }
}

/** The bytes of an acceptable public key given as `publicKeyB64` (padded or not); undefined for anything else. */
export const acceptablePublicKeyB64 = (b64: unknown): Uint8Array | undefined => {
  const b = typeof b64 === "string" ? decodePublicKeyB64(b64) : undefined
  return b !== undefined && isAcceptablePublicKey(b) ? b : undefined
}

/** The canonical spelling of a `publicKeyB64` (standard base64, padded), or undefined when it is not 32 bytes. */
export const canonicalPublicKeyB64 = (s: string): string | undefined => {
  const b = decodePublicKeyB64(s)
  return b === undefined ? undefined : toBase64(b)
}

/**
 * The checks of our verification rule that come before the curve equation, shared by both layers so they accept
 * exactly the same signatures: 64-byte signature, canonical S (S < L), canonical public-key encoding, and no
 * small-order public key. The equation itself is the cofactorless one of RFC 8032 §5.1.7 with R compared as
 * bytes, which also rejects a non-canonical R.
 */
export const passesStrictPrechecks = (pub: Uint8Array, signature: Uint8Array): boolean => {
  if (signature.length !== 64) return false
  // S < 2^252 needs no bigint; only the top nibble range needs the full comparison.
  if ((signature[63]! & 0xf0) !== 0 && bytesToBigIntLE(signature.subarray(32)) >= L) return false
  if (isNonCanonicalY(pub)) return false
  return !isSmallOrderEncoding(pub)
}
