/**
 * The SQL database behind the stores: an `SqlClient` with every migration applied and checked.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { SqliteClient } from "@effect/sql-sqlite-node"
import BetterSqlite3 from "better-sqlite3"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
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
 * Prepared statements on a connection of their own, for the statements on every request (resolve, allocate):
 * through `SqlClient` each costs 30 µs or more. Only single statements run here, each its own transaction, and no
 * `SqlClient` transaction in the hub spans a yield, so neither connection can hold a lock the other waits on while
 * it is itself waiting. Absent for `:memory:` databases, which a second connection cannot see.
 */
export class HotReads extends Context.Tag("agent-mesh/HotReads")<HotReads, {
  /** A prepared statement returning the first row (reads, or writes with RETURNING), or undefined. */
  readonly prepareGet: <Row>(sql: string) => (...params: ReadonlyArray<string | number | null>) => Row | undefined
}>() {}

const layerHotReads = (filename: string): Layer.Layer<HotReads, DatabaseError> =>
  Layer.scoped(
    HotReads,
    Effect.map(
      Effect.acquireRelease(
        Effect.try({
          try: () => new BetterSqlite3(filename, { fileMustExist: true }),
          catch: (e) => new DatabaseError({ code: "DATABASE_ERROR", message: `cannot open a read connection: ${String(e)}` })
        }),
        (db) => Effect.sync(() => db.close())
      ),
      (db) => ({
        prepareGet: <Row>(sql: string) => {
          const stmt = db.prepare<Array<string | number | null>, Row>(sql)
          return (...params: ReadonlyArray<string | number | null>) => stmt.get(...params)
        }
      })
    )
  )

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
  const migrated = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(client))
  // The read connection opens after the migrations, so the tables it prepares against exist.
  return filename === ":memory:"
    ? (migrated as Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient | HotReads, DatabaseError>)
    : Layer.provideMerge(layerHotReads(filename), migrated)
}
