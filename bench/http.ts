/**
 * HTTP serving: requests/s of a resolve-by-didHash endpoint (`GET /v1/agents/:didHash`, a prepared better-sqlite3
 * lookup over 10k rows, JSON out) served four ways, each beside raw node:http doing the same lookup:
 * stock HttpApi (`HttpApiBuilder.serve` + `NodeHttpServer.layer`) with the lookup on a prepared statement and
 * through `@effect/sql`'s SqlClient, and the lean `src/http/Serve` with the same two lookups. Target: lean ≥ 0.4×.
 * The handler groups are made with `ApiGroup.group`, whose layer is HttpApiBuilder's own (the stock servers run its
 * routes) and whose endpoints the lean server compiles (docs/architecture.md §6).
 *
 * Setup: each server runs in its own child process (`child_process.fork` of this file with `HTTP_BENCH_SERVER=<mode>`),
 * so on this 2-core machine the server has one core and the load generator (this process) the other. The load
 * generator is a minimal HTTP/1.1 keep-alive client on raw sockets (cheaper than node's http client, so it does not
 * bottleneck before the server): 32 connections to 127.0.0.1, one request in flight on each, cycling through the
 * 10k didHashes. Per server: 1 s warm-up, then 7 rounds of 1 s, median; every round is capped in time and count,
 * and the child is stopped afterwards. Rounds of all servers are interleaved. Two reports: `http` (wall-clock
 * requests/s) and `http-cpu` (requests per second of the server process's own CPU time, asked over IPC), the
 * steadier figure when other work shares the machine. `HTTP_BENCH_PROF=1` runs the servers with `--cpu-prof` into
 * `scratchpad/prof/http-<mode>/`. Spawning, load and rounds are bench/load.ts's. Run: `node --import ./bench/loader.mjs bench/http.ts`
 * (or `npm run bench -- http`).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqliteClient } from "@effect/sql-sqlite-node"
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as Http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { didHash, type Did } from "../src/core/Did.js"
import * as Hub from "../src/hub/Hub.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as Serve from "../src/http/Serve.js"
import * as ApiGroup from "../src/http/ApiGroup.js"
import { toBase64 } from "../src/core/internal/bytes.js"
import { report, type Measurement } from "./harness.js"
import { DEFAULT_ROUNDS, measureAll, serveChild, spawnServer, type BenchServer } from "./load.js"

const ROWS = 10_000

type Mode = "raw" | "stock" | "stock-sql" | "lean" | "lean-sql" | "hub"

// ---------------------------------------------------------------------------------------------------------------
// The contract and its handlers, as the hub will declare them.

const AgentRecord = Schema.Struct({ didHash: Schema.String, did: Schema.String, name: Schema.String, endpoint: Schema.String })
type AgentRecord = typeof AgentRecord.Type

class AgentNotFound extends Schema.TaggedError<AgentNotFound>()(
  "AgentNotFound",
  { code: Schema.Literal("AGENT_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

class Registry extends HttpApiGroup.make("registry").add(
  HttpApiEndpoint.get("resolve", "/v1/agents/:didHash")
    .setPath(Schema.Struct({ didHash: Schema.String }))
    .addSuccess(AgentRecord)
    .addError(AgentNotFound)
) {}

class BenchApi extends HttpApi.make("bench").add(Registry) {}

const SELECT = "SELECT did_hash AS didHash, did, name, endpoint FROM agents WHERE did_hash = ?"

const notFound = (h: string) => new AgentNotFound({ code: "AGENT_NOT_FOUND", message: `no agent ${h}` })

const preparedHandlers = (db: Database.Database) => {
  const stmt = db.prepare<[string], AgentRecord>(SELECT)
  return ApiGroup.group(BenchApi, "registry", (handlers) =>
    handlers.handle("resolve", ({ path }) =>
      Effect.suspend(() => {
        const row = stmt.get(path.didHash)
        return row === undefined ? Effect.fail(notFound(path.didHash)) : Effect.succeed(row)
      })
    )
  )
}

const sqlHandlers = ApiGroup.group(BenchApi, "registry", (handlers) =>
  Effect.map(SqlClient.SqlClient, (sql) =>
    handlers.handle("resolve", ({ path }) =>
      sql<AgentRecord>`SELECT did_hash AS didHash, did, name, endpoint FROM agents WHERE did_hash = ${path.didHash}`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.fail(notFound(path.didHash)) : Effect.succeed(rows[0])))
      )
    )
  )
)

// ---------------------------------------------------------------------------------------------------------------
// Server side (child process).

const hashes = (): Array<string> => Array.from({ length: ROWS }, (_, i) => didHash(`did:mesh:bench.agent-${i}` as Did))

const makeDatabase = (file: string): Database.Database => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.exec("CREATE TABLE IF NOT EXISTS agents (did_hash TEXT PRIMARY KEY, did TEXT NOT NULL, name TEXT NOT NULL, endpoint TEXT NOT NULL)")
  const count = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM agents").get()
  if (count?.n !== ROWS) {
    const insert = db.prepare("INSERT OR REPLACE INTO agents VALUES (?, ?, ?, ?)")
    db.transaction(() => {
      hashes().forEach((h, i) => insert.run(h, `did:mesh:bench.agent-${i}`, `agent ${i}`, `https://agents.example/${i}`))
    })()
  }
  return db
}

const rawServer = (db: Database.Database): Http.Server => {
  const stmt = db.prepare<[string], AgentRecord>(SELECT)
  const prefix = "/v1/agents/"
  return Http.createServer({ keepAlive: true }, (req, res) => {
    const url = req.url ?? ""
    if (req.method !== "GET" || !url.startsWith(prefix)) {
      res.writeHead(404, { "content-length": 0 })
      return void res.end()
    }
    const h = decodeURIComponent(url.slice(prefix.length))
    const row = stmt.get(h)
    const body = row === undefined ? JSON.stringify({ _tag: "AgentNotFound", code: "AGENT_NOT_FOUND" }) : JSON.stringify(row)
    res.writeHead(row === undefined ? 404 : 200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
  })
}

const listen = (server: Http.Server): Promise<number> =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))

/** The real hub (`Hub.start`) on its own database, seeded with the same 10k agents as registry entries. */
const startHub = async (file: string): Promise<number> => {
  const hubFile = `${file}.hub`
  const scope = Effect.runSync(Scope.make())
  const hub = await Effect.runPromise(Scope.extend(Hub.start({ database: hubFile }), scope).pipe(Effect.provide(KeysNative.layer)))
  const db = new Database(hubFile)
  const key = toBase64(new Uint8Array(32).fill(7))
  const insert = db.prepare(`INSERT OR IGNORE INTO mesh_entries (did, did_hash, kind, name, endpoint_url, public_key_b64, key_version,
    manifest_cid, skill_type, tools, owner_key_id, created_at, updated_at) VALUES (?, ?, 'agent', ?, ?, ?, 1, 'bafkrei', NULL, NULL, 'bench', 0, 0)`)
  db.transaction(() => {
    hashes().forEach((h, i) => insert.run(`did:mesh:bench.agent-${i}`, h, `did:mesh:bench.agent-${i}`, `https://agents.example/${i}`, key))
  })()
  db.close()
  return hub.port
}

const startServer = async (mode: Mode, file: string): Promise<number> => {
  if (mode === "hub") return startHub(file)
  const db = makeDatabase(file)
  const scope = Effect.runSync(Scope.make())
  const sqlLayer = SqliteClient.layer({ filename: file })
  switch (mode) {
    case "raw":
      return listen(rawServer(db))
    case "lean":
      return Effect.runPromise(Scope.extend(Serve.make(BenchApi, preparedHandlers(db)), scope)).then((s) => s.port)
    case "lean-sql":
      return Effect.runPromise(Scope.extend(Serve.make(BenchApi, sqlHandlers.pipe(Layer.provide(sqlLayer))), scope)).then((s) => s.port)
    case "stock":
    case "stock-sql": {
      const handlers = mode === "stock" ? preparedHandlers(db) : sqlHandlers.pipe(Layer.provide(sqlLayer))
      const app = HttpApiBuilder.serve().pipe(
        Layer.provide(HttpApiBuilder.api(BenchApi)),
        Layer.provide(handlers),
        Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer({ keepAlive: true }), { port: 0, host: "127.0.0.1" }))
      )
      const context = await Effect.runPromise(Layer.buildWithScope(app, scope))
      return Effect.runPromise(
        Effect.provide(
          HttpServer.HttpServer.pipe(Effect.map((s) => (s.address._tag === "TcpAddress" ? s.address.port : 0))),
          context
        )
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Load generator (this process), on bench/load.ts.

const profile = process.env["HTTP_BENCH_PROF"] === "1"

const server = (name: string, mode: Mode, file: string, requests: ReadonlyArray<Buffer>): BenchServer => ({
  name,
  spawn: () => spawnServer({ module: fileURLToPath(import.meta.url), env: { HTTP_BENCH_SERVER: mode, HTTP_BENCH_DB: file }, profile, profileName: `http-${mode}` }),
  requests: () => requests
})

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-http-"))
  const file = path.join(dir, "registry.db")
  try {
    makeDatabase(file).close()
    const requests = hashes().map((h) => Buffer.from(`GET /v1/agents/${h} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`))
    const all = [
      server("raw node:http + prepared lookup", "raw", file, requests),
      server("stock HttpApi, prepared lookup", "stock", file, requests),
      server("stock HttpApi, SqlClient lookup", "stock-sql", file, requests),
      server("lean Serve, prepared lookup", "lean", file, requests),
      server("lean Serve, SqlClient lookup", "lean-sql", file, requests),
      server("hub GET /v1/agents/:didHash (Registry)", "hub", file, requests)
    ]
    const { wall, cpu } = await measureAll(all, DEFAULT_ROUNDS)
    const rows = (ms: Array<Measurement>) => {
      const [raw, stock, stockSql, lean, leanSql, hub] = ms as [Measurement, Measurement, Measurement, Measurement, Measurement, Measurement]
      return [
        { figure: stock, baseline: raw },
        { figure: stockSql, baseline: raw },
        { figure: lean, baseline: raw, target: 0.4 },
        { figure: leanSql, baseline: raw },
        { figure: hub, baseline: raw, target: 0.4 }
      ]
    }
    report("http", rows(wall))
    report("http-cpu", rows(cpu))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const serverMode = process.env["HTTP_BENCH_SERVER"]
if (serverMode !== undefined) {
  await serveChild(() => startServer(serverMode as Mode, process.env["HTTP_BENCH_DB"] ?? ":memory:"))
} else if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run()
}
