/**
 * A2A: requests/s of A2A `message/send` (0.3 name) and `SendMessage` (1.0) on an agent server, beside `POST /v1/run`
 * on the same agent, and beside the official `@a2a-js/sdk` server (express, JSON-RPC, 0.3 compatibility on) with the
 * same handler. Targets: A2A on the agent ≥ 0.9× its `/v1/run`; ≥ 3× the SDK's server on the same method.
 *
 * The servers, each in its own child process (bench/load.ts: one core for the server, one for the load generator,
 * 32 keep-alive connections, 1 s warm-up, 7 interleaved rounds of 1 s, medians):
 * - `agent`: `AgentServer.make({ name: "bench", handler: ({ message }) => message, database: ":memory:" })`, auth
 *   none; one process answers `/v1/run`, and two more of the same answer `message/send` and `SendMessage` on `POST /`
 *   (a process per figure, so no figure shares its server's core with another). Load shedding on event-loop lag is
 *   off (`serving.maxEventLoopLagMs: Infinity`), as the SDK's server has none: a pause of the shared machine must
 *   not fail a round.
 * - `sdk`: `examples/a2a-sdk-agent.ts`, an express app with the SDK's `DefaultRequestHandler`, `InMemoryTaskStore`
 *   and an executor answering the message's text as a completed task with the text as its artifact (what the agent
 *   answers), for `message/send` and for `SendMessage` (`A2A-Version: 1.0`).
 *
 * Requests cycle through 1,000 bodies: `{"message":"hello <i>","sessionId":"bench-<i>"}` for `/v1/run`; for A2A a
 * user message with one text part `hello <i>`, context `bench-<i>`. Any non-200 fails the run. Reports `a2a`
 * (wall-clock) and `a2a-cpu` (requests per second of the server process's CPU time).
 * Run: `npm run bench -- a2a` (or `node --import ./bench/loader.mjs bench/a2a.ts`).
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as AgentServer from "../src/agent/AgentServer.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { startSdkAgent } from "../examples/a2a-sdk-agent.js"
import { type Measurement, report } from "./harness.js"
import { DEFAULT_ROUNDS, type BenchServer, measureAll, reportLatency, serveChild, spawnServer } from "./load.js"

const CYCLED = 1_000

type Mode = "agent" | "sdk"

const startServer = async (mode: Mode): Promise<number> => {
  if (mode === "sdk") return (await startSdkAgent({ reply: (text) => [text] })).port
  const scope = Effect.runSync(Scope.make())
  const agent = await Effect.runPromise(
    Scope.extend(
      AgentServer.make({ name: "bench", did: "did:mesh:bench", privateKey: new Uint8Array(32).fill(9), handler: ({ message }) => message, database: ":memory:", port: 0, serving: { maxEventLoopLagMs: Infinity } }),
      scope
    ).pipe(Effect.provide(KeysNative.layer))
  )
  return agent.port
}

const request = (port: number, target: string, payload: unknown, headers: Readonly<Record<string, string>> = {}): Buffer => {
  const body = Buffer.from(JSON.stringify(payload))
  return Buffer.concat([
    Buffer.from(
      `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
        Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
        "Connection: keep-alive\r\n\r\n"
    ),
    body
  ])
}

const runRequests = (port: number) => Array.from({ length: CYCLED }, (_, i) => request(port, "/v1/run", { message: `hello ${i}`, sessionId: `bench-${i}` }))

/** 1,000 A2A 0.3 `message/send` requests (`POST /`) to cycle through. */
export const legacySend = (port: number) =>
  Array.from({ length: CYCLED }, (_, i) =>
    request(port, "/", {
      jsonrpc: "2.0",
      id: i,
      method: "message/send",
      params: { message: { kind: "message", messageId: `m-${i}`, role: "user", contextId: `bench-${i}`, parts: [{ kind: "text", text: `hello ${i}` }] } }
    })
  )

const send = (port: number) =>
  Array.from({ length: CYCLED }, (_, i) =>
    request(
      port,
      "/",
      { jsonrpc: "2.0", id: i, method: "SendMessage", params: { message: { messageId: `m-${i}`, role: "ROLE_USER", contextId: `bench-${i}`, parts: [{ text: `hello ${i}` }] } } },
      { "A2A-Version": "1.0" }
    )
  )

const server = (name: string, mode: Mode, requests: BenchServer["requests"]): BenchServer => ({
  name,
  spawn: () => spawnServer({ module: fileURLToPath(import.meta.url), env: { A2A_BENCH_SERVER: mode }, profileName: `a2a-bench-${mode}` }),
  requests
})

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const all = [
    server("agent POST /v1/run", "agent", runRequests),
    server("agent A2A message/send", "agent", legacySend),
    server("agent A2A SendMessage (1.0)", "agent", send),
    server("@a2a-js/sdk express message/send", "sdk", legacySend),
    server("@a2a-js/sdk express SendMessage (1.0)", "sdk", send)
  ]
  const { wall, cpu, latency } = await measureAll(all, DEFAULT_ROUNDS)
  const rows = (ms: Array<Measurement>) => {
    const [v1run, legacy, v1, sdkLegacy, sdkV1] = ms as [Measurement, Measurement, Measurement, Measurement, Measurement]
    return [
      { figure: legacy, baseline: v1run, target: 0.9 },
      { figure: v1, baseline: v1run, target: 0.9 },
      { figure: legacy, baseline: sdkLegacy, target: 3 },
      { figure: v1, baseline: sdkV1, target: 3 }
    ]
  }
  report("a2a", rows(wall))
  reportLatency("a2a", latency)
  report("a2a-cpu", rows(cpu))
}

const serverMode = process.env["A2A_BENCH_SERVER"]
if (serverMode !== undefined) {
  await serveChild(() => startServer(serverMode as Mode))
} else if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await run()
}
