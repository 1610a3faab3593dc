/**
 * Saga overhead: the latency of one saga step beside one direct `callAgent` to the same agent, both from the hub's
 * process. Target: a step costs at most 1.5× a direct call (ratio of rates ≥ 0.667).
 *
 * Setup: `SagaHub.start` on a temp SQLite file (the durable engine, @effect/cluster `SingleRunner`), its runner and
 * one echo agent (mesh-sig, `database: ":memory:"`, resolving keys through the hub) registered, a buyer's intent of
 * 1,000,000 USD granted to the runner. Direct: `AgentClient.call(agentUrl, …, { signAs: runner })`, sequentially.
 * Saga: `scheduler.run` of a 5-step saga (each step 0.01 USD on the same agent), sequentially; a step's latency is
 * the saga's (submit to end) divided by 5, so it includes the allocation, the payment mandate, the journal, the
 * idempotent call with its commit token, the verification of the token and the release. Rounds interleave (20
 * direct calls, 10 calls as a step makes them, then 2 sagas), 7 rounds after a warm-up, medians of every call and every saga.
 *
 * Also printed: the same direct call carrying what a step's call carries (a payment mandate attenuated from the
 * buyer's, `commit` and an `Idempotency-Key`, fresh for each call), so the part of a step's cost that is the call's own
 * protocol work (the agent's idempotency record, its commit token) can be told from the scheduler's and the engine's.
 *
 * Also printed: the engine's floor, one activity that does nothing on the durable engine beside the in-memory engine
 * (a saga step is about one activity), so the engine's share of a step is told from the step's own work.
 *
 * Also printed: the rows the engine journals per step (inserts into `cluster_messages` and `cluster_replies`) and the
 * rows the scheduler writes per step (events; the step row's three updates are not counted).
 *
 * Run: `npm run bench -- saga` (or `node --import ./bench/loader.mjs bench/saga.ts`).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as AgentClient from "../src/agent/AgentClient.js"
import * as AgentServer from "../src/agent/AgentServer.js"
import { generateDid, type MeshIdentity } from "../src/core/Did.js"
import { attenuateToPayment, issueIntentMandate } from "../src/core/Mandate.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as SagaEngine from "../src/saga/SagaEngine.js"
import * as SagaHub from "../src/saga/SagaHub.js"
import * as Database from "../src/sql/Database.js"
import { median, report } from "./harness.js"
import { quietPool, withDatabase } from "./postgres.js"

const STEPS = 5

const JOURNAL = "SELECT (SELECT COUNT(*) FROM cluster_messages) + (SELECT COUNT(*) FROM cluster_replies) AS n"
const EVENTS = "SELECT COUNT(*) AS n FROM mesh_saga_events"

/** The rows the engine journaled and the events the scheduler wrote, so far. */
const count = (db: string) =>
  Effect.promise(async () => {
    if (db.startsWith("postgres")) {
      const pool = quietPool({ connectionString: db, max: 1 })
      try {
        const n = async (sql: string) => Number((await pool.query<{ n: string }>(sql)).rows[0]!.n)
        return { journal: await n(JOURNAL), events: await n(EVENTS) }
      } finally {
        await pool.end()
      }
    }
    const c = new BetterSqlite3(db, { readonly: true })
    try {
      const n = (sql: string) => (c.prepare(sql).get() as { n: number }).n
      const hasJournal = c.prepare("SELECT 1 FROM sqlite_master WHERE name = 'cluster_messages'").get() !== undefined
      return { journal: hasJournal ? n(JOURNAL) : 0, events: n(EVENTS) }
    } finally {
      c.close()
    }
  })

const program = (engine: "SQLite" | "Postgres", database: string) => Effect.gen(function* () {
  const runner = yield* generateDid("bench-runner")
  const hub = yield* SagaHub.start({ database, runner: { did: runner.did, privateKey: runner.privateKey }, outboundUrls: "any", ...(process.env.SAGA_BENCH_MEMORY === "1" ? { memoryEngine: true } : {}) })
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey })
  const register = (identity: MeshIdentity, endpointUrl: string) =>
    Effect.flatMap(registry.createApiKey({ owner: identity.did }), (key) =>
      registry.registerAgent({ identity, endpointUrl, manifest: { name: identity.did, meshProtocolVersion: "1.0", capabilities: ["echo"] }, apiKey: key.apiKey })
    )
  // The hub registers its own runner at start (src/saga/SagaRunnerRecord.ts).
  const echo = yield* generateDid("bench-echo")
  const agent = yield* AgentServer.make({ name: "echo", did: echo.did, privateKey: echo.privateKey, auth: "mesh-sig", hubUrl: hub.url, database: ":memory:", handler: ({ message }) => message })
  yield* register(echo, agent.url)
  const buyer = yield* generateDid("bench-buyer")
  yield* register(buyer, "http://127.0.0.1:9/buyer")
  const mandate = (yield* issueIntentMandate({ grantorDid: buyer.did, granteeDid: runner.did, constraints: { spendLimitUsd: 1_000_000 }, privateKey: buyer.privateKey })).token
  const client = yield* AgentClient.make()
  const steps = Array.from({ length: STEPS }, (_, i) => ({ name: `s${i}`, agentDid: echo.did, capability: "echo", budgetUsd: 0.01 }))

  const direct = (samples: Array<number>) =>
    Effect.gen(function* () {
      const t0 = performance.now()
      yield* client.call(agent.url, "echo", { signAs: runner })
      samples.push(performance.now() - t0)
    })
  const child = (yield* attenuateToPayment({ parent: mandate, granteeDid: echo.did, amountUsd: 0.01, merchant: echo.did, grantorPrivateKey: runner.privateKey })).token
  let twinSeq = 0
  const twin = (samples: Array<number>) =>
    Effect.gen(function* () {
      const step = `t${++twinSeq}`
      const t0 = performance.now()
      yield* client.call(agent.url, "echo", {
        signAs: runner,
        mandate: child,
        capability: "echo",
        context: { sagaId: "bench", step, params: {} },
        commit: { sagaId: "bench", step, amountUsd: "0.01" },
        idempotencyKey: `bench:${step}`
      })
      samples.push(performance.now() - t0)
    })
  const saga = (samples: Array<number>) =>
    Effect.gen(function* () {
      const t0 = performance.now()
      const r = yield* hub.scheduler.run(buyer.did, { mandate, steps })
      if (r.status !== "committed") return yield* Effect.dieMessage(`saga ended ${r.status}: ${JSON.stringify(r)}`)
      samples.push((performance.now() - t0) / STEPS)
    })

  const warm: Array<number> = []
  for (let i = 0; i < 40; i++) yield* direct(warm)
  for (let i = 0; i < 10; i++) yield* twin(warm)
  for (let i = 0; i < 4; i++) yield* saga(warm)
  const before = yield* count(database)
  const calls: Array<number> = []
  const twins: Array<number> = []
  const perStep: Array<number> = []
  for (let round = 0; round < 7; round++) {
    for (let i = 0; i < 20; i++) yield* direct(calls)
    for (let i = 0; i < 10; i++) yield* twin(twins)
    for (let i = 0; i < 2; i++) yield* saga(perStep)
  }
  const after = yield* count(database)
  const stepsRun = perStep.length * STEPS
  const d = median(calls)
  const s = median(perStep)
  console.log(`\n${engine}: direct callAgent median ${d.toFixed(2)} ms; saga step median ${s.toFixed(2)} ms (${(s / d).toFixed(2)}× a direct call)`)
  console.log(`direct call with a step's mandate, commit and Idempotency-Key: median ${median(twins).toFixed(2)} ms (${(median(twins) / d).toFixed(2)}× a direct call)`)
  console.log(`journal rows per step (cluster_messages + cluster_replies): ${((after.journal - before.journal) / stepsRun).toFixed(1)}; saga events per step: ${((after.events - before.events) / stepsRun).toFixed(1)}`)
  return [
    { figure: { name: `saga step on ${engine} (steps/s, ${STEPS}-step sagas)`, opsPerSecond: 1000 / s }, baseline: { name: "direct callAgent (calls/s)", opsPerSecond: 1000 / d }, target: engine === "SQLite" ? 0.667 : 0.5 },
    { figure: { name: `saga step on ${engine}`, opsPerSecond: 1000 / s }, baseline: { name: "direct call with a step's mandate and commit", opsPerSecond: 1000 / median(twins) } }
  ]
}).pipe(
  Effect.scoped,
  Effect.provide(Layer.merge(FetchHttpClient.layer, KeysNative.layer)),
  Logger.withMinimumLogLevel(LogLevel.Error)
)

const FLOOR_ACTIVITIES = 20
const Floor = Workflow.make({ name: "bench-floor", payload: { id: Schema.String }, success: Schema.Number, idempotencyKey: ({ id }) => id })
const FloorLive = Floor.toLayer(() =>
  Effect.gen(function* () {
    let sum = 0
    for (let i = 0; i < FLOOR_ACTIVITIES; i++) sum += yield* Activity.make({ name: `a${i}`, success: Schema.Number, execute: Effect.succeed(i) })
    return sum
  })
)
let floorRun = 0

/**
 * The engine's own cost: one activity that does nothing, in a workflow of 20, on the durable engine the hub runs
 * sagas on (single runner over `database`) beside the in-memory engine; per activity, wall-clock median of 15
 * workflows after one warm-up, and the process's CPU per activity. A saga step is about one activity.
 */
const engineFloor = (engine: "SQLite" | "Postgres", database: string) => {
  const perActivity = (layer: Layer.Layer<WorkflowEngine.WorkflowEngine>) =>
    Effect.gen(function* () {
      const tag = `${engine}-${++floorRun}-${Date.now()}`
      yield* Floor.execute({ id: `${tag}-warm` })
      const samples: Array<number> = []
      const cpu0 = process.cpuUsage()
      for (let i = 0; i < 15; i++) {
        const t0 = performance.now()
        yield* Floor.execute({ id: `${tag}-${i}` })
        samples.push((performance.now() - t0) / FLOOR_ACTIVITIES)
      }
      const cpu = process.cpuUsage(cpu0)
      return { ms: median(samples), cpuMs: (cpu.user + cpu.system) / 1000 / (15 * FLOOR_ACTIVITIES) }
    }).pipe(Effect.provide(FloorLive), Effect.provide(layer), Effect.scoped)
  return Effect.gen(function* () {
    const memory = yield* perActivity(WorkflowEngine.layerMemory)
    const durable = yield* perActivity(SagaEngine.layerSingle.pipe(Layer.provide(Layer.orDie(Database.layer(database)))))
    console.log(
      `${engine}: an activity that does nothing costs ${durable.ms.toFixed(2)} ms on the durable engine (${durable.cpuMs.toFixed(2)} ms CPU), ` +
        `${memory.ms.toFixed(2)} ms on the in-memory engine (${memory.cpuMs.toFixed(2)} ms CPU)`
    )
    return { figure: { name: `empty activity, durable engine on ${engine} (/s)`, opsPerSecond: 1000 / durable.ms }, baseline: { name: "empty activity, in-memory engine (/s)", opsPerSecond: 1000 / memory.ms } }
  })
}

/** Runs the suite: on a SQLite file, then (when a server answers) on a fresh Postgres database. */
export const run = async (): Promise<void> => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-saga-")), "hub.db")
  const rows = [...await Effect.runPromise(program("SQLite", file)), await Effect.runPromise(engineFloor("SQLite", file))]
  const pgRows = await withDatabase((url) => Effect.runPromise(Effect.zipWith(program("Postgres", url), engineFloor("Postgres", url), (r, f) => [...r, f]))).catch((e: unknown) => {
    console.log(`saga on Postgres: not run (${e instanceof Error ? e.message : String(e)})`)
    return []
  })
  report("saga", [...rows, ...pgRows])
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
