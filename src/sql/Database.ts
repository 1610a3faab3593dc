/**
 * The SQL database behind the stores: an `SqlClient` with every migration applied and checked, on SQLite (one host)
 * or Postgres (several hubs and agent replicas on one database; docs/scaling.md). `layer` picks the engine from the
 * URL; the migrations of both dialects are listed in one place (`migrations/index.ts`).
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import BetterSqlite3 from "better-sqlite3"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { migrations } from "./migrations/index.js"

/** The table the migrator records applied migrations in. */
export const MIGRATIONS_TABLE = "mesh_migrations"

/** The database could not be opened or brought to the current schema. */
export class DatabaseError extends Schema.TaggedError<DatabaseError>()("DatabaseError", {
  code: Schema.Literal("DATABASE_ERROR"),
  message: Schema.String
}) {}

const expectedIds = Object.keys(migrations).map((k) => Number(k.slice(0, k.indexOf("_"))))

/** Applies pending migrations, then checks every expected migration is recorded (the v3 migrator can fail quietly). */
export const migrate: Effect.Effect<ReadonlyArray<readonly [number, string]>, DatabaseError, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The migrator creates its table after looking for it, so processes starting together on a new Postgres database
  // would race to create it: it is made here, idempotently, first (the migrator then locks it for the run).
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`CREATE TABLE IF NOT EXISTS ${sql(MIGRATIONS_TABLE)} (
        migration_id integer primary key, created_at timestamp with time zone not null default now(), name text not null
      )`.pipe(Effect.retry({ times: 3 }), Effect.asVoid),
    orElse: () => Effect.void
  })
  const ran = yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: MIGRATIONS_TABLE })
  const rows = yield* sql<{ migration_id: number }>`SELECT migration_id FROM ${sql(MIGRATIONS_TABLE)}`
  const applied = new Set(rows.map((r) => Number(r.migration_id)))
  const missing = expectedIds.filter((id) => !applied.has(id))
  if (missing.length > 0) {
    return yield* Effect.fail(new DatabaseError({ code: "DATABASE_ERROR", message: `migrations not applied: ${missing.join(", ")}` }))
  }
  if (ran.length > 0) yield* Effect.logDebug(`applied migrations: ${ran.map(([id, name]) => `${id}_${name}`).join(", ")}`)
  return ran
}).pipe(
  Effect.catchTags({
    MigrationError: (e: Migrator.MigrationError) => Effect.fail(new DatabaseError({ code: "DATABASE_ERROR", message: e.message })),
    SqlError: (e: SqlError) => Effect.fail(new DatabaseError({ code: "DATABASE_ERROR", message: e.message }))
  })
)

/**
 * Prepared statements on a connection of their own, for the statements on every request (resolve, allocate, record a
 * nonce): through `SqlClient` each costs 30 µs or more. Only single statements run here, each its own transaction.
 * A statement that finds the database locked fails at once (`SQLITE_BUSY`, classified `Busy`) rather than wait: in
 * this process only a `SqlClient` transaction that yielded can hold the lock, and it cannot finish while the event
 * loop waits here, so waiting would only stall every request for the busy timeout. A caller that can goes through
 * `SqlClient` instead, which queues behind that transaction. Absent for `:memory:` databases, which a second
 * connection cannot see.
 */
export class HotReads extends Context.Tag("agent-mesh/HotReads")<HotReads, {
  /** A prepared statement returning the first row (reads, or writes with RETURNING), or undefined. */
  readonly prepareGet: <Row>(sql: string) => (...params: ReadonlyArray<string | number | null>) => Row | undefined
  /** A prepared write returning how many rows it changed (not counting a trigger's). */
  readonly prepareRun: (sql: string) => (...params: ReadonlyArray<string | number | null>) => number
}>() {}

const layerHotReads = (filename: string): Layer.Layer<HotReads, DatabaseError> =>
  Layer.scoped(
    HotReads,
    Effect.map(
      Effect.acquireRelease(
        Effect.try({
          try: () => new BetterSqlite3(filename, { fileMustExist: true, timeout: 0 }),
          catch: (e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot open a read connection: ${String(e)}` })
        }),
        (db) => Effect.sync(() => db.close())
      ),
      (db) => ({
        prepareGet: <Row>(sql: string) => {
          const stmt = db.prepare<Array<string | number | null>, Row>(sql)
          // A write is stepped to its end: SQLite runs the WAL's automatic checkpoint only from a step that returns
          // SQLITE_DONE, and `get` stops at the first row, so writes with RETURNING read through `get` would grow the
          // WAL without bound (every later read then searches it).
          return stmt.readonly ? (...params: ReadonlyArray<string | number | null>) => stmt.get(...params) : (...params: ReadonlyArray<string | number | null>) => stmt.all(...params)[0]
        },
        prepareRun: (sql: string) => {
          const stmt = db.prepare<Array<string | number | null>>(sql)
          return (...params: ReadonlyArray<string | number | null>) => stmt.run(...params).changes
        }
      })
    )
  )

/**
 * A connection of its own to the migrated SQLite file `filename`, for a store whose writes run synchronously, each
 * transaction from its first statement to its commit in one call (so it never holds the write lock across a yield),
 * and which retries a write that meets another's lock after a pause. Its busy timeout is 0: such a write fails at once
 * (`SQLITE_BUSY`) when another connection (the `SqlClient`'s, in a transaction of its own, or another process's) holds
 * the lock, instead of waiting on the one thread that must let that lock go. Synchronous NORMAL, as the main one; it
 * checkpoints the log every 4 000 pages (16 MB) rather than SQLite's 1 000: such a store commits on every few requests,
 * and each checkpoint syncs the file to disk, which costs the requests waiting behind it far more than the copying.
 * Closed with the scope.
 */
export const sqliteConnection = (filename: string): Effect.Effect<BetterSqlite3.Database, DatabaseError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const db = new BetterSqlite3(filename, { fileMustExist: true, timeout: 0 })
        db.pragma("synchronous = NORMAL")
        db.pragma("wal_autocheckpoint = 4000")
        return db
      },
      catch: (e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot open a connection to ${filename}: ${String(e)}` })
    }),
    (db) => Effect.sync(() => db.close())
  )

/** Whether `filename` names a SQLite database that lives in its one connection only (`:memory:`, or `""`: a temporary one). */
export const isMemoryFile = (filename: string): boolean => filename === ":memory:" || filename === ""

/** A SQLite database (WAL) at `filename` (`:memory:` for tests), migrated. Creates the parent folder. */
export const layerSqlite = (filename: string): Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient | HotReads, DatabaseError> => {
  const client = Layer.unwrapEffect(
    Effect.try({
      try: () => {
        if (filename !== ":memory:") fs.mkdirSync(path.dirname(path.resolve(filename)), { recursive: true })
        return SqliteClient.layer({ filename })
      },
      catch: (e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot create database folder: ${String(e)}` })
    })
  ).pipe(Layer.catchAll((e) => Layer.fail(e instanceof DatabaseError ? e : new DatabaseError({ code: "DATABASE_ERROR", message: String(e) }))))
  // WAL with synchronous NORMAL: a commit is a write to the log, not an fsync (about 1.5 ms each on a virtual disk, 30×
  // the write). A process that dies loses nothing; only a power cut or an OS crash can roll back the last commits, and
  // the database stays consistent. Deployments that must survive those run on Postgres (docs/scaling.md).
  const synchronous = Layer.effectDiscard(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("PRAGMA synchronous = NORMAL")).pipe(
    Effect.mapError((e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot set synchronous: ${e.message}` }))
  ))
  const migrated = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(Layer.provideMerge(synchronous, client)))
  // The read connection opens after the migrations, so the tables it prepares against exist.
  return filename === ":memory:"
    ? (migrated as Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient | HotReads, DatabaseError>)
    : Layer.provideMerge(layerHotReads(filename), migrated)
}

/** True for a database URL naming a Postgres server (`postgres://…`, `postgresql://…`); anything else is a SQLite file. */
export const isPostgresUrl = (url: string): boolean => /^postgres(ql)?:\/\//i.test(url)

/** The engine a database URL selects. */
export const engineOf = (url: string): "postgres" | "sqlite" => (isPostgresUrl(url) ? "postgres" : "sqlite")

/** The URL without its password, for logs and start-up lines. */
export const describe = (url: string): string => {
  if (!isPostgresUrl(url)) return url
  try {
    const u = new URL(url)
    if (u.password !== "") u.password = "***"
    return u.toString()
  } catch {
    return "postgres://…"
  }
}

// node-postgres hands BIGINT (and NUMERIC) back as strings, since they can pass 2^53. Ours are milliseconds and
// micro-dollars, far below it, and the stores read numbers: parse them as numbers, as SQLite's driver does. A value
// past 2^53 stays the exact string: the saga engine's 64-bit snowflake ids (@effect/cluster) must not be rounded.
const pgNumber = (text: string): number | string => {
  const n = Number(text)
  return Number.isSafeInteger(n) || !Number.isInteger(n) ? n : text
}
const PG_NUMERIC_OIDS: ReadonlySet<number> = new Set([20, 21, 23, 26, 700, 701, 1700])
const pgTypes = {
  getTypeParser: (oid: number, format?: string) => {
    if (format === "binary") return (value: unknown) => value
    if (PG_NUMERIC_OIDS.has(oid)) return pgNumber
    if (oid === 16) return (text: string) => text === "t"
    if (oid === 114 || oid === 3802) return (text: string) => JSON.parse(text) as unknown
    return (text: string) => text
  }
} as unknown as PgClient.PgClientConfig["types"]

/** Postgres settings beyond the URL. */
export interface PostgresOptions {
  /** Connections this process keeps open at most; default 10. */
  readonly maxConnections?: number
  /** How long to wait for a connection before the request fails (and is answered 503); default 5 s. */
  readonly connectTimeoutMs?: number
  /** Connections of the prepared-statement pool (`PgHotStatements`); default 8. */
  readonly hotConnections?: number
}

/** The slice of node-postgres's pool `PgHotStatements` uses (the driver ships no types here). */
interface RawPgPool {
  readonly query: (config: { readonly name: string; readonly text: string; readonly values: ReadonlyArray<unknown> }) => Promise<{ readonly rows: ReadonlyArray<unknown> }>
  readonly end: () => Promise<void>
  readonly on: (event: "error", f: (e: unknown) => void) => void
}

/**
 * Named prepared statements on a small pool of its own, through the `pg` driver directly: for the statements on
 * every request (resolve, authenticate, allocate), which through `SqlClient` cost several times the round trip.
 * Each is one autocommit statement, so it sees and is seen by everything `SqlClient` commits. Postgres only; the
 * SQLite counterpart is `HotReads`.
 */
export class PgHotStatements extends Context.Tag("agent-mesh/PgHotStatements")<PgHotStatements, {
  /** Runs the statement `name` (prepared once per connection) and returns its rows; failures as the driver's errors. */
  readonly query: (name: string, text: string, values: ReadonlyArray<string | number | null>) => Effect.Effect<ReadonlyArray<unknown>, unknown>
}>() {}

const layerPgHotStatements = (url: string, options: PostgresOptions): Layer.Layer<PgHotStatements, DatabaseError> =>
  Layer.scoped(
    PgHotStatements,
    Effect.map(
      Effect.acquireRelease(
        Effect.try({
          try: () => {
            const pg = createRequire(import.meta.url)("pg") as { readonly Pool: new (config: Record<string, unknown>) => RawPgPool }
            const pool = new pg.Pool({
              connectionString: url,
              max: options.hotConnections ?? 8,
              connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
              application_name: "agent-mesh",
              types: pgTypes
            })
            // A broken idle connection is dropped by the pool; the next query reports what is wrong.
            pool.on("error", () => {})
            return pool
          },
          catch: (e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot open a Postgres pool: ${String(e)}` })
        }),
        (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(Duration.seconds(1)))
      ),
      (pool) => ({
        query: (name: string, text: string, values: ReadonlyArray<string | number | null>) =>
          Effect.tryPromise({ try: () => pool.query({ name, text, values }).then((r) => r.rows), catch: (e) => e })
      })
    )
  )

/**
 * A Postgres database at `url`, migrated. Every process on the database runs the migrations on start; the migrator
 * locks its table, so concurrent starts apply each migration once.
 */
export const layerPostgres = (
  url: string,
  options: PostgresOptions = {}
): Layer.Layer<SqlClient.SqlClient | PgClient.PgClient | PgHotStatements, DatabaseError> => {
  // Loaded only for a Postgres URL, so a hub or an agent on SQLite starts without the Postgres driver.
  const client = Layer.unwrapEffect(
    Effect.map(Effect.promise(() => import("@effect/sql-pg")), ({ PgClient }) =>
      PgClient.layer({
        url: Redacted.make(url),
        maxConnections: options.maxConnections ?? 10,
        connectTimeout: Duration.millis(options.connectTimeoutMs ?? 5_000),
        applicationName: "agent-mesh",
        types: pgTypes
      })
    )
  ).pipe(Layer.mapError((e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot connect to ${describe(url)}: ${e.message}` })))
  // The prepared-statement pool opens after the migrations, so the tables its statements name exist.
  return Layer.provideMerge(layerPgHotStatements(url, options), Layer.effectDiscard(migrate).pipe(Layer.provideMerge(client)))
}

/**
 * The database a URL names: `postgres://…` (or `postgresql://…`) is a Postgres server, anything else a SQLite file
 * (`:memory:` for tests). Every store runs on either; `docs/scaling.md` says when to choose which.
 */
export const layer = (url: string, options: PostgresOptions = {}): Layer.Layer<SqlClient.SqlClient, DatabaseError> =>
  isPostgresUrl(url) ? layerPostgres(url, options) : layerSqlite(url)
