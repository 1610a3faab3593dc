/**
 * What observability costs on the serving path (docs/operations.md): requests/s of the lean `Serve` alone (a
 * one-endpoint echo) and of an agent's `POST /v1/run` (echo handler, auth none, `:memory:`), each served by this
 * tree with tracing off beside the same server built from the tree just before the tracing code was added (the
 * parent of the commit that added `src/http/Tracing.ts`, or `TRACING_BENCH_BASE=<rev>`), extracted with `git
 * archive` into `scratchpad/bench-base/<rev>/`. The figure "tracing off vs no tracing code" is that ratio; the
 * request counters of `/metrics` are always on, so they are inside it. A third row puts the agent with tracing on
 * (every span made, handed to a no-op processor) beside tracing off. The access log is off in all of them.
 *
 * Setup, rounds and reports are bench/load.ts's (each server a child process, interleaved rounds, medians), like
 * bench/http.ts. Run: `node --import ./bench/loader.mjs bench/tracing.ts` (or `npm run bench -- tracing`).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { report, type Measurement } from "./harness.js"
import { DEFAULT_ROUNDS, measureAll, reportLatency, serveChild, spawnServer, type BenchServer } from "./load.js"

type Mode = "serve" | "agent" | "agent-traced"

const here = fileURLToPath(import.meta.url)
const root = path.resolve(path.dirname(here), "..")

// ---------------------------------------------------------------------------------------------------------------
// The echo the Serve rows answer: one JSON endpoint, decoded and encoded by HttpApi.

const Run = Schema.Struct({ message: Schema.String, sessionId: Schema.String })
class EchoApi extends HttpApi.make("echo").add(HttpApiGroup.make("echo").add(HttpApiEndpoint.post("echo", "/echo").setPayload(Run).addSuccess(Run))) {}
const echoHandlers = HttpApiBuilder.group(EchoApi, "echo", (h) => h.handle("echo", ({ payload }) => Effect.succeed(payload)))

// ---------------------------------------------------------------------------------------------------------------
// Server side (child process): the modules come from the tree named by TRACING_BENCH_SRC.

const startServer = async (mode: Mode, src: string): Promise<number> => {
  const load = async <T>(module: string): Promise<T> => (await import(pathToFileURL(path.join(src, module)).href)) as T
  const KeysNative = await load<typeof import("../src/node/KeysNative.js")>("node/KeysNative.ts")
  const scope = Effect.runSync(Scope.make())
  if (mode === "serve") {
    const Serve = await load<typeof import("../src/http/Serve.js")>("http/Serve.ts")
    const server = await Effect.runPromise(Scope.extend(Serve.make(EchoApi, echoHandlers, { maxEventLoopLagMs: Infinity }), scope))
    return server.port
  }
  const AgentServer = await load<typeof import("../src/agent/AgentServer.js")>("agent/AgentServer.ts")
  let tracing: Layer.Layer<never> = Layer.empty
  if (mode === "agent-traced") {
    const Telemetry = await import("../src/http/Telemetry.js")
    const { NoopSpanProcessor } = await import("@opentelemetry/sdk-trace-base")
    tracing = Telemetry.layer({ serviceName: "bench", spanProcessor: new NoopSpanProcessor() })
  }
  const agent = await Effect.runPromise(
    Scope.extend(
      AgentServer.make({ name: "bench", did: "did:mesh:bench", privateKey: new Uint8Array(32).fill(3), handler: ({ message }) => message, database: ":memory:", serving: { maxEventLoopLagMs: Infinity } }),
      scope
    ).pipe(Effect.provide(Layer.merge(KeysNative.layer, tracing)))
  )
  return agent.port
}

// ---------------------------------------------------------------------------------------------------------------
// Load generator (this process).

/** The tree before the tracing code: `TRACING_BENCH_BASE`, else the parent of the commit that added Tracing.ts. */
const baseTree = (): { readonly rev: string; readonly src: string } => {
  const git = (...args: Array<string>) => execFileSync("git", args, { cwd: root, encoding: "utf8" }).trim()
  const added = git("log", "--diff-filter=A", "--format=%H", "--", "src/http/Tracing.ts").split("\n").pop()
  const rev = git("rev-parse", "--short", process.env["TRACING_BENCH_BASE"] ?? `${added}^`)
  const dir = path.join(root, "scratchpad", "bench-base", rev)
  if (!fs.existsSync(path.join(dir, "src"))) {
    fs.mkdirSync(dir, { recursive: true })
    execFileSync("sh", ["-c", `git archive ${rev} src | tar -x -C ${JSON.stringify(dir)}`], { cwd: root })
  }
  return { rev, src: path.join(dir, "src") }
}

const body = (i: number): Buffer => Buffer.from(JSON.stringify({ message: `hello ${i}`, sessionId: `bench-${i}` }))
const request = (port: number, p: string, payload: Buffer): Buffer =>
  Buffer.concat([
    Buffer.from(`POST ${p} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\nConnection: keep-alive\r\n\r\n`),
    payload
  ])

const server = (name: string, mode: Mode, src: string): BenchServer => ({
  name,
  spawn: () => spawnServer({ module: here, env: { TRACING_BENCH_SERVER: mode, TRACING_BENCH_SRC: src } }),
  requests: (port) => Array.from({ length: 1000 }, (_, i) => request(port, mode === "serve" ? "/echo" : "/v1/run", body(i)))
})

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const base = baseTree()
  const src = path.join(root, "src")
  const all = [
    server("Serve echo, tracing off", "serve", src),
    server(`Serve echo, before tracing (${base.rev})`, "serve", base.src),
    server("agent /v1/run, tracing off", "agent", src),
    server(`agent /v1/run, before tracing (${base.rev})`, "agent", base.src),
    server("agent /v1/run, tracing on (no-op export)", "agent-traced", src)
  ]
  const { cpu, latency, wall } = await measureAll(all, DEFAULT_ROUNDS)
  const rows = (ms: Array<Measurement>) => {
    const [serve, serveBase, agent, agentBase, traced] = ms as [Measurement, Measurement, Measurement, Measurement, Measurement]
    return [
      { figure: serve, baseline: serveBase, target: 0.95 },
      { figure: agent, baseline: agentBase, target: 0.95 },
      { figure: traced, baseline: agent }
    ]
  }
  report("tracing", rows(wall))
  report("tracing-cpu", rows(cpu))
  reportLatency("tracing", latency)
}

const serverMode = process.env["TRACING_BENCH_SERVER"]
if (serverMode !== undefined) {
  await serveChild(() => startServer(serverMode as Mode, process.env["TRACING_BENCH_SRC"] ?? path.join(root, "src")))
} else if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === here) {
  await run()
}
