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

/** Epoch milliseconds of a UTC RFC 3339 timestamp (fraction truncated to the millisecond), or undefined. */
export const parseUtcTimestamp = (s: string): number | undefined => {
  const m = UTC_TIMESTAMP.exec(s)
  if (m === null) return undefined
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number]
  if (mo < 1 || mo > 12 || d < 1 || d > (mo === 2 && isLeap(y) ? 29 : DAYS[mo - 1]!) || h > 23 || mi > 59 || sec > 59) return undefined
  const ms = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, "0"))
  const t = Date.UTC(y, mo - 1, d, h, mi, sec, ms)
  // Date.UTC reads years 0–99 as 1900–1999.
  return y >= 100 ? t : new Date(t).setUTCFullYear(y)
}

/** True for a UTC RFC 3339 timestamp `parseUtcTimestamp` reads. */
export const isUtcTimestamp = (u: unknown): u is string => typeof u === "string" && parseUtcTimestamp(u) !== undefined
