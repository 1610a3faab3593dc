/**
 * Agent server: requests/s and p50/p99 latency of `POST /v1/run` on `AgentServer.make` with an echo handler
 * (`({ message }) => message`, memory none, `database: ":memory:"`), with auth none and with mesh-sig, each beside a
 * raw node:http baseline in the same run. Targets: auth none ≥ 0.4× raw; mesh-sig ≥ 0.7× raw + verify.
 *
 * The four servers:
 * - `raw`: node:http; reads the body, `JSON.parse`, answers `{ message, sessionId }` as JSON (the echo).
 * - `raw-verify`: the same plus one `crypto.verify(null, base, publicKeyObject, signature)` per request with a
 *   cached KeyObject, refusing (401) when it fails. It verifies the request's real mesh-sig signature: the base is
 *   built the simple way, by string concatenation of `@method`, `@target-uri` (`http://<Host><url>`) and the
 *   `content-digest` header, then the Signature-Input member as sent (everything after `sig1=`), and the
 *   signature is the base64 between the colons of `Signature: sig1=:…:`. No structured-field parsing, no digest
 *   check, no nonce: only the one verify.
 * - `agent-none`: `AgentServer.make({ name: "bench", handler: ({ message }) => message, database: ":memory:" })`.
 * - `agent-sig`: the same with `auth: "mesh-sig"` and `resolveCallerKey` answering the bench caller's key, so each
 *   request is checked in full (fields, time window, content digest, key, signature, nonce; an agent on a `:memory:`
 *   database keeps nonces in memory, one on a file in SQLite).
 * - `serve-echo` (a reference, no target): the lean `Serve` layer alone with a one-endpoint HttpApi taking the same
 *   `RunRequest` schema and answering the echo (its group made with `ApiGroup.group`, so compiled): what serving
 *   costs before the agent server adds anything.
 *
 * Requests: `{"message":"hello <i>","sessionId":"bench-<i>"}` with `Host: 127.0.0.1:<port>`. raw and agent-none
 * cycle through 1,000 unsigned ones. raw-verify and agent-sig get requests signed by `signRequest` (HttpSignature.ts)
 * with a fixed caller key (seed of 32 bytes of 7, `did:mesh:bench-caller#key-1`, ttl 600 s) for the URL
 * `http://127.0.0.1:<port>/v1/run`, pre-signed in this process before the rounds: raw-verify cycles through 1,000 of
 * them; agent-sig refuses replays, so it gets a pool of never-reused ones, enough for the warm-up and every round
 * (each capped at `SIG_ROUND_CAP` requests; a capped round is shorter, its rate is still requests per elapsed time).
 *
 * Setup (bench/load.ts): each server runs in its own child process (`child_process.fork` of this file with
 * `AGENT_BENCH_SERVER=<mode>`), so on this 2-core machine the server has one core and the load generator (this
 * process) the other; the load generator is a raw-socket HTTP/1.1 client, 32 keep-alive connections, one request in
 * flight on each. Per server: 1 s warm-up, then 7 rounds of 1 s, interleaved across servers, medians. Any non-200
 * fails the run, printing the first error response. Reports: `agent` (wall-clock requests/s; p50/p99 latency per
 * server, write to full response, which at 32 in flight is mostly queueing: p50 ≈ 32 / throughput), `agent-cpu`
 * (requests per second of the server process's own CPU time, the steadier figure when other work shares the
 * machine). `AGENT_BENCH_PROF=1` runs the servers with `--cpu-prof` into `scratchpad/prof/agent-bench-<mode>/`.
 * Run: `npm run bench -- agent` (or `node --import ./bench/loader.mjs bench/agent.ts`).
 *
 * A diagnostic: the agent here is `AgentServer.make` in a bench process, on `:memory:`, without the access log the
 * `mesh` command writes by default. What users run, `mesh agent` from the built binary with its defaults, is measured
 * by bench/shipped.ts; this suite isolates the server's own cost (and `serve-echo`, the serving layer's) from that.
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as Http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as HttpApi from "@effect/platform/HttpApi"
import * as ApiGroup from "../src/http/ApiGroup.js"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { RunReply, RunRequest } from "../src/agent/AgentApi.js"
import * as AgentServer from "../src/agent/AgentServer.js"
import * as Serve from "../src/http/Serve.js"
import { signRequest } from "../src/core/HttpSignature.js"
import { DEFAULT_MEMORY_CAPACITY, makeMemory } from "../src/core/NonceStore.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { report, type Measurement } from "./harness.js"
import { DEFAULT_ROUNDS, measureAll, reportLatency, serveChild, spawnServer, type BenchServer } from "./load.js"

/** Requests per round (and warm-up) for agent-sig, whose requests are all distinct; the pool holds (ROUNDS + 1)×. */
const SIG_ROUND_CAP = 10_000
const CYCLED = 1_000

const CALLER = "did:mesh:bench-caller"
const CALLER_SEED = new Uint8Array(32).fill(7)
const AGENT_SEED = new Uint8Array(32).fill(9)

type Mode = "raw" | "raw-verify" | "agent-none" | "agent-sig" | "serve-echo"

class EchoApi extends HttpApi.make("echo").add(
  HttpApiGroup.make("run").add(HttpApiEndpoint.post("run", "/v1/run").setPayload(RunRequest).addSuccess(RunReply))
) {}

const startServeEcho = (): Promise<number> => {
  const handlers = ApiGroup.group(EchoApi, "run", (h) =>
    h.handle("run", ({ payload }) => Effect.succeed({ message: payload.message, sessionId: payload.sessionId ?? crypto.randomUUID() }))
  )
  const scope = Effect.runSync(Scope.make())
  return Effect.runPromise(Scope.extend(Serve.make(EchoApi, handlers), scope)).then((s) => s.port)
}

const callerPublicKey = (): Uint8Array =>
  Effect.runSync(Effect.flatMap(Keys, (keys) => keys.importPrivateKey(CALLER_SEED)).pipe(Effect.provide(KeysNative.layer))).publicKey

// ---------------------------------------------------------------------------------------------------------------
// Server side (child process).

/** The echo on node:http; `verify` (if any) sees each request first and refuses it by returning false. */
export const rawServer = (verify?: (req: Http.IncomingMessage) => boolean): Http.Server =>
  Http.createServer({ keepAlive: true }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const answer = (status: number, body: string) => {
        res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        res.end(body)
      }
      if (req.method !== "POST" || req.url !== "/v1/run") return answer(404, `{"code":"NOT_FOUND"}`)
      if (verify !== undefined && !verify(req)) return answer(401, `{"code":"SIGNATURE_INVALID"}`)
      let payload: { message?: unknown; sessionId?: unknown }
      try {
        payload = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof payload
      } catch {
        return answer(400, `{"code":"INVALID_JSON"}`)
      }
      if (typeof payload.message !== "string") return answer(400, `{"code":"INVALID_REQUEST"}`)
      const sessionId = typeof payload.sessionId === "string" ? payload.sessionId : crypto.randomUUID()
      answer(200, JSON.stringify({ message: payload.message, sessionId }))
    })
  })

/** One crypto.verify over the signature base built by hand from the request's headers (see the file header). */
const verifier = (): ((req: Http.IncomingMessage) => boolean) => {
  const publicKey = crypto.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(callerPublicKey()).toString("base64url") }, format: "jwk" })
  return (req) => {
    const { "signature-input": input, signature, "content-digest": digest } = req.headers
    if (typeof input !== "string" || typeof signature !== "string" || typeof digest !== "string" || !input.startsWith("sig1=")) return false
    const m = /^sig1=:([A-Za-z0-9+/=]+):$/.exec(signature)
    if (m === null) return false
    const base =
      `"@method": ${req.method}\n"@target-uri": http://${req.headers.host}${req.url}\n"content-digest": ${digest}\n` +
      `"@signature-params": ${input.slice(5)}`
    return crypto.verify(null, Buffer.from(base), publicKey, Buffer.from(m[1]!, "base64"))
  }
}

/** Listens on a free port of 127.0.0.1; resolves with the port. */
export const listen = (server: Http.Server): Promise<number> =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))

const startAgent = async (auth: "none" | "mesh-sig"): Promise<number> => {
  const scope = Effect.runSync(Scope.make())
  const callerKey = Buffer.from(callerPublicKey()).toString("base64")
  const agent = await Effect.runPromise(
    Scope.extend(
      AgentServer.make({
        name: "bench",
        did: "did:mesh:bench",
        privateKey: AGENT_SEED,
        handler: ({ message }) => message,
        database: ":memory:",
        port: 0,
        auth,
        // One caller sends every signed request within one signature lifetime: its nonce quota must hold them all.
        ...(auth === "mesh-sig"
          ? { resolveCallerKey: (did: string) => (did === CALLER ? callerKey : null), nonceStore: makeMemory({ perSenderQuota: DEFAULT_MEMORY_CAPACITY }) }
          : {})
      }),
      scope
    ).pipe(Effect.provide(KeysNative.layer))
  )
  return agent.port
}

const startServer = (mode: Mode): Promise<number> => {
  switch (mode) {
    case "raw":
      return listen(rawServer())
    case "raw-verify":
      return listen(rawServer(verifier()))
    case "agent-none":
      return startAgent("none")
    case "agent-sig":
      return startAgent("mesh-sig")
    case "serve-echo":
      return startServeEcho()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Load generator (this process).

/** The i-th echo body: `{"message":"hello <i>","sessionId":"bench-<i>"}`. */
export const body = (i: number): Buffer => Buffer.from(JSON.stringify({ message: `hello ${i}`, sessionId: `bench-${i}` }))

/** A keep-alive `POST /v1/run` to 127.0.0.1:<port> with this JSON body and extra headers, as bytes. */
export const request = (port: number, payload: Buffer, headers: Readonly<Record<string, string>> = {}): Buffer =>
  Buffer.concat([
    Buffer.from(
      `POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n` +
        Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
        "Connection: keep-alive\r\n\r\n"
    ),
    payload
  ])

/** 1,000 unsigned echo requests to cycle through. */
export const unsigned = (port: number): Array<Buffer> => Array.from({ length: CYCLED }, (_, i) => request(port, body(i)))

/** `count` requests to `port`, each signed afresh (its own nonce) by the bench caller. */
const signed = (port: number, count: number): Promise<Array<Buffer>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const keys = yield* Keys
      const privateKey = yield* keys.importPrivateKey(CALLER_SEED)
      const url = `http://127.0.0.1:${port}/v1/run`
      const out: Array<Buffer> = new Array(count)
      for (let i = 0; i < count; i++) {
        const payload = body(i)
        const headers = yield* signRequest({ method: "POST", url, body: payload }, { privateKey, keyId: `${CALLER}#key-1`, ttlSeconds: 600 })
        out[i] = request(port, payload, headers)
      }
      return out
    }).pipe(Effect.provide(KeysNative.layer))
  )

/** A function source over a pool that hands out each request once, and fails if the pool runs dry. */
export const once = (pool: Array<Buffer>): ((i: number) => Buffer) => {
  let next = 0
  return () => {
    if (next >= pool.length) throw new Error(`the pool of ${pool.length} signed requests ran out`)
    const r = pool[next]!
    pool[next++] = Buffer.alloc(0)
    return r
  }
}

const profile = process.env["AGENT_BENCH_PROF"] === "1"

const server = (name: string, mode: Mode, requests: BenchServer["requests"], cap?: number): BenchServer => ({
  name,
  spawn: () => spawnServer({ module: fileURLToPath(import.meta.url), env: { AGENT_BENCH_SERVER: mode }, profile, profileName: `agent-bench-${mode}` }),
  requests,
  ...(cap === undefined ? {} : { cap })
})

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const all = [
    server("raw node:http echo", "raw", unsigned),
    server("raw node:http echo + crypto.verify", "raw-verify", (port) => signed(port, CYCLED)),
    server("agent POST /v1/run, auth none", "agent-none", unsigned),
    server(
      "agent POST /v1/run, auth mesh-sig",
      "agent-sig",
      async (port) => {
        const count = SIG_ROUND_CAP * (DEFAULT_ROUNDS.rounds + 1)
        const t0 = performance.now()
        const pool = await signed(port, count)
        console.log(`(signed ${count.toLocaleString("en-US")} requests for agent-sig in ${((performance.now() - t0) / 1000).toFixed(1)} s)`)
        return once(pool)
      },
      SIG_ROUND_CAP
    ),
    server("lean Serve echo (RunRequest schema, no agent)", "serve-echo", unsigned)
  ]
  const { wall, cpu, latency } = await measureAll(all, DEFAULT_ROUNDS)
  const rows = (ms: Array<Measurement>) => {
    const [raw, rawVerify, none, sig, serveEcho] = ms as [Measurement, Measurement, Measurement, Measurement, Measurement]
    return [
      { figure: none, baseline: raw, target: 0.4 },
      { figure: sig, baseline: rawVerify, target: 0.7 },
      { figure: rawVerify, baseline: raw },
      { figure: sig, baseline: none },
      { figure: serveEcho, baseline: raw },
      { figure: none, baseline: serveEcho }
    ]
  }
  report("agent", rows(wall))
  reportLatency("agent", latency)
  report("agent-cpu", rows(cpu))
}

const serverMode = process.env["AGENT_BENCH_SERVER"]
if (serverMode !== undefined) {
  await serveChild(() => startServer(serverMode as Mode))
} else if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run()
}
