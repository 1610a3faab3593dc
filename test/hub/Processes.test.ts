import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Hub from "../../src/hub/Hub.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import { spawnHub } from "../support/meshHub.js"
import { registeredAgent, statusWithHost, tempDatabase } from "./support.js"

// Under a 200-request burst a hub may shed some with OVERLOADED; the client repeats those (they never ran).
const clientOf = (url: string, apiKey: string) =>
  MeshClient.make({ hubUrl: url, apiKey, retry: { times: 8 } }).pipe(Effect.provide(FetchHttpClient.layer))

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("hub processes", () => {
  it.live("two hub processes sharing one SQLite file: 200 concurrent allocations never over-allocate", () =>
    provide(
      Effect.gen(function* () {
        const db = tempDatabase()
        const a = yield* spawnHub(db)
        const b = yield* spawnHub(db)
        assert.isDefined(a.adminKey)
        assert.isUndefined(b.adminKey) // created once per database
        const ca = yield* clientOf(a.url, a.adminKey!)
        const cb = yield* clientOf(b.url, a.adminKey!)
        const buyer = yield* registeredAgent(ca, "buyer")
        const shopper = yield* registeredAgent(ca, "shopper")
        // B sees what A wrote.
        assert.strictEqual((yield* cb.resolveAgent(shopper.record.didHash)).did, shopper.identity.did)
        const intent = yield* issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd: 50 }, privateKey: buyer.identity.privateKey })
        // The intent's grantee acts through its agent key, bound to its DID.
        const as = { apiKey: shopper.apiKey }
        const pool = yield* ca.openPool(intent.token, as)
        const children = yield* Effect.forEach(Array.from({ length: 200 }), () =>
          attenuateToCart({ parent: intent, granteeDid: "did:mesh:merchant", narrowed: { spendLimitUsd: 0.3 }, grantorPrivateKey: shopper.identity.privateKey })
        )
        const results = yield* Effect.forEach(
          children,
          (c, i) => Effect.either((i % 2 === 0 ? ca : cb).allocate({ poolId: pool.poolId, childMandate: c.token, idempotencyKey: `k${i}`, ...as })),
          { concurrency: "unbounded" }
        )
        const ok = results.filter((r) => r._tag === "Right").length
        const exhausted = results.filter((r) => r._tag === "Left" && r.left.code === "BUDGET_EXHAUSTED").length
        // 50 / 0.3 = 166.67: 166 fit, 34 do not.
        assert.deepStrictEqual([ok, exhausted], [166, 34], JSON.stringify(results.find((r) => r._tag === "Left" && r.left.code !== "BUDGET_EXHAUSTED")))
        assert.strictEqual((yield* cb.getPool(pool.poolId, as)).allocatedUsd, 49.8)
      })
    ), 60_000)

  it.live("an acknowledged write survives kill -9, and a restart keeps everything (the admin credential is not made again)", () =>
    provide(
      Effect.gen(function* () {
        const db = tempDatabase()
        const registered = yield* Effect.scoped(
          Effect.gen(function* () {
            const proc = yield* spawnHub(db)
            const client = yield* clientOf(proc.url, proc.adminKey!)
            const agent = yield* registeredAgent(client, "durable")
            proc.proc.kill("SIGKILL")
            return { agent, adminKey: proc.adminKey! }
          })
        )
        const hub = yield* Hub.start({ database: db })
        assert.isTrue(Option.isNone(hub.admin))
        const client = yield* clientOf(hub.url, registered.adminKey)
        const back = yield* client.resolveAgent(registered.agent.record.didHash)
        assert.strictEqual(back.publicKeyB64, registered.agent.identity.publicKey)
        // The agent's own API key still works after the restart.
        const own = yield* clientOf(hub.url, registered.agent.apiKey)
        yield* own.updateAgent(registered.agent.record.didHash, { endpointUrl: "http://127.0.0.1:9/moved" }, { identity: registered.agent.identity })
      })
    ), 60_000)

  it.live("mesh hub shuts down cleanly on SIGTERM", () =>
    provide(
      Effect.gen(function* () {
        const { proc } = yield* spawnHub(tempDatabase())
        const code = yield* Effect.async<number | null>((resume) => {
          proc.once("exit", (c) => resume(Effect.succeed(c)))
          proc.kill("SIGTERM")
        })
        assert.strictEqual(code, 0)
      })
    ), 60_000)

  it.live("mesh hub --new-admin-key issues a credential on a database that had one; --public-url's host is allowed in Host; --probe-port answers /health", () =>
    provide(
      Effect.gen(function* () {
        const db = tempDatabase()
        const first = yield* Effect.scoped(Effect.map(spawnHub(db), (p) => p.adminKey))
        assert.isDefined(first)
        const again = yield* Effect.scoped(Effect.map(spawnHub(db), (p) => p.adminKey))
        assert.isUndefined(again)
        yield* Effect.scoped(
          Effect.gen(function* () {
            const hub = yield* spawnHub(db, "--new-admin-key", "--public-url", "https://hub.example.test", "--probe-port", "0")
            // --probe-port: a second listener answering /health.
            const probe = /\n {2}probe +(http:\/\/\S+)\n/.exec(hub.out())?.[1] ?? assert.fail(`no probe line in ${hub.out()}`)
            assert.strictEqual((yield* Effect.promise(() => fetch(probe))).status, 200)
            assert.match(hub.adminKey ?? "", /^mk_/)
            assert.notStrictEqual(hub.adminKey, first)
            assert.strictEqual(yield* statusWithHost(`${hub.url}/api/status`, "hub.example.test"), 200)
            assert.strictEqual(yield* statusWithHost(`${hub.url}/api/status`, "rebound.example.test"), 421)
            // The new credential is an admin's: it may create keys.
            const client = yield* clientOf(hub.url, hub.adminKey!)
            const created = yield* client.createApiKey({ owner: "ops", label: "after recovery" })
            assert.strictEqual(created.kind, "user")
          })
        )
      })
    ), 60_000)
})
