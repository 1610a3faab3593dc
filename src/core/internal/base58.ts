/**
 * base58btc for the proof value of every signed message. multiformats' base-x divides digit by digit (quadratic in
 * the length, a third of a signed envelope's signing time once). Encoding lets BigInt do the long division nine
 * digits at a time; decoding multiplies 16-bit limbs by 58^5 per five digits, every intermediate exact in a double
 * (twice as fast as building a BigInt and reading its hex). The property tests in test/Bytes.test.ts keep both equal
 * to multiformats on arbitrary bytes and arbitrary strings.
 *
 * Floor: core (docs/architecture.md §3).
 */
const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const INDEX = new Int8Array(128).fill(-1)
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i
const CHUNK = 9 // 58^9 < 2^53, so a chunk is exact as a number
const CHUNK_BASE = 58n ** BigInt(CHUNK)
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))
// Decoding multiplies 16-bit limbs by 58^5 < 2^30 at a time: a limb times it plus a carry stays below 2^46, exact.
const DECODE_CHUNK = 5
const POW = [1, 58, 58 ** 2, 58 ** 3, 58 ** 4, 58 ** 5]

/** base58btc (Bitcoin alphabet) of bytes, without the multibase prefix. */
export const encodeBase58 = (bytes: Uint8Array): string => {
  let zeros = 0
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++
  let hex = ""
  for (let i = zeros; i < bytes.length; i++) hex += HEX[bytes[i]!]
  let n = hex.length === 0 ? 0n : BigInt(`0x${hex}`)
  const digits: Array<number> = [] // least significant first
  while (n > 0n) {
    let chunk = Number(n % CHUNK_BASE)
    n /= CHUNK_BASE
    for (let i = 0; i < CHUNK; i++) {
      digits.push(chunk % 58)
      chunk = Math.floor(chunk / 58)
    }
  }
  while (digits.length > 0 && digits[digits.length - 1] === 0) digits.pop()
  let out = "1".repeat(zeros)
  for (let i = digits.length - 1; i >= 0; i--) out += ALPHABET[digits[i]!]
  return out
}

/** Bytes of a base58btc string (no prefix); throws on a character outside the alphabet. */
export const decodeBase58 = (s: string): Uint8Array => {
  let zeros = 0
  while (zeros < s.length && s.charCodeAt(zeros) === 49 /* "1" */) zeros++
  // Little-endian 16-bit limbs of the value, grown as it grows.
  const limbs: Array<number> = []
  for (let i = zeros; i < s.length; i += DECODE_CHUNK) {
    const end = Math.min(i + DECODE_CHUNK, s.length)
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
