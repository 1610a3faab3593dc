/**
 * RFC 3339 timestamps in UTC, as they arrive from other implementations: `T` or `t`, `Z`, `z`, `+00:00` or `-00:00`
 * (Python's `isoformat()` writes `+00:00`), and a fraction of any length. Any other offset is refused rather than
 * converted: the protocol's times are UTC, and a signer that wrote `+02:00` did not follow it. Calendar fields are
 * checked (no 30 February, no hour 24); a leap second (`:60`) is refused, since no clock here can represent it.
 *
 * `Date.parse` is not the check: it accepts forms RFC 3339 does not (`2026-02-30` rolls over into March).
 *
 * Floor: core (docs/architecture.md §3).
 */

/** The syntax of a UTC RFC 3339 date-time; `parseUtcTimestamp` also checks the calendar. */
export const UTC_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,32}))?(?:[Zz]|[+-]00:00)$/

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
const isLeap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0

// Digit value of the character at `i`, or -1.
const digit = (s: string, i: number): number => {
  const d = s.charCodeAt(i) - 48
  return d >= 0 && d <= 9 ? d : -1
}
const two = (s: string, i: number): number => {
  const a = digit(s, i)
  const b = digit(s, i + 1)
  return a < 0 || b < 0 ? -1 : a * 10 + b
}

/**
 * The form every timestamp written here takes (`toISOString`: `2026-01-01T00:00:00.000Z`, years 1000 to 9999), read
 * by character codes rather than the regular expression: validation reads two on every envelope. Undefined when `s`
 * is not exactly that form (the general path then decides); a property test keeps the two equal.
 */
const parseIsoForm = (s: string): number | undefined => {
  if (s.length !== 24 || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45 || s.charCodeAt(10) !== 84 || s.charCodeAt(13) !== 58 ||
    s.charCodeAt(16) !== 58 || s.charCodeAt(19) !== 46 || s.charCodeAt(23) !== 90) return undefined
  const y1 = two(s, 0)
  const y2 = two(s, 2)
  const mo = two(s, 5)
  const d = two(s, 8)
  const h = two(s, 11)
  const mi = two(s, 14)
  const sec = two(s, 17)
  const ms1 = digit(s, 20)
  const ms2 = two(s, 21)
  if (y1 < 10 || y2 < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0 || ms1 < 0 || ms2 < 0) return undefined
  const y = y1 * 100 + y2
  if (mo < 1 || mo > 12 || d < 1 || d > (mo === 2 && isLeap(y) ? 29 : DAYS[mo - 1]!) || h > 23 || mi > 59 || sec > 59) return undefined
  return Date.UTC(y, mo - 1, d, h, mi, sec, ms1 * 100 + ms2)
}

/** Epoch milliseconds of a UTC RFC 3339 timestamp (fraction truncated to the millisecond), or undefined. */
export const parseUtcTimestamp = (s: string): number | undefined => parseIsoForm(s) ?? parseByPattern(s)

/** `parseUtcTimestamp` by the regular expression alone: the general path, exported for the property test. */
export const parseByPattern = (s: string): number | undefined => {
  const m = UTC_TIMESTAMP.exec(s)
  if (m === null) return undefined
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number]
  if (mo < 1 || mo > 12 || d < 1 || d > (mo === 2 && isLeap(y) ? 29 : DAYS[mo - 1]!) || h > 23 || mi > 59 || sec > 59) return undefined
  const ms = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, "0"))
  const t = Date.UTC(y, mo - 1, d, h, mi, sec, ms)
  // Date.UTC reads years 0–99 as 1900–1999.
  return y >= 100 ? t : new Date(t).setUTCFullYear(y)
}

const pad2 = (n: number): string => (n < 10 ? `0${n}` : `${n}`)

/**
 * `new Date(ms).toISOString()` for the instants of years 1000 to 9999, written from the epoch day by Hinnant's
 * civil-from-days rather than through a `Date` (each envelope writes two); other instants go through `Date`.
 */
export const formatUtcTimestamp = (ms: number): string => {
  if (!(ms >= MIN_FAST_MS && ms <= MAX_FAST_MS) || !Number.isInteger(ms)) return new Date(ms).toISOString()
  const days = Math.floor(ms / 86_400_000)
  let rest = ms - days * 86_400_000
  const z = days + 719_468
  const era = Math.floor(z / 146_097)
  const doe = z - era * 146_097
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365)
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100))
  const mp = Math.floor((5 * doy + 2) / 153)
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1
  const m = mp < 10 ? mp + 3 : mp - 9
  const y = yoe + era * 400 + (m <= 2 ? 1 : 0)
  const h = Math.floor(rest / 3_600_000)
  rest -= h * 3_600_000
  const mi = Math.floor(rest / 60_000)
  rest -= mi * 60_000
  const sec = Math.floor(rest / 1000)
  const milli = rest - sec * 1000
  return `${y}-${pad2(m)}-${pad2(d)}T${pad2(h)}:${pad2(mi)}:${pad2(sec)}.${milli < 10 ? "00" : milli < 100 ? "0" : ""}${milli}Z`
}
// 1000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: four-digit years without leading zeros.
const MIN_FAST_MS = -30_610_224_000_000
const MAX_FAST_MS = 253_402_300_799_999

/** True for a UTC RFC 3339 timestamp `parseUtcTimestamp` reads. */
export const isUtcTimestamp = (u: unknown): u is string => typeof u === "string" && parseUtcTimestamp(u) !== undefined
