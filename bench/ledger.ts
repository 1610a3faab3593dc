/**
 * Ledger allocations per second: the hub's allocation statement (`reserveFast`: one INSERT whose triggers take the
 * amount from the pool or abort, on the prepared-statement connection), and the same statement through @effect/sql
 * (the `:memory:` path), beside a raw better-sqlite3 `BEGIN IMMEDIATE` transaction doing the insert and the
 * conditional update, all on WAL files. Mandate verification, which `allocate` does before the
 * transaction, is measured by the mandate suite.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Db from "../src/sql/Database.js"
import { reserve, reserveFast } from "../src/hub/Ledger.js"
import { measureInterleaved, report, type Measurement } from "./harness.js"

const BATCH = 64

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-ledger-"))
  const BIG = 1e15

  // Baseline: raw better-sqlite3, prepared statements, BEGIN IMMEDIATE.
  const raw = new Database(path.join(dir, "raw.db"))
  raw.pragma("journal_mode = WAL")
  raw.exec(`CREATE TABLE pools (id TEXT PRIMARY KEY, limit_micros INTEGER, allocated_micros INTEGER);
    CREATE TABLE allocations (id TEXT PRIMARY KEY, pool_id TEXT, idempotency_key TEXT, amount_micros INTEGER, UNIQUE (pool_id, idempotency_key));
    INSERT INTO pools VALUES ('p', ${BIG}, 0);`)
  const ins = raw.prepare("INSERT INTO allocations VALUES (?, 'p', ?, 1) ON CONFLICT (pool_id, idempotency_key) DO NOTHING RETURNING id")
  const upd = raw.prepare("UPDATE pools SET allocated_micros = allocated_micros + 1 WHERE id = 'p' AND allocated_micros + 1 <= limit_micros RETURNING id")
  let n = 0
  const tx = raw.transaction(() => {
    const k = `r${n++}`
    if (ins.get(k, k) === undefined) return
    if (upd.get() === undefined) throw new Error("exhausted")
  })

  // Ours: the same transaction through SqlClient on the migrated schema.
  const rt = ManagedRuntime.make(Db.layerSqlite(path.join(dir, "mesh.db")) as Layer.Layer<SqlClient.SqlClient | Db.HotReads, Db.DatabaseError>)
  const sql = await rt.runPromise(SqlClient.SqlClient)
  const fast = reserveFast(await rt.runPromise(Db.HotReads))
  await rt.runPromise(sql`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, opened_by, created_at)
    VALUES ('p', 't', 'did:mesh:a', 'did:mesh:b', ${BIG}, 0, 0, 'k', 0)`)
  let m = 0
  const one = Effect.suspend(() => {
    const k = `m${m++}`
    return reserve(sql, { id: k, pool_id: "p", idempotency_key: k, child_jti: k, grantee: "did:mesh:c", amount_micros: 1, used_micros: null, created_at: 0, released_at: null })
  })
  const batch = Effect.forEach(Array.from({ length: BATCH }), () => one, { discard: true })
  let f = 0
  const oneFast = Effect.suspend(() => {
    const k = `f${f++}`
    return fast({ id: k, pool_id: "p", idempotency_key: k, child_jti: k, grantee: "did:mesh:c", amount_micros: 1, used_micros: null, created_at: 0, released_at: null })
  })
  const fastBatch = Effect.forEach(Array.from({ length: BATCH }), () => oneFast, { discard: true })
  // The SQLite client is synchronous underneath, so a batch runs to completion in runSync.
  const [rawM, oursM, sqlM] = measureInterleaved([
    { name: "raw better-sqlite3 BEGIN IMMEDIATE (insert + update)", op: () => tx.immediate() },
    { name: "Ledger allocation (reserveFast: the hub's path)", op: () => rt.runSync(fastBatch), perCall: BATCH },
    { name: "Ledger.reserve via @effect/sql (:memory: path)", op: () => rt.runSync(batch), perCall: BATCH }
  ]) as [Measurement, Measurement, Measurement]
  await rt.dispose()
  raw.close()
  fs.rmSync(dir, { recursive: true, force: true })

  report("ledger", [
    { figure: oursM, baseline: rawM, target: 0.5 },
    { figure: sqlM, baseline: rawM }
  ])
}
