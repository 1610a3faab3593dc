/**
 * Postgres (docs/scaling.md), against the local server (MESH_BENCH_POSTGRES_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres; each part on a fresh database, dropped afterwards):
 *
 * - `pg-ledger`: the ledger's allocation statement (the conditional UPDATE of the pool feeding the INSERT, one CTE)
 *   as the hub runs it (`reservePg`: prepared on `Database.PgHotStatements`) and through @effect/sql-pg
 *   (`Ledger.reserve`), beside the same statement text through the raw `pg` driver; 8 in flight each, interleaved
 *   rounds of 400. Target ≥ 0.7× for the hub's path.
 * - `pg-scaling`: allocations/s through whole `mesh hub` processes (dist/bin/mesh.js; `npm run build` first) with 1,
 *   2 and 3 hubs on one database: 1 500 signed child mandates allocated from one pool, 24 in flight spread over the
 *   hubs; with the CPU seconds per second the Postgres processes and the hubs used (from /proc).
 * - `pg-http`: `GET /v1/agents/:didHash` of the hub on Postgres (10k entries) beside raw node:http + the `pg` driver
 *   doing the same lookup, each server in its own process (bench/load.ts). Target ≥ 0.5×.
 *
 * Run: `node --import ./bench/loader.mjs bench/postgres.ts` (or `npm run bench -- postgres`).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { spawn, type ChildProcess } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as Http from "node:http"
import type * as net from "node:net"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Scope from "effect/Scope"
import { didHash, type Did, generateDid, type MeshIdentity } from "../src/core/Did.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import { toBase64 } from "../src/core/internal/bytes.js"
import { attenuateToCart, issueIntentMandate } from "../src/core/Mandate.js"
import * as Hub from "../src/hub/Hub.js"
import { reserve, reservePg } from "../src/hub/Ledger.js"
import * as Db from "../src/sql/Database.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { median, report, type Measurement } from "./harness.js"
import { DEFAULT_ROUNDS, measureAll, reportLatency, serveChild, spawnServer, type BenchServer } from "./load.js"

/** The slice of node-postgres this file uses (the package ships no types of its own here). */
export interface PgPool {
  query: <R>(text: string, values?: ReadonlyArray<unknown>) => Promise<{ rows: Array<R> }>
  end: () => Promise<void>
  on: (event: "error", listener: (e: unknown) => void) => unknown
}
const pg = createRequire(import.meta.url)("pg") as { Pool: new (options: { connectionString: string; max?: number }) => PgPool }

const ADMIN_URL = process.env["MESH_BENCH_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

const databaseUrl = (name: string) => {
  const u = new URL(ADMIN_URL)
  u.pathname = `/${name}`
  return u.toString()
}

/** A raw pool whose idle connections may be ended under it (a database dropped WITH (FORCE)) without crashing the run. */
export const quietPool = (config: { connectionString: string; max?: number }): PgPool => {
  const pool = new pg.Pool(config)
  pool.on("error", () => {})
  return pool
}

/** A fresh database for `f`, dropped afterwards. */
export const withDatabase = async <A>(f: (url: string) => Promise<A>): Promise<A> => {
  const name = `mesh_bench_${crypto.randomBytes(5).toString("hex")}`
  const admin = quietPool({ connectionString: ADMIN_URL, max: 1 })
  await admin.query(`CREATE DATABASE ${name}`)
  try {
    return await f(databaseUrl(name))
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  }
}

/** Runs `op` `count` times with `concurrency` in flight; ops/s. */
const timed = async (count: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<number> => {
  let next = 0
  const t0 = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) await op(next++)
  }))
  return (count * 1000) / (performance.now() - t0)
}

// ---------------------------------------------------------------------------------------------------------------
// pg-ledger

const RESERVE_RAW = `WITH taken AS (
    UPDATE mesh_pools SET allocated_micros = allocated_micros + $1
    WHERE id = $2 AND allocated_micros + $3 <= limit_micros RETURNING id
  )
  INSERT INTO mesh_allocations (id, pool_id, idempotency_key, child_jti, grantee, amount_micros, used_micros, created_at, released_at)
  SELECT $4, taken.id, $5, $6, $7, CAST($8 AS BIGINT), NULL, CAST($9 AS BIGINT), NULL FROM taken
  RETURNING id`

const ledger = async (): Promise<void> =>
  withDatabase(async (url) => {
    const rt = ManagedRuntime.make(Db.layerPostgres(url, { maxConnections: 8 }))
    const sql = await rt.runPromise(SqlClient.SqlClient)
    const prepared = reservePg(await rt.runPromise(Db.PgHotStatements))
    const raw = quietPool({ connectionString: url, max: 8 })
    const BIG = 1e15
    for (const id of ["ours", "prepared", "raw"]) {
      await raw.query(`INSERT INTO mesh_pools (id, token, grantor, grantee, limit_micros, allocated_micros, expires_at, opened_by, created_at)
        VALUES ($1, 't', 'did:mesh:a', 'did:mesh:b', $2, 0, 0, 'k', 0)`, [id, BIG])
    }
    let n = 0
    const ours = (i: number) => {
      const k = `o${n}-${i}`
      return rt.runPromise(reserve(sql, { id: k, pool_id: "ours", idempotency_key: k, child_jti: k, grantee: "did:mesh:c", amount_micros: 1, used_micros: null, created_at: 0, released_at: null }))
    }
    const hubPath = (i: number) => {
      const k = `p${n}-${i}`
      return rt.runPromise(prepared({ id: k, pool_id: "prepared", idempotency_key: k, child_jti: k, grantee: "did:mesh:c", amount_micros: 1, used_micros: null, created_at: 0, released_at: null }))
    }
    const direct = (i: number) => {
      const k = `r${n}-${i}`
      return raw.query(RESERVE_RAW, [1, "raw", 1, k, k, k, "did:mesh:c", 1, 0])
    }
    const rates: [Array<number>, Array<number>, Array<number>] = [[], [], []]
    for (let round = 0; round < 9; round++) {
      n = round
      const r = await timed(400, 8, direct)
      const p = await timed(400, 8, hubPath)
      const o = await timed(400, 8, ours)
      if (round >= 2) {
        rates[0].push(r)
        rates[1].push(o)
        rates[2].push(p)
      }
    }
    await rt.dispose()
    await raw.end()
    const baseline = { name: "same CTE via raw pg driver", opsPerSecond: median(rates[0]) }
    report("pg-ledger", [
      { figure: { name: "Ledger allocation (reservePg: the hub's path)", opsPerSecond: median(rates[2]) }, baseline, target: 0.7 },
      { figure: { name: "Ledger.reserve via @effect/sql-pg", opsPerSecond: median(rates[1]) }, baseline }
    ])
  })

// ---------------------------------------------------------------------------------------------------------------
// pg-scaling

/** CPU seconds used so far by processes named `postgres`, and by the given pids (from /proc, Linux only). */
const cpuSeconds = (pids: ReadonlyArray<number>): { readonly db: number; readonly hubs: number } => {
  const tick = 100
  let db = 0
  let hubs = 0
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      const used = (Number(fields[11]) + Number(fields[12])) / tick
      if (comm === "postgres") db += used
      if (pids.includes(Number(entry))) hubs += used
    } catch {
      // gone meanwhile
    }
  }
  return { db, hubs }
}

const bin = path.resolve("dist/bin/mesh.js")

const spawnHub = (db: string): Promise<{ proc: ChildProcess; url: string; adminKey: string | undefined }> =>
  new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [bin, "hub", "--db", db, "--port", "0", "--log-level", "error"], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString()
      if (/\n {2}database [^\n]*\n/.test(out)) {
        resolve({ proc, url: /listening on (http:\/\/\S+)/.exec(out)![1]!, adminKey: /admin credential[^\n]*\n(mk_\S+)/.exec(out)?.[1] })
      }
    })
    proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
    proc.once("exit", (code) => reject(new Error(`hub exited with ${code}: ${out}`)))
  })

/** Requests shed with 503 OVERLOADED (they never ran) and asked again, over the whole run. */
let shed = 0

const json = async (url: string, method: string, body: unknown, apiKey?: string): Promise<Record<string, unknown>> => {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url, {
      method,
      headers: { "content-type": "application/json", ...(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }) },
      body: JSON.stringify(body)
    })
    const parsed = (await res.json()) as Record<string, unknown>
    // A hub sheds load on event-loop lag; what it shed never ran, so it is asked again shortly.
    if (res.status === 503 && parsed["code"] === "OVERLOADED" && attempt < 50) {
      shed++
      await new Promise((resolve) => setTimeout(resolve, 20))
      continue
    }
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(parsed)}`)
    return parsed
  }
}

const ALLOCATIONS = 1_500

const scalingRun = (hubCount: number): Promise<{ perSecond: number; dbShare: number; hubShare: number; shed: number }> =>
  withDatabase(async (url) => {
    shed = 0
    const hubs: Array<{ proc: ChildProcess; url: string; adminKey: string | undefined }> = []
    try {
      for (let i = 0; i < hubCount; i++) hubs.push(await spawnHub(url))
      const adminKey = hubs.find((h) => h.adminKey !== undefined)!.adminKey!
      const first = hubs[0]!.url
      const setup = Effect.gen(function* () {
        const buyer = yield* generateDid("buyer")
        const shopper = yield* generateDid("shopper")
        const intent = yield* issueIntentMandate({ grantorDid: buyer.did, granteeDid: shopper.did, constraints: { spendLimitUsd: 1_000_000 }, privateKey: buyer.privateKey })
        const children = yield* Effect.forEach(Array.from({ length: ALLOCATIONS }), () =>
          attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: 0.01 }, grantorPrivateKey: shopper.privateKey }))
        return { buyer, shopper, intent, children: children.map((c) => c.token) }
      }).pipe(Effect.provide(KeysNative.layer))
      const { buyer, shopper, intent, children } = await Effect.runPromise(setup)
      // Grantor and grantee are registered (mandates verify against the registry) with their own keys.
      await registerAgent(first, adminKey, buyer, "buyer")
      const shopperKey = await registerAgent(first, adminKey, shopper, "shopper")
      const pool = (await json(`${first}/v1/spending/pools`, "POST", { mandate: intent.token }, shopperKey)) as { poolId: string }
      const c0 = cpuSeconds(hubs.map((h) => h.proc.pid!))
      const t0 = performance.now()
      const perSecond = await timed(ALLOCATIONS, 24, (i) =>
        json(`${hubs[i % hubCount]!.url}/v1/spending/pools/${pool.poolId}/allocations`, "POST", { childMandate: children[i], idempotencyKey: `k${i}` }, shopperKey))
      const wall = (performance.now() - t0) / 1000
      const c1 = cpuSeconds(hubs.map((h) => h.proc.pid!))
      return { perSecond, dbShare: (c1.db - c0.db) / wall, hubShare: (c1.hubs - c0.hubs) / wall, shed }
    } finally {
      for (const h of hubs) h.proc.kill("SIGKILL")
    }
  })

/** An API key for `identity` and its registration, through the hub's client (which makes the registration proof). */
const registerAgent = (hubUrl: string, adminKey: string, identity: MeshIdentity, name: string): Promise<string> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const admin = yield* MeshClient.make({ hubUrl, apiKey: adminKey, retry: { times: 3 } })
      const key = yield* admin.createApiKey({ owner: identity.did })
      yield* admin.registerAgent({ manifest: { name, meshProtocolVersion: "1.0", capabilities: ["pay"] }, endpointUrl: "http://127.0.0.1:9/agent", identity, apiKey: key.apiKey })
      return key.apiKey
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))
  )

const scaling = async (): Promise<void> => {
  if (!fs.existsSync(bin)) throw new Error("pg-scaling needs dist/bin/mesh.js: run npm run build first")
  const results: Array<{ hubs: number; perSecond: number; dbShare: number; hubShare: number; shed: number }> = []
  for (const hubs of [1, 2, 3]) results.push({ hubs, ...(await scalingRun(hubs)) })
  console.log("\n## pg-scaling (allocations/s through mesh hub processes on one Postgres; CPU-s per s)")
  for (const r of results) {
    console.log(`${String(r.hubs)} hub(s): ${Math.round(r.perSecond).toLocaleString("en-US").padStart(7)} allocations/s   Postgres CPU ${r.dbShare.toFixed(2)}   hubs CPU ${r.hubShare.toFixed(2)}   shed and retried ${r.shed}`)
  }
  const one = results[0]!
  report("pg-scaling", results.slice(1).map((r) => ({
    figure: { name: `${r.hubs} hubs`, opsPerSecond: r.perSecond },
    baseline: { name: "1 hub", opsPerSecond: one.perSecond }
  })))
  const file = path.join(process.cwd(), "bench", "results", "pg-scaling.json")
  const saved = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>
  saved["curve"] = results
  fs.writeFileSync(file, JSON.stringify(saved, null, 2))
}

// ---------------------------------------------------------------------------------------------------------------
// pg-http

const ROWS = 10_000
const hashes = (): Array<string> => Array.from({ length: ROWS }, (_, i) => didHash(`did:mesh:bench.agent-${i}` as Did))

const seed = async (url: string): Promise<void> => {
  // The hub's migrations make the schema; the rows go straight in, as bench/http.ts seeds SQLite.
  const migrated = ManagedRuntime.make(Db.layerPostgres(url))
  await migrated.runPromise(Effect.void)
  await migrated.dispose()
  const pool = quietPool({ connectionString: url, max: 1 })
  const key = toBase64(new Uint8Array(32).fill(7))
  const all = hashes()
  for (let start = 0; start < ROWS; start += 1000) {
    const values: Array<unknown> = []
    const rows = all.slice(start, start + 1000).map((h, j) => {
      const i = start + j
      values.push(`did:mesh:bench.agent-${i}`, h, `https://agents.example/${i}`)
      const b = j * 3
      return `($${b + 1}, $${b + 2}, 'agent', $${b + 1}, $${b + 3}, '${key}', 1, 'bafkrei', NULL, NULL, 'bench', 0, 0)`
    })
    await pool.query(`INSERT INTO mesh_entries (did, did_hash, kind, name, endpoint_url, public_key_b64, key_version, manifest_cid, skill_type, tools,
      owner_key_id, created_at, updated_at) VALUES ${rows.join(", ")} ON CONFLICT DO NOTHING`, values)
  }
  await pool.end()
}

const rawServer = (url: string): Http.Server => {
  const pool = quietPool({ connectionString: url, max: 10 })
  const prefix = "/v1/agents/"
  return Http.createServer({ keepAlive: true }, (req, res) => {
    const u = req.url ?? ""
    if (req.method !== "GET" || !u.startsWith(prefix)) {
      res.writeHead(404, { "content-length": 0 })
      return void res.end()
    }
    pool.query<{ did_hash: string; did: string; name: string; endpoint_url: string }>(
      "SELECT did_hash, did, name, endpoint_url FROM mesh_entries WHERE did_hash = $1",
      [decodeURIComponent(u.slice(prefix.length))]
    ).then(({ rows: [row] }) => {
      const body = row === undefined ? JSON.stringify({ code: "AGENT_NOT_FOUND" }) : JSON.stringify({ didHash: row.did_hash, did: row.did, name: row.name, endpoint: row.endpoint_url })
      res.writeHead(row === undefined ? 404 : 200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      res.end(body)
    }, () => {
      res.writeHead(503, { "content-length": 0 })
      res.end()
    })
  })
}

const startServer = async (mode: string, url: string): Promise<number> => {
  if (mode === "raw") {
    const server = rawServer(url)
    return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  }
  const scope = Effect.runSync(Scope.make())
  const hub = await Effect.runPromise(
    Scope.extend(Hub.start({ database: url, serving: { maxEventLoopLagMs: Infinity } }), scope).pipe(Effect.provide(KeysNative.layer))
  )
  return hub.port
}

const http = async (): Promise<void> =>
  withDatabase(async (url) => {
    await seed(url)
    const requests = hashes().map((h) => Buffer.from(`GET /v1/agents/${h} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`))
    const server = (name: string, mode: string): BenchServer => ({
      name,
      spawn: () => spawnServer({ module: fileURLToPath(import.meta.url), env: { PG_BENCH_SERVER: mode, PG_BENCH_URL: url } }),
      requests: () => requests
    })
    const { wall, cpu, latency } = await measureAll([server("raw node:http + pg driver", "raw"), server("hub GET /v1/agents/:didHash on Postgres", "hub")], DEFAULT_ROUNDS)
    const [rawW, hubW] = wall as [Measurement, Measurement]
    const [rawC, hubC] = cpu as [Measurement, Measurement]
    report("pg-http", [{ figure: hubW, baseline: rawW, target: 0.5 }, { figure: hubC, baseline: rawC }])
    reportLatency("pg-http", latency)
  })

/** Runs the suite (`PG_BENCH_PARTS=ledger,http,scaling` picks parts). */
export const run = async (): Promise<void> => {
  const parts = (process.env["PG_BENCH_PARTS"] ?? "ledger,http,scaling").split(",")
  if (parts.includes("ledger")) await ledger()
  if (parts.includes("http")) await http()
  if (parts.includes("scaling")) await scaling()
}

const serverMode = process.env["PG_BENCH_SERVER"]
if (serverMode !== undefined) {
  await serveChild(() => startServer(serverMode, process.env["PG_BENCH_URL"]!))
} else if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run()
}
