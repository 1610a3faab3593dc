/**
 * Postgres for tests: finds the server (MESH_TEST_POSTGRES_URL, else 127.0.0.1:5432 as `postgres`, then `root`),
 * and gives each test file a fresh database that is dropped afterwards. Without a server the Postgres suites are
 * reported as not run, with the reason; with MESH_REQUIRE_POSTGRES=1 (CI) a missing server fails them instead.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import type * as SqlClient from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"

/** Where a Postgres server answered, or why none did. */
export type Probe = { readonly ok: true; readonly adminUrl: string } | { readonly ok: false; readonly reason: string }

const candidates = (): ReadonlyArray<string> =>
  process.env.MESH_TEST_POSTGRES_URL !== undefined
    ? [process.env.MESH_TEST_POSTGRES_URL]
    : ["postgres://postgres@127.0.0.1:5432/postgres", "postgres://root@127.0.0.1:5432/postgres", "postgres://root@127.0.0.1:5432/root"]

/** Runs `f` on a short-lived client of `url`. */
export const withClient = <A>(url: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>): Promise<A> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(
        PgClient.make({ url: Redacted.make(url), connectTimeout: Duration.seconds(3), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer)),
        f
      )
    )
  )

let probed: Promise<Probe> | undefined

/** The first candidate URL that answers `SELECT 1`, once per test file. */
export const probe = (): Promise<Probe> =>
  (probed ??= (async () => {
    const reasons: Array<string> = []
    for (const url of candidates()) {
      try {
        await withClient(url, (sql) => sql`SELECT 1`)
        return { ok: true, adminUrl: url } as const
      } catch (e) {
        reasons.push(`${url.replace(/:[^:@/]*@/, ":***@")}: ${e instanceof Error ? e.message : String(e)}`)
      }
    }
    return { ok: false, reason: reasons.join("; ") } as const
  })())

/** The URL of database `name` on the server of `adminUrl`. */
export const databaseUrl = (adminUrl: string, name: string): string => {
  const u = new URL(adminUrl)
  u.pathname = `/${name}`
  return u.toString()
}

/** Creates `mesh_test_<random>`; returns its URL and how to drop it. */
export const freshDatabase = async (adminUrl: string): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const name = `mesh_test_${crypto.randomBytes(6).toString("hex")}`
  await withClient(adminUrl, (sql) => sql.unsafe(`CREATE DATABASE ${name}`))
  return {
    url: databaseUrl(adminUrl, name),
    drop: () => withClient(adminUrl, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined)
  }
}

/**
 * A describe block that needs Postgres: its tests get `url()`, a database of their own for the whole file. Without
 * a server its tests are skipped under a title saying so (and why), unless MESH_REQUIRE_POSTGRES=1 makes that fail.
 */
export const describePostgres = (name: string, body: (url: () => string) => void): void => {
  const required = process.env.MESH_REQUIRE_POSTGRES === "1"
  let state: Probe | undefined
  let db: { readonly url: string; readonly drop: () => Promise<void> } | undefined
  // Probed at collection time (top-level await in an ESM test module), so skipping is decided before tests run.
  const found = globalProbe
  if (found !== undefined && !found.ok && !required) {
    describe(`${name} — NOT RUN: no Postgres server (${found.reason})`, () => {
      it.skip("needs Postgres at 127.0.0.1:5432 or MESH_TEST_POSTGRES_URL", () => {})
    })
    console.warn(`Postgres tests not run: "${name}": no Postgres server answered (${found.reason})`)
    return
  }
  describe(name, () => {
    beforeAll(async () => {
      state = await probe()
      if (!state.ok) throw new Error(`MESH_REQUIRE_POSTGRES=1 but no Postgres server answered: ${state.reason}`)
      db = await freshDatabase(state.adminUrl)
    }, 30_000)
    afterAll(async () => {
      await db?.drop()
    }, 30_000)
    body(() => {
      if (db === undefined) throw new Error("no Postgres database")
      return db.url
    })
  })
}

let globalProbe: Probe | undefined

/** Probes once before the describe blocks are declared; call with top-level await at the start of a test file. */
export const probeNow = async (): Promise<Probe> => {
  globalProbe = await probe()
  return globalProbe
}

/** A database of its own for one test (created now, dropped when the scope closes); needs a server (`probe`). */
export const scopedDatabase = Effect.acquireRelease(
  Effect.promise(async () => {
    const found = await probe()
    if (!found.ok) throw new Error(`no Postgres server: ${found.reason}`)
    return freshDatabase(found.adminUrl)
  }),
  (db) => Effect.promise(() => db.drop())
)
