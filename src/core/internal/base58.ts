/**
 * base58btc for the proof value of every signed message. multiformats' base-x divides digit by digit (quadratic in
 * the length, a third of a signed envelope's signing time once). Both directions work in limbs held in doubles with
 * every intermediate exact: encoding carries 16-bit input digits into base-58^5 limbs, decoding multiplies 16-bit
 * limbs by 58^5 per five digits (each about three times as fast as BigInt's long division, or building a BigInt
 * and reading its hex). The property tests in test/Bytes.test.ts keep both equal to multiformats on arbitrary
 * bytes and arbitrary strings.
 *
 * Floor: core (docs/architecture.md §3).
 */
const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const INDEX = new Int8Array(128).fill(-1)
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i
const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0))
// Five base58 digits to a limb, both ways.
const LIMB_DIGITS = 5
// Encoding reads 16-bit digits into limbs of base 58^5 < 2^30: a limb times 2^16 plus a carry stays below 2^46, exact.
const LIMB = 58 ** 5
const INV_LIMB = 1 / LIMB
// Scratch space reused by every call (encoding is synchronous, so calls never overlap), grown for longer input.
let encodeLimbs = new Float64Array(32)
let encodeChars = new Uint8Array(128)
const latin1 = new TextDecoder("latin1")
// Decoding multiplies 16-bit limbs by 58^5 < 2^30 at a time: a limb times it plus a carry stays below 2^46, exact.
const POW = [1, 58, 58 ** 2, 58 ** 3, 58 ** 4, 58 ** 5]

/** base58btc (Bitcoin alphabet) of bytes, without the multibase prefix. */
export const encodeBase58 = (bytes: Uint8Array): string => {
  const n = bytes.length
  let zeros = 0
  while (zeros < n && bytes[zeros] === 0) zeros++
  // A byte is log(256) / log(58^5) ≈ 0.2731 limbs.
  const need = Math.ceil((n - zeros) * 0.2732) + 1
  if (encodeLimbs.length < need) encodeLimbs = new Float64Array(need)
  const limbs = encodeLimbs
  let len = 0
  let i = zeros
  if ((n - zeros) % 2 === 1) {
    const first = bytes[i++]!
    if (first > 0) limbs[len++] = first
  }
  for (; i < n; i += 2) {
    let carry = (bytes[i]! << 8) | bytes[i + 1]!
    for (let k = 0; k < len; k++) {
      const cur = limbs[k]! * 65536 + carry
      // A multiplication by the reciprocal is off by at most one from the quotient; the remainder's sign says which way.
      let q = Math.floor(cur * INV_LIMB)
      let r = cur - q * LIMB
      if (r < 0) {
        q--
        r += LIMB
      } else if (r >= LIMB) {
        q++
        r -= LIMB
      }
      limbs[k] = r
      carry = q
    }
    while (carry > 0) {
      const q = Math.floor(carry / LIMB)
      limbs[len++] = carry - q * LIMB
      carry = q
    }
  }
  // Digits are written from the end of the buffer; the top limb's leading zero digits are then skipped.
  const total = zeros + len * LIMB_DIGITS
  if (encodeChars.length < total) encodeChars = new Uint8Array(total * 2)
  const chars = encodeChars
  let o = total
  for (let k = 0; k < len; k++) {
    let v = limbs[k]!
    for (let j = 0; j < LIMB_DIGITS; j++) {
      const q = Math.floor(v / 58)
      chars[--o] = CODES[v - q * 58]!
      v = q
    }
  }
  let start = zeros
  while (start < total && chars[start] === 49 /* "1" */) start++
  chars.fill(49, start - zeros, start)
  return latin1.decode(chars.subarray(start - zeros, total))
}

/** Bytes of a base58btc string (no prefix); throws on a character outside the alphabet. */
export const decodeBase58 = (s: string): Uint8Array => {
  let zeros = 0
  while (zeros < s.length && s.charCodeAt(zeros) === 49 /* "1" */) zeros++
  // Little-endian 16-bit limbs of the value, grown as it grows.
  const limbs: Array<number> = []
  for (let i = zeros; i < s.length; i += LIMB_DIGITS) {
    const end = Math.min(i + LIMB_DIGITS, s.length)
    let carry = 0
    for (let j = i; j < end; j++) {
      const c = s.charCodeAt(j)
      const d = c < 128 ? INDEX[c]! : -1
      if (d < 0) throw new Error(`invalid base58 character at ${j}`)
      carry = carry * 58 + d
    }
    const factor = POW[end - i]!
    for (let k = 0; k < limbs.length; k++) {
      const cur = limbs[k]! * factor + carry
      carry = Math.floor(cur / 65536)
      limbs[k] = cur - carry * 65536
    }
    while (carry > 0) {
      limbs.push(carry % 65536)
      carry = Math.floor(carry / 65536)
    }
  }
  // Bytes of the value, most significant first, without leading zero bytes; then the leading "1"s as zero bytes.
  let top = limbs.length - 1
  while (top >= 0 && limbs[top] === 0) top--
  const highByte = top >= 0 && limbs[top]! < 256
  const length = top < 0 ? 0 : (top + 1) * 2 - (highByte ? 1 : 0)
  const out = new Uint8Array(zeros + length)
  let o = zeros
  for (let k = top; k >= 0; k--) {
    const limb = limbs[k]!
    if (!(k === top && highByte)) out[o++] = limb >> 8
    out[o++] = limb & 0xff
  }
  return out
}
