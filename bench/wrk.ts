/**
 * Is the load generator telling the truth? The same two servers loaded by bench/load.ts's raw-socket generator and
 * by wrk, alternately, side by side: raw node:http (the echo every HTTP suite compares against) and an agent's
 * `POST /v1/run` with auth none (a mesh figure). 32 keep-alive connections (the in-process suites') and 50
 * (bench/shipped.ts's), each server at both; wrk with one thread. Pinned as
 * load.ts pins: the server on CPU 1, the generator and wrk on CPU 0. If the generator's req/s is well below wrk's on
 * raw node:http, the HTTP suites measured the generator, not the server. Needs wrk on PATH (apt-get install wrk);
 * without it the suite says so and measures nothing. Run: `npm run bench -- wrk` (not part of the default run).
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import { spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as Http from "node:http"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as AgentServer from "../src/agent/AgentServer.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { median, saveResult } from "./harness.js"
import { pinning, quantile, runLoad, serveChild, spawnServer, stopServer } from "./load.js"

type Mode = "raw" | "agent"
const ROUNDS = 3
const SECONDS = 3
/** The connection counts the suites load with: 32 (load.ts default), 50 (shipped). */
const CONNECTIONS = [32, 50] as const
const PAYLOAD = JSON.stringify({ message: "hello", sessionId: "bench-1" })

const startServer = (mode: Mode): Promise<number> => {
  if (mode === "raw") {
    const server = Http.createServer({ keepAlive: true }, (req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const payload = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { message: string; sessionId?: string }
        const body = JSON.stringify({ message: payload.message, sessionId: payload.sessionId ?? crypto.randomUUID() })
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        res.end(body)
      })
    })
    return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  }
  const scope = Effect.runSync(Scope.make())
  return Effect.runPromise(
    Scope.extend(
      AgentServer.make({ name: "bench", did: "did:mesh:bench", privateKey: new Uint8Array(32).fill(9), handler: ({ message }) => message, database: ":memory:", port: 0 }),
      scope
    ).pipe(Effect.provide(KeysNative.layer))
  ).then((a) => a.port)
}

const request = (port: number): Buffer =>
  Buffer.from(
    `POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(PAYLOAD)}\r\nConnection: keep-alive\r\n\r\n${PAYLOAD}`
  )

interface Figure {
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
}

const ours = async (port: number, connections: number): Promise<Figure> => {
  const result = await runLoad(port, [request(port)], { ms: SECONDS * 1000, cap: 10_000_000, connections })
  if (result.failed > 0) throw new Error(`generator: ${result.failed} failed; first: ${result.firstError}`)
  const sorted = result.latenciesMs.sort((a, b) => a - b)
  return { requestsPerSecond: result.ok / SECONDS, p50Ms: quantile(sorted, 0.5), p99Ms: quantile(sorted, 0.99) }
}

/** wrk's "50%  1.23ms" style figures, in ms. */
const wrkMs = (text: string, label: string): number => {
  const m = new RegExp(`^\\s*${label}\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(text)
  if (m === null) return NaN
  const v = Number(m[1])
  return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v
}

const wrk = (port: number, connections: number, script: string, cpu: number | undefined): Figure => {
  const args = ["-t1", `-c${connections}`, `-d${SECONDS}s`, "--latency", "-s", script, `http://127.0.0.1:${port}/v1/run`]
  const r = cpu === undefined ? spawnSync("wrk", args, { encoding: "utf8" }) : spawnSync("taskset", ["-c", String(cpu), "wrk", ...args], { encoding: "utf8" })
  const out = `${r.stdout}${r.stderr}`
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)
  if (r.status !== 0 || rps === null) throw new Error(`wrk failed:\n${out}`)
  if (/Non-2xx or 3xx responses/.test(out)) throw new Error(`wrk saw errors:\n${out}`)
  return { requestsPerSecond: Number(rps[1]), p50Ms: wrkMs(out, "50%"), p99Ms: wrkMs(out, "99%") }
}

const fmt = (f: Figure) => `${Math.round(f.requestsPerSecond).toLocaleString("en-US").padStart(8)} req/s  p50 ${f.p50Ms.toFixed(2).padStart(6)} ms  p99 ${f.p99Ms.toFixed(2).padStart(6)} ms`

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const found = spawnSync("wrk", ["--version"], { encoding: "utf8" })
  if (found.error !== undefined) {
    console.log("\n## wrk\nwrk is not on PATH (apt-get install wrk): no cross-check made")
    return
  }
  const placed = pinning()
  const script = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-wrk-")), "post.lua")
  fs.writeFileSync(script, `wrk.method = "POST"\nwrk.body = '${PAYLOAD}'\nwrk.headers["Content-Type"] = "application/json"\n`)
  const rows: Array<{ server: string; connections: number; generator: Figure; wrk: Figure; ratio: number }> = []
  for (const [name, mode] of [["raw node:http echo", "raw"], ["agent POST /v1/run, auth none", "agent"]] as const) {
    const { child, port } = await spawnServer({ module: fileURLToPath(import.meta.url), env: { WRK_BENCH_SERVER: mode } })
    try {
      await ours(port, CONNECTIONS[0]) // warm-up
      for (const connections of CONNECTIONS) {
        const gen: Array<Figure> = []
        const w: Array<Figure> = []
        for (let r = 0; r < ROUNDS; r++) {
          gen.push(await ours(port, connections))
          w.push(wrk(port, connections, script, placed.generatorCpu))
        }
        const pick = (fs: Array<Figure>): Figure => ({
          requestsPerSecond: median(fs.map((f) => f.requestsPerSecond)),
          p50Ms: median(fs.map((f) => f.p50Ms)),
          p99Ms: median(fs.map((f) => f.p99Ms))
        })
        rows.push({ server: name, connections, generator: pick(gen), wrk: pick(w), ratio: pick(gen).requestsPerSecond / pick(w).requestsPerSecond })
      }
    } finally {
      await stopServer(child)
    }
  }
  console.log(`\n## wrk (medians of ${ROUNDS} alternating rounds of ${SECONDS} s; ${found.stdout.split("\n")[0]?.trim()})`)
  for (const { server, connections, generator, wrk: w, ratio } of rows) {
    console.log(`${`${server}, ${connections} connections`.padEnd(48)} generator ${fmt(generator)}   wrk ${fmt(w)}   generator/wrk ${ratio.toFixed(3)}${ratio < 0.9 ? "  (the generator is the bottleneck here)" : ""}`)
  }
  saveResult("wrk", { rows })
}

const serverMode = process.env["WRK_BENCH_SERVER"]
if (serverMode !== undefined) await serveChild(() => startServer(serverMode as Mode))
