/**
 * The one error a store fails with: `PersistenceError`, whose `reason` says what the database refused or why it
 * could not answer. Classifying a driver error is dialect knowledge, so it happens here and only here (for SQLite,
 * by better-sqlite3's extended result code, never by matching message text): a service above the store decides
 * what a unique violation means to it (a DID taken, a child already allocated) without knowing the dialect, and a
 * NOT NULL failure can never pass for a unique one. Postgres errors are classified by SQLSTATE, the constraint by
 * the name the server reports; a connection that cannot be made or was lost is `Unavailable` either way.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { ParseError } from "effect/ParseResult"

/**
 * What went wrong, as a service can act on it. The constraint reasons are the caller's data meeting the schema;
 * `TriggerAbort` is a `RAISE(ABORT, '…')` of a trigger (its text in `constraint`); `Busy` is a lock held by another
 * connection (retrying may succeed); `Unavailable` is everything else (I/O, a closed or corrupt database, a row the
 * store cannot read).
 */
export type PersistenceReason =
  | "UniqueViolation"
  | "NotNullViolation"
  | "CheckViolation"
  | "ForeignKeyViolation"
  | "TriggerAbort"
  | "Busy"
  | "Unavailable"

/** A store failed; `reason` is classified once per dialect (`classify`), `cause` keeps the driver's error. */
export class PersistenceError extends Data.TaggedError("PersistenceError")<{
  readonly reason: PersistenceReason
  /** The column(s), constraint name or trigger text the database named, when it named one. */
  readonly constraint: string | undefined
  readonly message: string
  readonly cause: unknown
}> {}

// Extended result codes of SQLite as better-sqlite3 spells them (https://sqlite.org/rescode.html).
const sqliteReasons: Readonly<Record<string, PersistenceReason>> = {
  SQLITE_CONSTRAINT_UNIQUE: "UniqueViolation",
  SQLITE_CONSTRAINT_PRIMARYKEY: "UniqueViolation",
  SQLITE_CONSTRAINT_ROWID: "UniqueViolation",
  SQLITE_CONSTRAINT_NOTNULL: "NotNullViolation",
  SQLITE_CONSTRAINT_CHECK: "CheckViolation",
  SQLITE_CONSTRAINT_FOREIGNKEY: "ForeignKeyViolation",
  SQLITE_CONSTRAINT_TRIGGER: "TriggerAbort",
  SQLITE_BUSY: "Busy",
  SQLITE_BUSY_RECOVERY: "Busy",
  SQLITE_BUSY_SNAPSHOT: "Busy",
  SQLITE_BUSY_TIMEOUT: "Busy",
  SQLITE_LOCKED: "Busy",
  SQLITE_LOCKED_SHAREDCACHE: "Busy"
}

// SQLSTATEs of Postgres (https://www.postgresql.org/docs/current/errcodes-appendix.html).
const postgresReasons: Readonly<Record<string, PersistenceReason>> = {
  "23505": "UniqueViolation",
  "23502": "NotNullViolation",
  "23514": "CheckViolation",
  "23503": "ForeignKeyViolation",
  "P0001": "TriggerAbort",
  "40001": "Busy",
  "40P01": "Busy",
  "55P03": "Busy"
}

/** What SQLite names after "… constraint failed: " (columns, or a CHECK's name); a trigger's whole RAISE text. */
const constraintOf = (reason: PersistenceReason, message: string): string | undefined => {
  if (reason === "TriggerAbort") return message
  const at = message.indexOf("constraint failed: ")
  return at < 0 ? undefined : message.slice(at + "constraint failed: ".length)
}

const fieldOf = (e: unknown, name: "_tag" | "code" | "message" | "constraint"): string | undefined => {
  const v = typeof e === "object" && e !== null ? (e as Record<string, unknown>)[name] : undefined
  return typeof v === "string" ? v : undefined
}

/**
 * Classifies a failure of the driver: an `SqlError` (its `cause` is better-sqlite3's `SqliteError` or node-postgres's
 * `DatabaseError`), the
 * `SqliteError` itself (prepared statements on `HotReads`), or a row that did not decode (`ParseError`).
 */
export const classify = (error: unknown): PersistenceError => {
  if (error instanceof PersistenceError) return error
  const driver = fieldOf(error, "_tag") === "SqlError" ? (error as SqlError).cause : error
  const code = fieldOf(driver, "code")
  const message = fieldOf(driver, "message") ?? fieldOf(error, "message") ?? String(error)
  const reason = (code !== undefined ? (sqliteReasons[code] ?? postgresReasons[code]) : undefined) ?? "Unavailable"
  // Postgres names the constraint in a field of its own (and a RAISE's text is the message).
  const named = fieldOf(driver, "constraint")
  const constraint = code !== undefined && code in postgresReasons ? (reason === "TriggerAbort" ? message : named) : constraintOf(reason, message)
  return new PersistenceError({ reason, constraint, message, cause: driver })
}

/** The failure classified and told as `Reason: driver message`, for a service error that carries text only. */
export const summarize = (error: unknown): string => {
  const e = classify(error)
  return `${e.reason}: ${e.message}`
}

/** The effect with its driver failures classified (`SqlError`, `ParseError` → `PersistenceError`). */
export const refail = <A, R>(effect: Effect.Effect<A, SqlError | ParseError | PersistenceError, R>): Effect.Effect<A, PersistenceError, R> =>
  Effect.mapError(effect, classify)

/** True for a failure the database reports with this reason. */
export const isReason = (reason: PersistenceReason) => (e: PersistenceError): boolean => e.reason === reason

/** True for a trigger's `RAISE(ABORT, text)` with exactly this text. */
export const isTriggerAbort = (text: string) => (e: PersistenceError): boolean => e.reason === "TriggerAbort" && e.constraint === text
