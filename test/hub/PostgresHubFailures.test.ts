/**
 * Hubs on one Postgres database beyond the ledger (docs/scaling.md): per-address rate limits hold across hubs, and a
 * database that goes away is answered 503 with a code the client can act on, never 500.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as net from "node:net"
import { generateDid } from "../../src/core/Did.js"
import * as Hub from "../../src/hub/Hub.js"
import { issueIntentMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { describePostgres, probeNow, scopedDatabase } from "../support/postgres.js"
import { registeredAgent, request, startHub } from "./support.js"

await probeNow()

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A TCP proxy to Postgres on a port of its own, which the test can cut (as a database going away). */
const proxyTo = (target: URL) =>
  Effect.acquireRelease(
    Effect.async<{ readonly port: number; readonly cut: () => void; readonly server: net.Server }>((resume) => {
      const sockets = new Set<net.Socket>()
      const server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname)
        sockets.add(client).add(upstream)
        client.pipe(upstream).pipe(client)
        const close = () => {
          client.destroy()
          upstream.destroy()
        }
        client.on("error", close).on("close", close)
        upstream.on("error", close).on("close", close)
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({
          port: (server.address() as net.AddressInfo).port,
          server,
          cut: () => {
            server.close()
            for (const s of sockets) s.destroy()
          }
        })))
    }),
    (p) => Effect.sync(() => p.cut())
  )

describePostgres("hubs on one Postgres: shared limits and failures", (url) => {
  it.effect("per-address rate limits hold across hubs: the third challenge from one address is 429 on the other hub", () =>
    provide(
      Effect.gen(function* () {
        const rateLimit = { capacity: 2, perMinute: 6 }
        // The second hub on the database gets no admin credential, so both are started bare.
        const serving = { maxEventLoopLagMs: Infinity }
        const a = yield* Hub.start({ database: url(), rateLimit, serving })
        const b = yield* Hub.start({ database: url(), rateLimit, serving })
        const agent = yield* generateDid("busy")
        const ask = (hub: { readonly url: string }) => request(`${hub.url}/api/agent-keys/challenge`, "POST", { did: agent.did, publicKeyB64: agent.publicKey })
        assert.strictEqual((yield* ask(a)).status, 201)
        assert.strictEqual((yield* ask(b)).status, 201)
        const limited = yield* ask(a)
        assert.strictEqual(limited.status, 429)
        assert.strictEqual(limited.body.code, "RATE_LIMITED")
        assert.strictEqual(limited.body.retryAfterSeconds, 10)
        assert.strictEqual((yield* ask(b)).status, 429)
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual((yield* ask(b)).status, 201)
        assert.strictEqual((yield* ask(a)).status, 429)
      })
    ))

  it.live("Postgres going away: registry reads, search and ledger calls answer 503 with a code, not 500", () =>
    provide(
      Effect.gen(function* () {
        const db = new URL((yield* scopedDatabase).url)
        const proxy = yield* proxyTo(db)
        const viaProxy = new URL(db.href)
        viaProxy.port = String(proxy.port)
        const { hub, client } = yield* startHub({ database: viaProxy.href })
        const buyer = yield* registeredAgent(client, "buyer")
        const shopper = yield* registeredAgent(client, "shopper")
        const intent = yield* issueIntentMandate({ grantorDid: buyer.identity.did, granteeDid: shopper.identity.did, constraints: { spendLimitUsd: 5 }, privateKey: buyer.identity.privateKey })
        const open = yield* request(`${hub.url}/v1/spending/pools`, "POST", { mandate: intent.token }, shopper.apiKey)
        assert.strictEqual(open.status, 201, JSON.stringify(open.body))

        proxy.cut()
        const answers = [
          yield* request(`${hub.url}/v1/agents/${shopper.record.didHash}`, "GET"),
          yield* request(`${hub.url}/v1/search?q=shopper`, "GET"),
          yield* request(`${hub.url}/v1/spending/pools`, "POST", { mandate: intent.token }, shopper.apiKey),
          yield* request(`${hub.url}/v1/spending/pools/${String(open.body.poolId)}`, "GET", undefined, shopper.apiKey)
        ]
        for (const r of answers) {
          assert.strictEqual(r.status, 503, JSON.stringify(r.body))
          assert.strictEqual(r.body.code, "STORE_UNAVAILABLE")
          assert.isString(r.body.correlationId)
        }
      })
    ), 60_000)
})
