/**
 * Public-key encodings every entry point must refuse, written out here rather than taken from src/internal/ed25519.ts
 * so that a wrong list there cannot make the tests agree with it.
 */

/** The eight points of small order, plus the sign-bit variants of the two with x = 0. */
export const SMALL_ORDER_HEX: ReadonlyArray<string> = [
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
]

/**
 * Every y ≥ p = 2^255 − 19 (low byte 0xed..0xff, then 0xff…, top byte 0x7f), with the sign bit clear and set:
 * non-canonical spellings, among them y = p + 1 (the identity again) and y = p (the order-4 point with y = 0).
 */
export const NON_CANONICAL_HEX: ReadonlyArray<string> = Array.from({ length: 19 }, (_, i) => 0xed + i).flatMap((low) =>
  ["7f", "ff"].map((top) => `${low.toString(16)}${"ff".repeat(30)}${top}`)
)
