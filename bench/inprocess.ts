/**
 * The serving path without sockets: a hub resolve (`GET /v1/agents/:didHash`, 10k agents on a SQLite file) and an
 * agent `POST /v1/run` (auth none, echo handler), each through its server's own node:http listener (`Serve.listener`)
 * called with node:http's request and response objects and no connection, beside a raw listener doing the same work
 * (a prepared lookup answered as JSON; `JSON.parse` of the body answered as JSON) called the same way. What is
 * measured is the CPU each request costs in this process, so a machine shared with other work bends it less than
 * the load suites (`http`, `agent`), which also count HTTP parsing and the kernel; it is the figure to judge a change
 * of the serving path by (docs/architecture.md §6).
 *
 * Requests are made in batches of 64 with a turn of the event loop between batches (a response's writes and a
 * fiber's scheduling settle there); rounds of the four are interleaved, timed by this process's CPU time, 7 each,
 * medians. Reports: `inprocess` (requests per CPU-second, each figure beside its raw listener) and the CPU µs per
 * request printed beside it. Run: `npm run bench -- inprocess`.
 */
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Exit from "effect/Exit"
import { EventEmitter } from "node:events"
import * as fs from "node:fs"
import * as Http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as A2aHttp from "../src/agent/A2aHttp.js"
import { AgentApi } from "../src/agent/AgentApi.js"
import * as AgentHttp from "../src/agent/AgentHttp.js"
import * as AgentServer from "../src/agent/AgentServer.js"
import { didHash, type Did } from "../src/core/Did.js"
import { toBase64 } from "../src/core/internal/bytes.js"
import * as Serve from "../src/http/Serve.js"
import * as Hub from "../src/hub/Hub.js"
import { HubApi } from "../src/hub/HubApi.js"
import { HandlersLive } from "../src/hub/HubHttp.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { median, report } from "./harness.js"

const ROWS = 10_000
const BATCH = 64
const ROUNDS = 7
const ROUND_CPU_MS = 200

const hashes = Array.from({ length: ROWS }, (_, i) => didHash(`did:mesh:bench.agent-${i}` as Did))
const bodies = Array.from({ length: 1000 }, (_, i) => Buffer.from(JSON.stringify({ message: `hello ${i}`, sessionId: `bench-${i}` })))

// A request as a listener reads it: method, url, headers, its body as "data" then "end". The response is node:http's
// own, never given a socket; `end` keeps what it was given.
const socket = new net.Socket()
const template = new Http.IncomingMessage(socket)
class Request extends EventEmitter {
  readonly httpVersionMajor = 1
  readonly httpVersionMinor = 1
  readonly socket = socket
  constructor(readonly method: string, readonly url: string, readonly headers: Record<string, string>) {
    super()
  }
  resume(): this {
    return this
  }
}
let failures = 0
const response = (): Http.ServerResponse => {
  const res = new Http.ServerResponse(template)
  res.end = function (this: Http.ServerResponse) {
    if (this.statusCode !== 200) failures++
    return this
  } as never
  return res
}

const get = (listener: Serve.Listener, i: number) =>
  listener(new Request("GET", `/v1/agents/${hashes[i % ROWS]}`, { host: "127.0.0.1" }) as never, response())

const post = (listener: Serve.Listener, i: number) => {
  const body = bodies[i % bodies.length]!
  const req = new Request("POST", "/v1/run", { host: "127.0.0.1", "content-type": "application/json", "content-length": String(body.length) })
  listener(req as never, response())
  req.emit("data", body)
  req.emit("end")
}

const rawHub = (file: string): Serve.Listener => {
  const stmt = new Database(file, { fileMustExist: true }).prepare<[string], Record<string, unknown>>("SELECT * FROM mesh_entries WHERE did_hash = ?")
  const prefix = "/v1/agents/"
  return (req, res) => {
    const row = stmt.get(decodeURIComponent((req.url ?? "").slice(prefix.length)))
    const body = JSON.stringify(row ?? { code: "NOT_FOUND" })
    res.writeHead(row === undefined ? 404 : 200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
  }
}

const rawAgent: Serve.Listener = (req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    const payload = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { message: string; sessionId?: string }
    const body = JSON.stringify({ message: payload.message, sessionId: payload.sessionId ?? "" })
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
  })
}

const hubListener = async (file: string, scope: Scope.Scope): Promise<Serve.Listener> => {
  const listener = await Effect.runPromise(
    Effect.gen(function* () {
      const services = yield* Layer.build(Hub.layerServices({ database: file }))
      return yield* Serve.listener(HubApi, HandlersLive, { maxEventLoopLagMs: Infinity }).pipe(Effect.provide(services))
    }).pipe(Scope.extend(scope), Effect.provide(KeysNative.layer))
  )
  const db = new Database(file)
  const key = toBase64(new Uint8Array(32).fill(7))
  const insert = db.prepare(`INSERT OR IGNORE INTO mesh_entries (did, did_hash, kind, name, endpoint_url, public_key_b64, key_version,
    manifest_cid, skill_type, tools, owner_key_id, created_at, updated_at) VALUES (?, ?, 'agent', ?, ?, ?, 1, 'bafkrei', NULL, NULL, 'bench', 0, 0)`)
  db.transaction(() => hashes.forEach((h, i) => insert.run(`did:mesh:bench.agent-${i}`, h, `did:mesh:bench.agent-${i}`, `https://agents.example/${i}`, key)))()
  db.close()
  return listener
}

const agentListener = (scope: Scope.Scope): Promise<Serve.Listener> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const services = yield* Layer.build(
        AgentServer.layerServices({ name: "bench", did: "did:mesh:bench", privateKey: new Uint8Array(32).fill(9), handler: ({ message }) => message, database: ":memory:" })
      )
      return yield* Serve.listener(AgentApi, Layer.merge(AgentHttp.layer, A2aHttp.layer), { maxEventLoopLagMs: Infinity }).pipe(Effect.provide(services))
    }).pipe(Scope.extend(scope), Effect.provide(KeysNative.layer))
  )

const cpuUs = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}
const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** CPU µs per request of `one`, over at least `ROUND_CPU_MS` of CPU. */
const round = async (one: (i: number) => void): Promise<number> => {
  const t0 = cpuUs()
  let n = 0
  while (cpuUs() - t0 < ROUND_CPU_MS * 1000) {
    for (let k = 0; k < BATCH; k++) one(n++)
    await turn()
  }
  return (cpuUs() - t0) / n
}

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-inprocess-"))
  const scope = Effect.runSync(Scope.make())
  try {
    const file = path.join(dir, "hub.db")
    const hub = await hubListener(file, scope)
    const agent = await agentListener(scope)
    const raw = rawHub(file)
    const ops = [
      { name: "raw listener + prepared lookup (in process)", one: (i: number) => get(raw, i) },
      { name: "hub GET /v1/agents/:didHash (in process)", one: (i: number) => get(hub, i) },
      { name: "raw listener echo (in process)", one: (i: number) => post(rawAgent, i) },
      { name: "agent POST /v1/run, auth none (in process)", one: (i: number) => post(agent, i) }
    ]
    for (const op of ops) await round(op.one)
    const us: Array<Array<number>> = ops.map(() => [])
    for (let r = 0; r < ROUNDS; r++) for (const [i, op] of ops.entries()) us[i]!.push(await round(op.one))
    if (failures > 0) throw new Error(`inprocess: ${failures} responses were not 200`)
    const m = ops.map((op, i) => ({ name: op.name, opsPerSecond: 1e6 / median(us[i]!) }))
    for (const x of m) console.log(`${x.name.padEnd(50)} ${(1e6 / x.opsPerSecond).toFixed(2)} CPU µs/request`)
    report("inprocess", [
      { figure: m[1]!, baseline: m[0]! },
      { figure: m[3]!, baseline: m[2]! }
    ])
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
