/**
 * base58btc for the proof value of every signed message. multiformats' base-x divides digit by digit (quadratic in
 * the length) and cost a signed envelope about a third of its signing time; here BigInt does the long division nine
 * digits at a time. The property test in test/Bytes.test.ts keeps both in agreement on arbitrary input.
 *
 * Floor: core (docs/architecture.md §3).
 */
const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const INDEX = new Int8Array(128).fill(-1)
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i
const CHUNK = 9 // 58^9 < 2^53, so a chunk is exact as a number
const CHUNK_BASE = 58n ** BigInt(CHUNK)
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))

// BigInt#toString(16) writes 0-9 and a-f only.
const nibble = (c: number): number => (c <= 57 ? c - 48 : c - 87)

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
  let n = 0n
  for (let i = zeros; i < s.length; i += CHUNK) {
    const end = Math.min(i + CHUNK, s.length)
    let chunk = 0
    for (let j = i; j < end; j++) {
      const c = s.charCodeAt(j)
      const d = c < 128 ? INDEX[c]! : -1
      if (d < 0) throw new Error(`invalid base58 character at ${j}`)
      chunk = chunk * 58 + d
    }
    n = n * 58n ** BigInt(end - i) + BigInt(chunk)
  }
  let hex = n === 0n ? "" : n.toString(16)
  if (hex.length % 2) hex = `0${hex}`
  const out = new Uint8Array(zeros + hex.length / 2)
  for (let i = 0, j = zeros; i < hex.length; i += 2, j++) out[j] = (nibble(hex.charCodeAt(i)) << 4) | nibble(hex.charCodeAt(i + 1))
  return out
}
