/**
 * A hub running sagas is killed (SIGKILL) in a separate process, then restarted on the same SQLite file; the agents
 * run in this process and count what their handlers did. Nothing here sleeps for a fixed time: each wait is on
 * something observable (a handler entered, an event in the hub's database, the saga's status), polled a bounded
 * number of times.
 */
import { assert, describe, it } from "@effect/vitest"
import BetterSqlite3 from "better-sqlite3"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { type ChildProcessByStdio, spawn } from "node:child_process"
import * as path from "node:path"
import type { Readable } from "node:stream"
import * as AgentServer from "../../src/agent/AgentServer.js"
import type { RunInput } from "../../src/agent/Handler.js"
import * as CommitToken from "../../src/core/CommitToken.js"
import { generateDid, importIdentity, type MeshIdentity } from "../../src/core/Did.js"
import { randomBytes } from "../../src/core/internal/bytes.js"
import { issueIntentMandate } from "../../src/core/Mandate.js"
import { makeStatic } from "../../src/core/KeyResolver.js"
import * as Reconciliation from "../../src/core/Reconciliation.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { tempDatabase } from "../hub/support.js"
import { countingHandler, type Effects, register, signedRequest, step } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))
const script = path.resolve("test/support/sagaHubProcess.ts")

/** Starts the hub process (scoped: killed when the test ends) and reads its URL (and admin key, on a first start). */
const spawnHub = (database: string, port: number, seedHex: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly child: ChildProcessByStdio<null, Readable, Readable>; readonly url: string; readonly admin: string | undefined }, Error>((resume) => {
      const child = spawn(process.execPath, ["--import", "tsx", script, database, String(port), seedHex], { stdio: ["ignore", "pipe", "pipe"] })
      let out = ""
      let err = ""
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString()
        const url = /listening (\S+)/.exec(out)?.[1]
        if (url !== undefined) resume(Effect.succeed({ child, url, admin: /admin (\S+)/.exec(out)?.[1] }))
      })
      child.stderr.on("data", (d: Buffer) => (err += d.toString()))
      child.on("exit", (code) => resume(Effect.fail(new Error(`hub process exited (${code}): ${err}`))))
    }),
    ({ child }) => Effect.sync(() => void child.kill("SIGKILL"))
  )

const killed = (child: ChildProcessByStdio<null, Readable, Readable>) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

/** Polls `check` until it returns a value (at most ~30 s). */
const eventually = <A>(check: Effect.Effect<A | undefined>) =>
  Effect.flatMap(check, (a) => (a === undefined ? Effect.fail("not yet" as const) : Effect.succeed(a))).pipe(
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(300)))),
    Effect.orDie
  )

/** An event of the saga, read straight from the hub's database (another process may be writing it). */
const hasEvent = (database: string, sagaId: string, type: string, stepName: string) =>
  Effect.sync(() => {
    const db = new BetterSqlite3(database, { readonly: true, fileMustExist: true })
    try {
      return db.prepare("SELECT 1 FROM mesh_saga_events WHERE saga_id = ? AND type = ? AND step = ?").get(sagaId, type, stepName) === undefined ? undefined : true
    } finally {
      db.close()
    }
  })

/**
 * The crash: a hub process starts a three-step saga, is killed at `killAt`, and is restarted on the same file; the
 * saga must end committed, each handler having run once, the pool holding exactly what was used, every commit
 * token verifying.
 */
const crashAndRecover = (killAt: "between-steps" | "inside-step") =>
  Effect.gen(function* () {
    const database = tempDatabase()
    const seed = randomBytes(32)
    const seedHex = Buffer.from(seed).toString("hex")
    const first = yield* spawnHub(database, 0, seedHex)
    const port = Number(new URL(first.url).port)
    const client = yield* MeshClient.make({ hubUrl: first.url, apiKey: first.admin!, retry: { times: 2 } }).pipe(Effect.provide(FetchHttpClient.layer))
    const runner = yield* importIdentity("did:mesh:saga-runner", seed)
    // The hub registered its runner when it started.

    // The hotel's handler waits at a gate inside the step, so the hub can be killed while the call is in flight.
    const effects: Effects = new Map()
    const entered = yield* Deferred.make<void>()
    const gate = yield* Deferred.make<void>()
    const agents: Record<string, MeshIdentity> = {}
    for (const name of ["airline", "hotel", "rental"]) {
      const identity = yield* generateDid(name)
      const counting = countingHandler(effects, { name })
      const handler =
        name === "hotel" && killAt === "inside-step"
          ? async (input: RunInput) => {
              const reply = counting(input)
              await Effect.runPromise(Deferred.succeed(entered, undefined))
              await Effect.runPromise(Deferred.await(gate))
              return reply
            }
          : counting
      const server = yield* AgentServer.make({ name, did: identity.did, privateKey: identity.privateKey, auth: "mesh-sig", hubUrl: first.url, database: ":memory:", handler })
      yield* register(client, identity, server.url)
      agents[name] = identity
    }
    const buyer = yield* generateDid("buyer")
    yield* register(client, buyer, "http://127.0.0.1:9/buyer")
    const mandate = yield* issueIntentMandate({ grantorDid: buyer.did, granteeDid: runner.did, constraints: { spendLimitUsd: 100 }, privateKey: buyer.privateKey })
    const steps = [
      step(agents, "flight", "airline", "book-flight", 30, 25),
      step(agents, "hotel", "hotel", "book-hotel", 20),
      step(agents, "car", "rental", "book-car", 10, 4)
    ]
    const started = yield* signedRequest(`${first.url}/v1/sagas`, "POST", buyer, { mandate: mandate.token, steps })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const sagaId = String(started.body.sagaId)

    if (killAt === "inside-step") {
      yield* Deferred.await(entered)
      yield* killed(first.child)
      // The handler finishes after the hub died: its reply is stored under the step's idempotency key, unseen.
      yield* Deferred.succeed(gate, undefined)
    } else {
      // As soon as the flight's commit is journaled: the hotel's call may or may not have been sent.
      yield* eventually(hasEvent(database, sagaId, "step_committed", "flight"))
      yield* killed(first.child)
    }

    const second = yield* spawnHub(database, port, seedHex)
    const ended = yield* eventually(
      Effect.map(signedRequest(`${second.url}/v1/sagas/${sagaId}`, "GET", buyer), (r) => (r.status === 200 && r.body.status !== "running" ? r.body : undefined))
    )
    assert.strictEqual(ended.status, "committed", JSON.stringify(ended))
    // No handler ran twice, and every step ran.
    assert.deepStrictEqual(
      [...effects.entries()].sort(),
      [
        [`${sagaId}|car|book-car`, 1],
        [`${sagaId}|flight|book-flight`, 1],
        [`${sagaId}|hotel|book-hotel`, 1]
      ]
    )
    const results = ended.steps as ReadonlyArray<{ readonly name: string; readonly usedUsd: string; readonly commitToken: string }>
    assert.deepStrictEqual(results.map((s) => s.usedUsd), ["25", "20", "4"])
    const pool = yield* client.getPool(String(ended.poolId), { identity: runner })
    assert.strictEqual(pool.allocatedUsd, 49)
    for (const [i, s] of results.entries()) {
      const receipt = yield* CommitToken.verify(s.commitToken, [agents.airline!, agents.hotel!, agents.rental!][i]!.publicKeyBytes)
      assert.deepStrictEqual([receipt.sagaId, receipt.step, receipt.amountUsd], [sagaId, s.name, s.usedUsd])
    }
    // The ledger's trail reconciles offline: every release carries its token, and the amounts add up to the pool.
    const trail = yield* client.listAllocations(String(ended.poolId), { identity: runner })
    const keys = makeStatic(Object.fromEntries(Object.values(agents).map((a) => [a.did, { publicKey: a.publicKeyBytes, keyVersion: 1 }])))
    const report = yield* Reconciliation.verify(trail.allocations, pool, keys)
    assert.isTrue(report.ok, JSON.stringify(report.failures))
    assert.strictEqual(report.receipts.size, 3)
  })

describe("a hub killed while running a saga", { timeout: 120_000 }, () => {
  it.live("killed inside a step (the agent's call in flight): after a restart the saga commits, no handler ran twice, the pool balances", () =>
    provide(crashAndRecover("inside-step")))

  it.live("killed between steps: after a restart the saga commits, no handler ran twice, the pool balances", () => provide(crashAndRecover("between-steps")))
})
