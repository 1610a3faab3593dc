/**
 * Several `mesh hub` processes on one Postgres database (docs/scaling.md): three hubs take 300 concurrent
 * allocations against one pool and exactly the pool's worth succeed, with every hub reporting the same totals; a
 * hub killed with SIGKILL mid-load loses no allocation it acknowledged.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { ensureBin } from "../support/bin.js"
import { describePostgres, probeNow, scopedDatabase } from "../support/postgres.js"
import { registeredAgent } from "./support.js"

await probeNow()

/** Starts `mesh hub` as its own process on `db`; resolves once it prints its URL (and admin key on first start). */
const spawnHub = (db: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly proc: ChildProcess; readonly url: string; readonly adminKey: string | undefined; readonly out: () => string }, Error>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), "hub", "--db", db, "--port", "0", "--log-level", "warning"], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      let done = false
      const timer = setTimeout(() => finish(new Error(`hub did not start: ${out}`)), 20_000)
      const finish = (e?: Error) => {
        if (done) return
        done = true
        clearTimeout(timer)
        if (e) return resume(Effect.fail(e))
        const url = /listening on (http:\/\/\S+)/.exec(out)![1]!
        const admin = /admin credential[^\n]*\n(mk_\S+)/.exec(out)?.[1]
        resume(Effect.succeed({ proc, url, adminKey: admin, out: () => out }))
      }
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString()
        if (/\n {2}database [^\n]*\n/.test(out)) finish()
      })
      proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
      proc.on("exit", (code, signal) => {
        // A hub that dies after starting (not killed by the test) says why, so a failure later in the test is explained.
        if (done && signal !== "SIGKILL") console.error(`hub ${proc.pid} exited with ${code ?? signal} after starting:\n${out}`)
        finish(new Error(`hub exited with ${code}: ${out}`))
      })
    }),
    ({ proc }) => Effect.sync(() => proc.kill("SIGKILL"))
  )

// Under a burst a hub may shed some requests with OVERLOADED; the client repeats those (they never ran).
const clientOf = (url: string, apiKey: string, times = 8) =>
  MeshClient.make({ hubUrl: url, apiKey, retry: { times } }).pipe(Effect.provide(FetchHttpClient.layer))

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** Three hubs on `db` (started one after another: the first makes the admin key), a buyer, a shopper and its pool. */
const threeHubs = (spendLimitUsd: number) =>
  Effect.gen(function* () {
    const db = (yield* scopedDatabase).url
    const hubs = [yield* spawnHub(db), yield* spawnHub(db), yield* spawnHub(db)]
    const adminKey = hubs.find((h) => h.adminKey !== undefined)?.adminKey
    assert.isDefined(adminKey)
    assert.strictEqual(hubs.filter((h) => h.adminKey !== undefined).length, 1, "the admin credential is made once per database")
    const admin = yield* clientOf(hubs[0]!.url, adminKey!)
    const buyer = yield* registeredAgent(admin, "buyer")
    const shopper = yield* registeredAgent(admin, "shopper")
    const clients = yield* Effect.forEach(hubs, (h) => clientOf(h.url, shopper.apiKey))
    // Every hub resolves what the first registered.
    for (const c of clients) assert.strictEqual((yield* c.resolveAgent(shopper.record.didHash)).did, shopper.identity.did)
    const intent = yield* issueIntentMandate({
      grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd }, privateKey: buyer.identity.privateKey
    })
    const pool = yield* clients[1]!.openPool(intent.token)
    const children = yield* Effect.forEach(Array.from({ length: 300 }), () =>
      attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: 0.1 }, grantorPrivateKey: shopper.identity.privateKey })
    )
    return { hubs, clients, shopper, pool, children }
  })

describePostgres("hub processes on one Postgres", () => {
  it.live("three hubs, 300 concurrent allocations of 0.1 against a pool of 20: exactly 200 succeed, every hub agrees", () =>
    provide(
      Effect.gen(function* () {
        const { clients, pool, children } = yield* threeHubs(20)
        const results = yield* Effect.forEach(
          children,
          (c, i) => Effect.either(clients[i % 3]!.allocate({ poolId: pool.poolId, childMandate: c.token, idempotencyKey: `k${i}` })),
          { concurrency: "unbounded" }
        )
        const ok = results.filter((r) => r._tag === "Right").length
        const exhausted = results.filter((r) => r._tag === "Left" && r.left.code === "BUDGET_EXHAUSTED").length
        assert.deepStrictEqual([ok, exhausted], [200, 100], JSON.stringify(results.find((r) => r._tag === "Left" && r.left.code !== "BUDGET_EXHAUSTED")))
        for (const c of clients) {
          const listed = yield* c.listAllocations(pool.poolId)
          assert.strictEqual(listed.pool.allocatedUsd, 20)
          assert.strictEqual(listed.pool.remainingUsd, 0)
          assert.strictEqual(listed.allocations.length, 200)
        }
        // A retry of an acknowledged allocation on another hub answers the same allocation.
        const first = results.findIndex((r) => r._tag === "Right")
        const again = yield* clients[(first + 1) % 3]!.allocate({ poolId: pool.poolId, childMandate: children[first]!.token, idempotencyKey: `k${first}` })
        assert.strictEqual(again.allocationId, (results[first] as { right: { allocationId: string } }).right.allocationId)
        // Releases return their unused part once, whichever hub is asked.
        const released = results.filter((r) => r._tag === "Right").slice(0, 10).map((r) => (r as { right: { allocationId: string } }).right.allocationId)
        const outcomes = yield* Effect.forEach(
          released.flatMap((id) => [0, 1, 2].map((h) => ({ id, h }))),
          ({ id, h }) => Effect.either(clients[h]!.release({ allocationId: id, usedUsd: 0.05 })),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(outcomes.filter((o) => o._tag === "Right").length, 10)
        assert.isTrue(outcomes.every((o) => o._tag === "Right" || o.left.code === "ALREADY_REVOKED"))
        for (const c of clients) assert.strictEqual((yield* c.getPool(pool.poolId)).allocatedUsd, 19.5)
      })
    ), 120_000)

  it.live("SIGKILL of one hub mid-load loses no acknowledged allocation; retries elsewhere settle the rest exactly", () =>
    provide(
      Effect.gen(function* () {
        const { hubs, clients: live, pool, children, shopper } = yield* threeHubs(20)
        // Hub 2 dies after the 60th acknowledgement: what it did not answer was not acknowledged. It is asked without
        // retries, so its requests fail as soon as it is gone.
        const clients = [live[0]!, live[1]!, yield* clientOf(hubs[2]!.url, shopper.apiKey, 0)]
        let acknowledged = 0
        const results = yield* Effect.forEach(
          children,
          (c, i) =>
            Effect.either(clients[i % 3]!.allocate({ poolId: pool.poolId, childMandate: c.token, idempotencyKey: `k${i}` })).pipe(
              Effect.tap((r) =>
                Effect.sync(() => {
                  if (r._tag === "Right" && ++acknowledged === 60) hubs[2]!.proc.kill("SIGKILL")
                })
              )
            ),
          { concurrency: 30 }
        )
        const acked = new Map<number, string>()
        results.forEach((r, i) => {
          if (r._tag === "Right") acked.set(i, r.right.allocationId)
        })
        assert.isAtLeast(acked.size, 60)
        const listed = yield* clients[0]!.listAllocations(pool.poolId)
        const stored = new Map(listed.allocations.map((a) => [a.idempotencyKey, a.allocationId]))
        for (const [i, id] of acked) assert.strictEqual(stored.get(`k${i}`), id, `acknowledged allocation k${i} is in the ledger`)
        // What the killed hub never answered is retried on a live hub under the same key: committed ones come back as
        // they were, the others are made now; the pool ends exactly full and its books agree.
        const unanswered = results.flatMap((r, i) => (r._tag === "Left" && r.left.code !== "BUDGET_EXHAUSTED" ? [i] : []))
        assert.isAbove(unanswered.length, 0, "the hub died while requests were still going to it")
        const retried = yield* Effect.forEach(unanswered, (i) =>
          Effect.either(clients[i % 2]!.allocate({ poolId: pool.poolId, childMandate: children[i]!.token, idempotencyKey: `k${i}` })), { concurrency: 10 })
        assert.isTrue(retried.every((r) => r._tag === "Right" || r.left.code === "BUDGET_EXHAUSTED"), JSON.stringify(retried.find((r) => r._tag === "Left")))
        const after = yield* clients[1]!.listAllocations(pool.poolId)
        const sum = after.allocations.reduce((s, a) => s + a.amountUsd, 0)
        assert.strictEqual(after.pool.allocatedUsd, Math.round(sum * 10) / 10)
        assert.isAtMost(after.allocations.length, 200)
        for (const [i, id] of acked) assert.isTrue(after.allocations.some((a) => a.idempotencyKey === `k${i}` && a.allocationId === id))
      })
    ), 120_000)
})
