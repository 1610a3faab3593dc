/**
 * Money: USD travels as a decimal number in JSON and is an integer count of micro-dollars (1e-6 USD) inside.
 *
 * A decimal is read from its shortest round-trip string (ECMAScript `Number#toString`), never through float
 * arithmetic, so `0.1` is exactly 100 000 micros and `0.1 + 0.2` (0.30000000000000004) is refused as having more
 * than six decimals instead of being rounded into a payment.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"

/** An integer number of micro-dollars (a safe integer, ≥ 0). */
export type Micros = number & { readonly Micros: unique symbol }

/** Micro-dollars per dollar. */
export const MICROS_PER_USD = 1_000_000

/**
 * Largest amount: 999 999 999.999999 USD. Fifteen significant digits is what a double carries exactly, so every
 * amount we accept survives the trip through a JSON number and back.
 */
export const MAX_MICROS = 999_999_999_999_999 as Micros

/** A USD amount that is not a non-negative decimal with at most six decimals within range. */
export class InvalidAmount extends Schema.TaggedError<InvalidAmount>()("InvalidAmount", {
  code: Schema.Literal("INVALID_AMOUNT"),
  message: Schema.String
}) {}

const DECIMAL = /^(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

const invalid = (message: string) => new InvalidAmount({ code: "INVALID_AMOUNT", message })

/**
 * Reads a USD amount (a JSON number, or its decimal string) as micro-dollars, exactly: no rounding, at most six
 * decimals, not negative, not NaN or infinite, at most `MAX_MICROS` (below a billion USD).
 */
export const parseUsd = (input: number | string): Either.Either<Micros, InvalidAmount> => {
  let text: string
  if (typeof input === "number") {
    if (!Number.isFinite(input)) return Either.left(invalid(`amount ${String(input)} is not a finite number`))
    if (input < 0) return Either.left(invalid(`amount ${String(input)} is negative`))
    // Number#toString gives the shortest decimal that round-trips, i.e. the decimal the JSON text carried (and "0"
    // for -0).
    text = String(input)
  } else {
    text = input.trim()
  }
  const m = DECIMAL.exec(text)
  if (m === null) return Either.left(invalid(`amount ${JSON.stringify(text)} is not a non-negative decimal`))
  const exponent = m[3] === undefined ? 0 : Number(m[3])
  // Any exponent beyond this is out of range or has too many decimals; refusing it first bounds the expansion below.
  if (Math.abs(exponent) > 30) return Either.left(invalid(`amount ${text} is out of range`))
  // Shift the decimal point by the exponent on the digit string, so 1e-7 and 1.5e3 are read exactly too.
  let digits = m[1]! + (m[2] ?? "")
  let pointAt = m[1]!.length + exponent
  if (pointAt < 0) {
    digits = "0".repeat(-pointAt) + digits
    pointAt = 0
  }
  if (pointAt > digits.length) digits = digits + "0".repeat(pointAt - digits.length)
  // Empty when the point is first: Number("") is 0.
  const whole = digits.slice(0, pointAt).replace(/^0+(?=\d)/, "")
  const fraction = digits.slice(pointAt).replace(/0+$/, "")
  if (fraction.length > 6) return Either.left(invalid(`amount ${text} has more than six decimals`))
  if (whole.length > 9) return Either.left(invalid(`amount ${text} is above the largest amount, 999999999.999999`))
  const micros = Number(whole) * MICROS_PER_USD + Number(fraction.padEnd(6, "0"))
  return Either.right(micros as Micros)
}

/** True when the input is a valid USD amount. */
export const isUsd = (input: unknown): input is number =>
  typeof input === "number" && Either.isRight(parseUsd(input))

/** Micro-dollars as a decimal string with no trailing zeros (`"12.5"`, `"0.000001"`, `"3"`). */
export const formatUsdString = (micros: Micros): string => {
  const whole = Math.floor(micros / MICROS_PER_USD)
  const fraction = String(micros % MICROS_PER_USD).padStart(6, "0").replace(/0+$/, "")
  return fraction.length === 0 ? String(whole) : `${whole}.${fraction}`
}

/** Micro-dollars as the JSON number for that decimal (the nearest double, which `parseUsd` reads back exactly). */
export const formatUsd = (micros: Micros): number => Number(formatUsdString(micros))
