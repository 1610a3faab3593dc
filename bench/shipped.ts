/**
 * Fast as shipped: what users run, beside its peers, in one run. Every mesh figure is a process started from the
 * built binary as a user starts it, in a fresh temporary working directory, with default flags, so with the access
 * log on (one pretty line per request on stderr, written here to a file in that directory, as a service manager
 * would keep it), the default log level and the database file it picks by default (`.mesh/agents/<didHash>.db`,
 * `.mesh/hub.db`):
 *
 * - `node dist/bin/mesh.js agent bench/shipped-echo.mjs --port P`, the JSON echo (`({ message }) => message`):
 *   `POST /v1/run` with auth none, against raw node:http doing the same echo. Target ≥ 0.5×.
 * - the same with `--auth mesh-sig --hub <the hub below>` (caller keys resolved from the hub, as an agent finds its
 *   callers), against raw node:http + one Ed25519 verify per request (`crypto.verify` over the signature base built
 *   by string concatenation, KeyObjects cached by keyid, no parsing, digest, window or nonce: bench/agent.ts's
 *   `raw-verify`). Target ≥ 0.7×.
 * - the same agent (auth none) answering A2A `message/send` (0.3) on `POST /`, against `@a2a-js/sdk`'s express
 *   server answering it (examples/a2a-sdk-agent.ts, as bench/a2a.ts runs it). Target ≥ 3×.
 * - `node dist/bin/mesh.js hub --port P`: `GET /v1/agents/:didHash` of an agent registered through the hub's API,
 *   against raw node:http answering that URL with the same bytes (the body and headers the hub sent, captured
 *   once). Target ≥ 0.45×.
 * - `mesh hub` from process start to its `listening on` line (warm restarts on its database, the first start having
 *   made it), against `node -e 0` to exit, both under `taskset -c <the server CPU>`, interleaved, medians of 7.
 *   Target ≤ 3× (as starts/s: ≥ 1/3).
 *
 * Peers, in forked processes of this file, each the same echo (parse the JSON, a string `message` or 400, answer
 * `{ message, sessionId }`) with its framework's defaults: raw node:http, fastify 5 (its logger off, as by default),
 * hono on @hono/node-server. Requests are bench/agent.ts's: `{"message":"hello <i>","sessionId":"bench-<i>"}`, and
 * bench/a2a.ts's `message/send`.
 *
 * Signed requests: 50 callers (`did:mesh:bench.caller-<i>`, as many as connections), registered on the hub through
 * its API, each request signed by `signRequest` before the rounds with its own nonce, round-robin over the callers,
 * ttl 300 s (the longest an agent honours; the rounds run minutes after signing). Many callers, not one: an agent
 * holds at most 6,250 live nonces per sender by default, fewer than one sender would send here within a signature's
 * lifetime. raw-verify cycles through 1,000 of them; the agent refuses replays, so it gets a pool of never-reused
 * ones, capped at `SIG_ROUND_CAP` per round (a capped round is shorter; its rate is still requests per elapsed time).
 *
 * Load (bench/load.ts): servers on one core, the load generator on the other (taskset where available), 50
 * keep-alive connections with one request in flight each (wrk -t1 -c50), 1 s warm-up then 7 rounds of 1 s
 * interleaved across servers, medians; any non-200 fails the run. Reports `shipped` (wall-clock requests/s, and the
 * start-up row), `shipped-cpu` (requests per second of the server's own CPU time: IPC for forked peers, /proc for
 * the mesh processes) and p50/p99 latency. Needs the built binary (`npm run build`).
 * Run: `npm run bench -- shipped` (or `node --import ./bench/loader.mjs bench/run.ts shipped`).
 * `SHIPPED_BENCH_ONLY=run,sig` measures only the named figures, each with its baseline (and, for `sig`, the hub its
 * agent resolves callers on, measured too): `run` (auth none), `sig` (mesh-sig), `a2a`, `hub`, `peers` (fastify,
 * hono) and `start`; a partial run is for comparing builds, not a record of the suite.
 */
import { serve as serveHono } from "@hono/node-server"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import Fastify from "fastify"
import { Hono } from "hono"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as Http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { startSdkAgent } from "../examples/a2a-sdk-agent.js"
import { didHash, importIdentity, type MeshIdentity } from "../src/core/Did.js"
import { signRequest } from "../src/core/HttpSignature.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { legacySend } from "./a2a.js"
import { body, listen, once, rawServer, request, unsigned } from "./agent.js"
import { median, note, report, type Measurement, type Row } from "./harness.js"
import { DEFAULT_ROUNDS, measureAll, pinning, reportLatency, serveChild, spawnCommand, spawnServer, type BenchServer, type MeasureOptions, type Spawned } from "./load.js"
import { timeToExit, timeToListen } from "./start.js"

const bin = path.resolve("dist/bin/mesh.js")
const ECHO = fileURLToPath(new URL("./shipped-echo.mjs", import.meta.url))
const OPTIONS: MeasureOptions = { ...DEFAULT_ROUNDS, connections: 50 }
const CALLERS = 50
const CYCLED = 1_000
/** Requests per round (and warm-up) for the signed agent, whose requests are all distinct. */
const SIG_ROUND_CAP = 10_000
const SIG_TTL_SECONDS = 300
const STARTS = 7

type Mode = "raw" | "fastify" | "hono" | "raw-verify" | "sdk" | "raw-bytes"

/** The figures of the suite, in the order they are reported; `SHIPPED_BENCH_ONLY` picks some. */
const FIGURES = ["peers", "run", "sig", "a2a", "hub", "start"] as const
type Figure = (typeof FIGURES)[number]

/** The figures this run measures: those `SHIPPED_BENCH_ONLY` names (comma-separated), else all. */
const wantedFigures = (): ReadonlySet<Figure> => {
  const only = (process.env["SHIPPED_BENCH_ONLY"] ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "")
  const unknown = only.filter((s) => !(FIGURES as ReadonlyArray<string>).includes(s))
  if (unknown.length > 0) throw new Error(`SHIPPED_BENCH_ONLY names ${unknown.join(", ")}; the figures are ${FIGURES.join(", ")}`)
  return new Set(only.length === 0 ? FIGURES : (only as Array<Figure>))
}

/** What the hub answered to one resolve, to be served again byte for byte. */
interface Reply {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
}

// ---------------------------------------------------------------------------------------------------------------
// Peers (child processes).

interface EchoPayload {
  readonly message?: unknown
  readonly sessionId?: unknown
}

const echoOf = (payload: EchoPayload) =>
  typeof payload.message !== "string"
    ? undefined
    : { message: payload.message, sessionId: typeof payload.sessionId === "string" ? payload.sessionId : crypto.randomUUID() }

const startFastify = async (): Promise<number> => {
  const app = Fastify()
  app.post("/v1/run", async (req, reply) => {
    const echo = echoOf((req.body ?? {}) as EchoPayload)
    return echo ?? reply.code(400).send({ code: "INVALID_REQUEST" })
  })
  await app.listen({ port: 0, host: "127.0.0.1" })
  return (app.server.address() as net.AddressInfo).port
}

const startHono = (): Promise<number> => {
  const app = new Hono()
  app.post("/v1/run", async (c) => {
    const echo = echoOf(await c.req.json<EchoPayload>())
    return echo === undefined ? c.json({ code: "INVALID_REQUEST" }, 400) : c.json(echo)
  })
  return new Promise((resolve) => serveHono({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => resolve(info.port)))
}

/** One `crypto.verify` per request with the caller's cached KeyObject, found by the keyid the request names. */
const verifierOf = (keys: Record<string, string>): ((req: Http.IncomingMessage) => boolean) => {
  const byKeyId = new Map(
    Object.entries(keys).map(([keyId, b64]) => [keyId, crypto.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(b64, "base64").toString("base64url") }, format: "jwk" })])
  )
  return (req) => {
    const { "signature-input": input, signature, "content-digest": digest } = req.headers
    if (typeof input !== "string" || typeof signature !== "string" || typeof digest !== "string" || !input.startsWith("sig1=")) return false
    const m = /^sig1=:([A-Za-z0-9+/=]+):$/.exec(signature)
    const key = byKeyId.get(/;keyid="([^"]+)"/.exec(input)?.[1] ?? "")
    if (m === null || key === undefined) return false
    const base =
      `"@method": ${req.method}\n"@target-uri": http://${req.headers.host}${req.url}\n"content-digest": ${digest}\n` +
      `"@signature-params": ${input.slice(5)}`
    return crypto.verify(null, Buffer.from(base), key, Buffer.from(m[1]!, "base64"))
  }
}

/** Answers `GET <reply.path>` with the hub's bytes: its headers (node adds date, connection, length) and body. */
const bytesServer = (reply: Reply): Http.Server => {
  const body = Buffer.from(reply.body)
  return Http.createServer({ keepAlive: true }, (req, res) => {
    if (req.method !== "GET" || req.url !== reply.path) {
      res.writeHead(404, { "content-length": 0 })
      return void res.end()
    }
    res.writeHead(200, { ...reply.headers, "content-length": body.length })
    res.end(body)
  })
}

const startPeer = async (mode: Mode): Promise<number> => {
  switch (mode) {
    case "raw":
      return listen(rawServer())
    case "fastify":
      return startFastify()
    case "hono":
      return startHono()
    case "raw-verify":
      return listen(rawServer(verifierOf(JSON.parse(process.env["SHIPPED_BENCH_KEYS"]!) as Record<string, string>)))
    case "sdk":
      return (await startSdkAgent({ reply: (text) => [text] })).port
    case "raw-bytes":
      return listen(bytesServer(JSON.parse(process.env["SHIPPED_BENCH_REPLY"]!) as Reply))
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The mesh processes.

/** A free port of 127.0.0.1, to pass as `--port` (what a user picks). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })

/** Ready once `last` (the line `mesh` prints last, which scripts wait for) is out: the port of its `listening on` line. */
const readyAt = (last: RegExp) => (stdout: string): number | undefined => {
  if (!last.test(stdout)) return undefined
  const port = /listening on http:\/\/[^\s:]+:(\d+)/.exec(stdout)?.[1]
  return port === undefined ? undefined : Number(port)
}

/** The working directory and log file of each mesh process of this run, for the access-log check after it. */
const logs: Array<{ readonly name: string; readonly file: string }> = []

const startMesh = async (root: string, name: string, args: ReadonlyArray<string>, last: RegExp) => {
  const cwd = fs.mkdtempSync(path.join(root, "mesh-"))
  const file = path.join(cwd, "mesh.log")
  logs.push({ name, file })
  return spawnCommand({ args: [bin, ...args, "--port", String(await freePort())], cwd, stderrFile: file, ready: readyAt(last) })
}

const meshAgent = (root: string, name: string, flags: () => ReadonlyArray<string>, requests: BenchServer["requests"], cap?: number): BenchServer => ({
  name,
  spawn: () => startMesh(root, name, ["agent", ECHO, ...flags()], /\n {2}discovery /),
  requests,
  ...(cap === undefined ? {} : { cap })
})

// ---------------------------------------------------------------------------------------------------------------
// Callers and their signed requests (this process).

interface Caller {
  readonly identity: MeshIdentity
  readonly keyId: string
}

const callers = (): Promise<Array<Caller>> =>
  Effect.runPromise(
    Effect.forEach(Array.from({ length: CALLERS }), (_, i) =>
      Effect.map(
        importIdentity(`did:mesh:bench.caller-${i}`, crypto.createHash("sha256").update(`bench caller ${i}`).digest()),
        (identity): Caller => ({ identity, keyId: `${identity.did}#key-1` })
      )).pipe(Effect.provide(KeysNative.layer))
  )

/** `count` requests to `port`, each signed afresh (its own nonce), round-robin over the callers. */
const signed = (port: number, count: number, by: ReadonlyArray<Caller>): Promise<Array<Buffer>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const url = `http://127.0.0.1:${port}/v1/run`
      const out: Array<Buffer> = new Array(count)
      for (let i = 0; i < count; i++) {
        const caller = by[i % by.length]!
        const payload = body(i)
        const headers = yield* signRequest({ method: "POST", url, body: payload }, { privateKey: caller.identity.privateKey, keyId: caller.keyId, ttlSeconds: SIG_TTL_SECONDS })
        out[i] = request(port, payload, headers)
      }
      return out
    }).pipe(Effect.provide(KeysNative.layer))
  )

/** Registers the echo agent and the callers on the hub with its admin credential; the echo agent's resolve path. */
const register = (hubUrl: string, adminKey: string, by: ReadonlyArray<Caller>): Promise<string> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const hub = yield* MeshClient.make({ hubUrl, apiKey: adminKey, retry: { times: 3 } })
      const echo = yield* importIdentity("did:mesh:bench.echo", crypto.createHash("sha256").update("bench echo").digest())
      yield* hub.registerAgent({ manifest: { name: "echo", meshProtocolVersion: "1.0", capabilities: ["echo"] }, endpointUrl: "http://127.0.0.1:7800", identity: echo })
      yield* Effect.forEach(by, (c) => hub.registerAgent({ manifest: { name: "caller", meshProtocolVersion: "1.0", capabilities: [] }, identity: c.identity }), { discard: true })
      return `/v1/agents/${didHash(echo.did)}`
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))
  )

/** What the hub answers at `path`, headers and body, to serve the same bytes. */
const capture = async (hubUrl: string, path: string): Promise<Reply> => {
  const res = await fetch(`${hubUrl}${path}`)
  const text = await res.text()
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${text}`)
  const hopByHop = new Set(["date", "connection", "keep-alive", "content-length", "transfer-encoding"])
  const headers: Record<string, string> = {}
  res.headers.forEach((value, name) => {
    if (!hopByHop.has(name)) headers[name] = value
  })
  return { path, headers, body: text }
}

// ---------------------------------------------------------------------------------------------------------------
// The run.

const peer = (name: string, mode: Mode, requests: BenchServer["requests"], env: () => Record<string, string> = () => ({})): BenchServer => ({
  name,
  spawn: () => spawnServer({ module: fileURLToPath(import.meta.url), env: { SHIPPED_BENCH_SERVER: mode, ...env() } }),
  requests
})

/** Time to first listen of `mesh hub` (warm restarts in `cwd`) and time to exit of `node -e 0`, medians, ms. */
const startUp = async (cwd: string, cpu: number | undefined): Promise<{ readonly hubMs: number; readonly nodeMs: number }> => {
  const hub = async () => timeToListen([bin, "hub", "--port", String(await freePort())], { cwd, cpu })
  await hub() // the first start makes the database and the admin credential
  const hubMs: Array<number> = []
  const nodeMs: Array<number> = []
  for (let i = 0; i < STARTS; i++) {
    nodeMs.push((await timeToExit(["-e", "0"], { cpu })).ms)
    hubMs.push(await hub())
  }
  return { hubMs: median(hubMs), nodeMs: median(nodeMs) }
}

/** Runs the suite. */
export const run = async (): Promise<void> => {
  if (!fs.existsSync(bin)) throw new Error("dist/bin/mesh.js is missing: run `npm run build`")
  const wanted = wantedFigures()
  const placed = pinning()
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-shipped-"))
  logs.length = 0
  try {
    const by = await callers()
    const keys = Object.fromEntries(by.map((c) => [c.keyId, c.identity.publicKey]))
    // Set once the hub is up (it is spawned before the servers that need it).
    let hubUrl = ""
    let reply: Reply | undefined = undefined
    const hub: BenchServer = {
      name: "mesh hub GET /v1/agents/:didHash",
      spawn: async (): Promise<Spawned> => {
        const spawned = await startMesh(root, "mesh hub", ["hub"], /\n {2}database /)
        try {
          hubUrl = /listening on (http:\/\/\S+)/.exec(spawned.stdout())![1]!
          const adminKey = /admin credential[^\n]*\n(mk_\S+)/.exec(spawned.stdout())![1]!
          reply = await capture(hubUrl, await register(hubUrl, adminKey, by))
          return spawned
        } catch (e) {
          await spawned.stop()
          throw e
        }
      },
      requests: (port) => [Buffer.from(`GET ${reply!.path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`)]
    }
    const raw = peer("raw node:http echo", "raw", unsigned)
    const servers: Record<Figure, ReadonlyArray<BenchServer>> = {
      peers: [peer("fastify 5 echo", "fastify", unsigned), peer("hono (@hono/node-server) echo", "hono", unsigned)],
      run: [meshAgent(root, "mesh agent POST /v1/run, auth none", () => [], unsigned)],
      sig: [
        peer("raw node:http echo + Ed25519 verify", "raw-verify", (port) => signed(port, CYCLED, by), () => ({ SHIPPED_BENCH_KEYS: JSON.stringify(keys) })),
        meshAgent(
          root,
          "mesh agent POST /v1/run, auth mesh-sig",
          () => ["--auth", "mesh-sig", "--hub", hubUrl],
          async (port) => {
            const count = SIG_ROUND_CAP * (OPTIONS.rounds + 1)
            const t0 = performance.now()
            const pool = await signed(port, count, by)
            console.log(`(signed ${count.toLocaleString("en-US")} requests by ${CALLERS} callers in ${((performance.now() - t0) / 1000).toFixed(1)} s)`)
            return once(pool)
          },
          SIG_ROUND_CAP
        )
      ],
      a2a: [peer("@a2a-js/sdk express message/send", "sdk", legacySend), meshAgent(root, "mesh agent A2A message/send", () => [], legacySend)],
      hub: [
        peer("raw node:http, the hub's bytes", "raw-bytes", (port) => [Buffer.from(`GET ${reply!.path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`)], () => ({
          SHIPPED_BENCH_REPLY: JSON.stringify(reply)
        }))
      ],
      start: []
    }
    // The hub is spawned before the first server that needs it: the signed agent resolves its callers there, and
    // the raw server of its bytes serves what it answered.
    const all: Array<BenchServer> = [raw]
    for (const f of FIGURES.filter((f) => wanted.has(f))) {
      if ((f === "sig" || f === "hub") && !all.includes(hub)) all.push(hub)
      all.push(...servers[f])
    }
    const measured = await measureAll(all, OPTIONS)
    const byName = (ms: ReadonlyArray<Measurement>) => (name: string): Measurement => ms[all.findIndex((s) => s.name === name)]!
    const { latency } = measured
    // Every mesh process ran with its access log on: one line per request (and a few of its own).
    const logLines = logs.map(({ name, file }) => ({ name, lines: fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").length - 1 : 0 }))
    console.log(`(access logs written: ${logLines.map((l) => `${l.name} ${l.lines.toLocaleString("en-US")} lines`).join(", ")})`)
    note("accessLogLines", logLines)

    const listenRows: Array<Row> = []
    if (wanted.has("start")) {
      const started = await startUp(fs.mkdtempSync(path.join(root, "start-")), placed.mode === "taskset" ? placed.serverCpu : undefined)
      console.log(`(mesh hub to first listen ${started.hubMs.toFixed(0)} ms, node -e 0 ${started.nodeMs.toFixed(0)} ms: ${(started.hubMs / started.nodeMs).toFixed(2)}×, target ≤ 3×)`)
      listenRows.push({
        figure: { name: "mesh hub start to first listen (starts/s)", opsPerSecond: 1000 / started.hubMs },
        baseline: { name: "node -e 0 to exit (starts/s)", opsPerSecond: 1000 / started.nodeMs },
        target: 1 / 3
      })
    }
    const rows = (ms: Array<Measurement>): Array<Row> => {
      const m = byName(ms)
      const r = m(raw.name)
      const groups: Record<Figure, () => Array<Row>> = {
        peers: () => [{ figure: m("fastify 5 echo"), baseline: r }, { figure: m("hono (@hono/node-server) echo"), baseline: r }],
        run: () => [{ figure: m("mesh agent POST /v1/run, auth none"), baseline: r, target: 0.5 }],
        sig: () => [
          { figure: m("raw node:http echo + Ed25519 verify"), baseline: r },
          { figure: m("mesh agent POST /v1/run, auth mesh-sig"), baseline: m("raw node:http echo + Ed25519 verify"), target: 0.7 }
        ],
        a2a: () => [
          { figure: m("@a2a-js/sdk express message/send"), baseline: r },
          { figure: m("mesh agent A2A message/send"), baseline: m("@a2a-js/sdk express message/send"), target: 3 }
        ],
        hub: () => [
          { figure: m("raw node:http, the hub's bytes"), baseline: r },
          { figure: m(hub.name), baseline: m("raw node:http, the hub's bytes"), target: 0.45 }
        ],
        start: () => []
      }
      return [{ figure: r, baseline: r }, ...FIGURES.filter((f) => wanted.has(f)).flatMap((f) => groups[f]())]
    }
    report("shipped", [...rows(measured.wall), ...listenRows])
    reportLatency("shipped", latency)
    report("shipped-cpu", rows(measured.cpu))
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

const serverMode = process.env["SHIPPED_BENCH_SERVER"]
if (serverMode !== undefined) {
  await serveChild(() => startPeer(serverMode as Mode))
} else if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run()
}
