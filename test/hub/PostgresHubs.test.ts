/**
 * Several `mesh hub` processes on one Postgres database (docs/scaling.md): three hubs take 300 concurrent
 * allocations against one pool and exactly the pool's worth succeed, with every hub reporting the same totals; a
 * hub killed with SIGKILL mid-load loses no allocation it acknowledged. Two hubs behind one public URL count a key's
 * registry writes against one quota, and apply a write proof once, whichever of them sees it.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { didHash, generateDid, verificationMethodId } from "../../src/core/Did.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import { signMessage } from "../../src/core/Proof.js"
import { DEFAULT_WRITE_QUOTA, hubOrigin, updateDocument, WRITE_PROOF_PURPOSE } from "../../src/hub/Registry.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { spawnHub } from "../support/meshHub.js"
import { describePostgres, probeNow, scopedDatabase } from "../support/postgres.js"
import { registeredAgent, registrationBody, request } from "./support.js"

await probeNow()

// Under a burst a hub may shed some requests with OVERLOADED; the client repeats those (they never ran).
const clientOf = (url: string, apiKey: string, times = 8, publicHubUrl?: string) =>
  MeshClient.make({ hubUrl: url, apiKey, retry: { times }, ...(publicHubUrl === undefined ? {} : { publicHubUrl }) }).pipe(Effect.provide(FetchHttpClient.layer))

/** The one URL two hubs behind a load balancer are reached at: the origin their write proofs name. */
const PUBLIC_URL = "http://mesh.test"

/** Two hubs on a fresh database, both with `--public-url PUBLIC_URL`, and the admin key the first made. */
const twoHubsBehindOneUrl = Effect.gen(function* () {
  const db = (yield* scopedDatabase).url
  const hubs = [yield* spawnHub(db, "--public-url", PUBLIC_URL), yield* spawnHub(db, "--public-url", PUBLIC_URL)]
  const adminKey = hubs[0]!.adminKey
  assert.isDefined(adminKey)
  return { hubs, adminKey: adminKey! }
})

// A request shed before its handler ran (OVERLOADED) did nothing, so it is sent again; anything else is the answer.
const send = (url: string, method: string, body: unknown, apiKey: string, times = 40): ReturnType<typeof request> =>
  Effect.flatMap(request(url, method, body, apiKey), (r) =>
    r.body.code === "OVERLOADED" && times > 0 ? Effect.delay(send(url, method, body, apiKey, times - 1), "50 millis") : Effect.succeed(r)
  )

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

  it.live("two hubs share one write quota per key: of 3 × 100 concurrent registrations by one key through both, exactly the quota of 100 pass", () =>
    provide(
      Effect.gen(function* () {
        const { hubs, adminKey } = yield* twoHubsBehindOneUrl
        const admin = yield* clientOf(hubs[0]!.url, adminKey, 8, PUBLIC_URL)
        const carol = yield* admin.createApiKey({ owner: "carol" })
        const quota = DEFAULT_WRITE_QUOTA.entries
        const outcomes = yield* Effect.forEach(
          Array.from({ length: 3 * quota }, (_, i) => i),
          (i) => send(`${hubs[i % 2]!.url}/v1/skills`, "POST", { name: `s${i}`, did: `did:mesh:shared-quota.s${i}` }, carol.apiKey),
          { concurrency: "unbounded" }
        )
        const passed = outcomes.filter((o) => o.status === 201)
        assert.strictEqual(passed.length, quota, JSON.stringify(outcomes.find((o) => o.status !== 201 && o.status !== 429)?.body))
        assert.isTrue(outcomes.every((o) => o.status === 201 || (o.status === 429 && o.body.code === "RATE_LIMITED")))
        // Both hubs took part, and each refuses the next write with when to retry.
        assert.isTrue([0, 1].every((h) => outcomes.some((o, i) => i % 2 === h && o.status === 201)))
        for (const h of hubs) {
          const next = yield* send(`${h.url}/v1/skills`, "POST", { name: "one-more", did: "did:mesh:shared-quota.more" }, carol.apiKey)
          assert.strictEqual(next.body.code, "RATE_LIMITED")
          assert.isAbove(Number(next.headers.get("retry-after")), 0)
        }
      })
    ), 120_000)

  it.live("a write proof applied through one hub is a replay to the other, refused with the code of a replay to the same hub", () =>
    provide(
      Effect.gen(function* () {
        const { hubs, adminKey } = yield* twoHubsBehindOneUrl
        const a = yield* clientOf(hubs[0]!.url, adminKey, 8, PUBLIC_URL)
        const victim = yield* generateDid("replayed-across")
        const ownKey = yield* a.createApiKey({ owner: victim.did })
        const { cid } = yield* a.pinManifest({ name: "replayed", meshProtocolVersion: "1.0" })
        const captured = yield* registrationBody({ did: victim.did, manifestCID: cid, publicKeyB64: victim.publicKey, endpointUrl: "http://127.0.0.1:9/v" }, victim, PUBLIC_URL)
        assert.strictEqual((yield* send(`${hubs[0]!.url}/v1/agents`, "POST", captured, ownKey.apiKey)).status, 201)
        const sameHub = yield* send(`${hubs[0]!.url}/v1/agents`, "POST", captured, ownKey.apiKey)
        const otherHub = yield* send(`${hubs[1]!.url}/v1/agents`, "POST", captured, ownKey.apiKey)
        assert.deepStrictEqual([sameHub.status, sameHub.body.code], [401, "SIGNATURE_INVALID"])
        assert.deepStrictEqual([otherHub.status, otherHub.body.code], [sameHub.status, sameHub.body.code])
        assert.include(String(otherHub.body.error), "already used")
        // Deleted through hub A, the DID is its last key's again; the captured registration replayed to hub B stays refused.
        yield* a.deleteAgent(didHash(victim.did), { apiKey: ownKey.apiKey, identity: victim })
        const mallory = yield* a.createApiKey({ owner: "mallory" })
        const afterDelete = yield* send(`${hubs[1]!.url}/v1/agents`, "POST", captured, mallory.apiKey)
        assert.deepStrictEqual([afterDelete.status, afterDelete.body.code], [401, "SIGNATURE_INVALID"])

        // One signed update sent 20 times at once, half through each hub: applied once.
        const alice = yield* registeredAgent(a, "updated-once")
        const endpointUrl = "http://127.0.0.1:10/moved"
        const signed = yield* Effect.orDie(signMessage(
          updateDocument({ hub: hubOrigin(PUBLIC_URL)!, did: alice.identity.did, keyVersion: 1, endpointUrl }),
          alice.identity.privateKey,
          verificationMethodId(alice.identity.did),
          { proofPurpose: WRITE_PROOF_PURPOSE }
        ))
        const updates = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => hubs[i % 2]!.url),
          (url) => send(`${url}/v1/agents/${alice.record.didHash}`, "PATCH", { endpointUrl, proof: signed.proof }, alice.apiKey),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(updates.filter((u) => u.status === 200).length, 1)
        assert.isTrue(updates.every((u) => u.status === 200 || (u.status === 401 && u.body.code === "SIGNATURE_INVALID")))
      })
    ), 120_000)
})
