/**
 * Sagas on a cluster of runners, as users run it: `mesh hub` processes (the built binary, defaults except what a
 * cluster needs: `--db <postgres>`, `--saga-identity`, `--runner-address`, and `--outbound-urls any` since the agents
 * listen on 127.0.0.1) on one fresh Postgres database, three counting agents in this process.
 *
 * - Throughput: 60 three-step sagas from 10 buyers, submitted round-robin to the hubs (16 at once, a refused
 *   submission sent again), timed from the first submission to the last saga's end; with 1, 2 and 3 hubs. Printed
 *   beside the single hub's figure of the same run.
 * - Failover: 24 sagas of 30 steps run on 3 hubs; once they are all under way one hub is killed (SIGKILL). For each
 *   saga, the time from the kill to its next event; the largest is the time the killed runner's sagas waited for
 *   another runner (the default failover bound is 10 s).
 *
 * Run: `npm run build && npm run bench -- saga-cluster` (needs Postgres at 127.0.0.1:5432 or MESH_TEST_POSTGRES_URL).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schedule from "effect/Schedule"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as AgentServer from "../src/agent/AgentServer.js"
import { identityFileOf } from "../src/cli/Cli.js"
import { generateDid, type MeshIdentity } from "../src/core/Did.js"
import { issueIntentMandate } from "../src/core/Mandate.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { signedRequest } from "../test/saga/support.js"
import { quietPool, withDatabase } from "./postgres.js"
import { report } from "./harness.js"

const bin = path.resolve("dist/bin/mesh.js")

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

interface Hub {
  readonly proc: ChildProcess
  readonly url: string
  readonly adminKey: string | undefined
}

const startHub = async (db: string, identityFile: string): Promise<Hub> => {
  const runnerPort = await freePort()
  const proc = spawn(process.execPath, [bin, "hub", "--db", db, "--port", "0", "--saga-identity", identityFile, "--runner-address", `127.0.0.1:${runnerPort}`, "--outbound-urls", "any"], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  return new Promise((resolve, reject) => {
    let out = ""
    let started = false
    proc.stdout!.on("data", (d: Buffer) => {
      // The access log keeps writing: drained, kept only until the start-up lines are read.
      if (started) return
      out += d.toString()
      if (/\n {2}database [^\n]*\n/.test(out)) {
        started = true
        resolve({ proc, url: /listening on (http:\/\/\S+)/.exec(out)![1]!, adminKey: /admin credential[^\n]*\n(mk_\S+)/.exec(out)?.[1] })
      }
    })
    proc.stderr!.resume()
    proc.on("exit", (code) => started || reject(new Error(`hub exited with ${code}: ${out}`)))
  })
}

/** A cluster of `n` hubs on a fresh database, with agents, buyers and the runner registered. */
const cluster = (n: number, dbUrl: string) =>
  Effect.gen(function* () {
    const db = { url: dbUrl }
    const pool = yield* Effect.acquireRelease(Effect.sync(() => quietPool({ connectionString: dbUrl, max: 2 })), (p) => Effect.promise(() => p.end()))
    const runner = yield* generateDid("saga-runner")
    const identityFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-cluster-")), "runner.json")
    fs.writeFileSync(identityFile, JSON.stringify(identityFileOf(runner)))
    const hubs: Array<Hub> = []
    for (let i = 0; i < n; i++) hubs.push(yield* Effect.acquireRelease(Effect.promise(() => startHub(db.url, identityFile)), (h) => Effect.sync(() => void h.proc.kill("SIGKILL"))))
    const admin = yield* MeshClient.make({ hubUrl: hubs[0]!.url, apiKey: hubs.find((h) => h.adminKey !== undefined)!.adminKey!, retry: { times: 4 } })
    const register = (identity: MeshIdentity, endpointUrl: string) =>
      Effect.flatMap(admin.createApiKey({ owner: identity.did }), (key) =>
        admin.registerAgent({ identity, endpointUrl, manifest: { name: identity.did.slice(9), meshProtocolVersion: "1.0", capabilities: ["saga"] }, apiKey: key.apiKey }))
    yield* register(runner, "http://127.0.0.1:9/runner")
    const agents: Array<MeshIdentity> = []
    for (const name of ["airline", "hotel", "rental"]) {
      const identity = yield* generateDid(name)
      const server = yield* AgentServer.make({
        name, did: identity.did, privateKey: identity.privateKey, auth: "mesh-sig", hubUrl: hubs[0]!.url, database: ":memory:",
        serving: { maxEventLoopLagMs: Infinity }, handler: ({ reportCost }) => { reportCost(0.01); return "done" }
      })
      yield* register(identity, server.url)
      agents.push(identity)
    }
    const buyers = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) =>
      Effect.gen(function* () {
        const identity = yield* generateDid(`buyer-${i}`)
        yield* register(identity, "http://127.0.0.1:9/buyer")
        const mandate = yield* issueIntentMandate({ grantorDid: identity.did, granteeDid: runner.did, constraints: { spendLimitUsd: 10_000 }, privateKey: identity.privateKey })
        return { identity, mandate: mandate.token }
      }))
    const submit = (i: number, steps: number) =>
      Effect.gen(function* () {
        const buyer = buyers[i % buyers.length]!
        const plan = Array.from({ length: steps }, (_, s) => ({ name: `s${s}`, agentDid: agents[s % agents.length]!.did, capability: "book", budgetUsd: 0.05 }))
        const hub = hubs[i % hubs.length]!
        return yield* signedRequest(`${hub.url}/v1/sagas`, "POST", buyer.identity, { mandate: buyer.mandate, steps: plan }).pipe(
          Effect.flatMap((r) => (r.status === 202 ? Effect.succeed(String(r.body.sagaId)) : Effect.fail(r))),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(2_000)))),
          Effect.orDie
        )
      })
    const query = <A>(text: string, values: ReadonlyArray<unknown> = []) => Effect.promise(() => pool.query<A>(text, values)).pipe(Effect.map((r) => r.rows))
    const allEnded = (count: number) =>
      query<{ n: string }>("SELECT COUNT(*) AS n FROM mesh_sagas WHERE status <> 'running'").pipe(
        Effect.flatMap((rows) => (Number(rows[0]!.n) >= count ? Effect.void : Effect.fail("running"))),
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(6_000)))),
        Effect.orDie
      )
    return { hubs, submit, allEnded, query }
  })

const SAGAS = 60

const provideAll = <A, E, R>(e: Effect.Effect<A, E, R>) =>
  e.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer), Logger.withMinimumLogLevel(LogLevel.Error), Effect.orDie) as Effect.Effect<A>

/** Runs `f` on a fresh database, dropped afterwards. */
const onFreshDatabase = <A>(f: (url: string) => Effect.Effect<A, never, never>) => Effect.promise(() => withDatabase((url) => Effect.runPromise(f(url))))

const throughput = (n: number) =>
  onFreshDatabase((url) => Effect.scoped(
    Effect.gen(function* () {
      const c = yield* cluster(n, url)
      const t0 = performance.now()
      yield* Effect.forEach(Array.from({ length: SAGAS }, (_, i) => i), (i) => c.submit(i, 3), { concurrency: 16, discard: true })
      yield* c.allEnded(SAGAS)
      const perSecond = SAGAS / ((performance.now() - t0) / 1000)
      console.log(`${n} hub(s): ${perSecond.toFixed(1)} sagas/s (${SAGAS} sagas of 3 steps)`)
      return perSecond
    })
  ).pipe(provideAll))

const failover = () =>
  onFreshDatabase((url) => Effect.scoped(
    Effect.gen(function* () {
      const c = yield* cluster(3, url)
      const count = 24
      yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) => c.submit(i, 30), { concurrency: 8, discard: true })
      // Every saga under way: each has committed a step.
      yield* c.query<{ n: string }>("SELECT COUNT(DISTINCT saga_id) AS n FROM mesh_saga_events WHERE type = 'step_committed'").pipe(
        Effect.flatMap((rows) => (Number(rows[0]!.n) >= count ? Effect.void : Effect.fail("starting"))),
        Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.intersect(Schedule.recurs(3_000)))),
        Effect.orDie
      )
      const killedAt = Date.now()
      c.hubs[1]!.proc.kill("SIGKILL")
      yield* c.allEnded(count)
      const rows = yield* c.query<{ saga_id: string; first: string }>("SELECT saga_id, MIN(at) AS first FROM mesh_saga_events WHERE at > $1 GROUP BY saga_id", [killedAt])
      const waits = rows.map((r) => Number(r.first) - killedAt).sort((a, b) => a - b)
      const moved = waits.filter((w) => w > 1_000)
      console.log(`failover: ${moved.length} of ${count} sagas waited for another runner; longest wait ${waits[waits.length - 1]} ms after the kill (the others resumed within ${Math.max(0, ...waits.filter((w) => w <= 1_000))} ms)`)
      return waits[waits.length - 1]!
    })
  ).pipe(provideAll))

const program = Effect.gen(function* () {
  if (!fs.existsSync(bin)) return yield* Effect.dieMessage("build first: npm run build")
  const one = yield* throughput(1)
  const two = yield* throughput(2)
  const three = yield* throughput(3)
  const waited = yield* failover()
  report("saga-cluster", [
    { figure: { name: "sagas/s, 2 hubs (runners)", opsPerSecond: two }, baseline: { name: "sagas/s, 1 hub", opsPerSecond: one } },
    { figure: { name: "sagas/s, 3 hubs (runners)", opsPerSecond: three }, baseline: { name: "sagas/s, 1 hub", opsPerSecond: one } },
    // As rates, so the ratio reads as a fraction of the bound: ≥ 1 means the sagas moved within the failover bound.
    { figure: { name: "1 / failover wait (kill to next step)", opsPerSecond: 1000 / waited }, baseline: { name: "1 / default failover bound (10 s)", opsPerSecond: 0.1 } }
  ])
})

/** Runs the suite. */
export const run = (): Promise<void> => Effect.runPromise(program)

if (import.meta.url === `file://${process.argv[1]}`) await run()
