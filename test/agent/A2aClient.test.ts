/**
 * Mesh agents call A2A agents: an agent built with the official `@a2a-js/sdk` server is registered in a hub from its
 * card URL, and `callAgent(didHash, …)` reaches it over A2A, streamed or not, as it would a mesh agent. An agent
 * server of ours registered the same way is reached over its A2A endpoint (its auth applies) and its failures keep
 * their codes.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { didHash } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { isNonPublicAddress } from "../../src/hub/OutboundAddress.js"
import { startHub } from "../hub/support.js"
import { startSdkAgent } from "../../examples/a2a-sdk-agent.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

/** An SDK agent that answers in three chunks, stopped when the scope closes. */
const sdkAgent = Effect.acquireRelease(
  Effect.promise(() => startSdkAgent({ name: "shouter", reply: (text) => ["HEARD: ", text.toUpperCase(), "!"] })),
  (a) => Effect.promise(() => a.close())
)

describe("A2A client", () => {
  it.live("an A2A agent registered from its card URL is called by didHash, whole and streamed", () =>
    provide(
      Effect.gen(function* () {
        const remote = yield* sdkAgent
        const { client: hubClient, hub } = yield* startHub({ a2aCardUrls: "any" })
        const record = yield* hubClient.registerA2a({ cardUrl: `${remote.url}/.well-known/agent-card.json` })
        assert.strictEqual(record.name, "shouter")
        assert.strictEqual(record.cardUrl, `${remote.url}/.well-known/agent-card.json`)
        assert.strictEqual((record.card as { name: string }).name, "shouter")
        assert.match(record.did, /^did:mesh:a2a\.127-0-0-1-[0-9a-f]{8}$/)
        const resolved = yield* hubClient.resolveA2a(record.didHash)
        assert.deepStrictEqual(resolved.card, record.card)
        const found = yield* hubClient.search("shouter")
        assert.deepStrictEqual(found.items.map((h) => [h.kind, h.didHash]), [["a2a", record.didHash]])

        const client = yield* AgentClient.make({ hubUrl: hub.url })
        const reply = yield* client.call(record.didHash, "hello there")
        assert.deepStrictEqual(Object.keys(reply).sort(), ["message", "sessionId"])
        assert.strictEqual((reply as { message: string }).message, "HEARD: HELLO THERE!")

        const events = yield* Stream.runCollect(client.stream(record.didHash, "again"))
        const list = [...events]
        assert.deepStrictEqual(list.filter((e) => e.type === "chunk").map((e) => (e as { text: string }).text).join(""), "HEARD: AGAIN!")
        const last = list[list.length - 1]!
        assert.strictEqual(last.type, "done")
        assert.strictEqual((last as { message: string }).message, "HEARD: AGAIN!")

        // The hub keeps the card it fetched and fetches it again on demand.
        const refreshed = yield* hubClient.refreshA2a(record.didHash)
        assert.isAtLeast(Date.parse(refreshed.fetchedAt), Date.parse(record.fetchedAt))
        const unknown = yield* Effect.flip(client.call("nosuchagentnosuchagentnosuch", "hi"))
        assert.strictEqual(unknown.code, "AGENT_NOT_FOUND")
      })
    ))

  it.live("a card the hub cannot fetch or read is refused with CARD_UNREACHABLE or INVALID_CARD", () =>
    provide(
      Effect.gen(function* () {
        const { client: hubClient, hub } = yield* startHub({ a2aCardUrls: "any" })
        const gone = yield* Effect.flip(hubClient.registerA2a({ cardUrl: `${hub.url}/no/card/here` }))
        assert.strictEqual(gone.code, "CARD_UNREACHABLE")
        const notACard = yield* Effect.flip(hubClient.registerA2a({ cardUrl: `${hub.url}/health` }))
        assert.strictEqual(notACard.code, "INVALID_CARD")
        const notHttp = yield* Effect.flip(hubClient.registerA2a({ cardUrl: "file:///etc/passwd" }))
        assert.include(["CARD_UNREACHABLE", "INVALID_ENDPOINT"], notHttp.code)
      })
    ))

  it.live("by default the hub fetches no card from its own networks: loopback, private and link-local addresses are refused, by literal or by name", () =>
    provide(
      Effect.gen(function* () {
        const { client: hubClient, hub } = yield* startHub()
        const port = new URL(hub.url).port
        for (const cardUrl of [
          `${hub.url}/health`,
          `http://localhost:${port}/health`,
          `http://[::1]:${port}/health`,
          "http://10.0.0.1/card",
          "http://169.254.169.254/latest/meta-data",
          "http://192.168.1.1/card",
          "http://0.0.0.0/card"
        ]) {
          const refused = yield* Effect.flip(hubClient.registerA2a({ cardUrl }))
          assert.strictEqual(refused.code, "CARD_UNREACHABLE", cardUrl)
          assert.include(refused.message, "not a public address", cardUrl)
        }
      })
    ))

  it("isNonPublicAddress: special-purpose ranges are not public; ordinary addresses are", () => {
    for (const a of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "224.0.0.1", "not-an-ip"]) {
      assert.isTrue(isNonPublicAddress(a), a)
    }
    for (const a of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700:4700::1111", "93.184.216.34"]) {
      assert.isFalse(isNonPublicAddress(a), a)
    }
  })

  it.live("an agent server of ours registered as an A2A agent is called over A2A with its bearer token; its failures keep their codes", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "strict",
          database: ":memory:",
          auth: "bearer",
          bearerTokens: ["s3cret"],
          handler: async function* ({ message, guard }) {
            if (message === "pay") await guard("pay")
            yield "ok: "
            yield message
          }
        })
        const { client: hubClient, hub } = yield* startHub({ a2aCardUrls: "any" })
        const record = yield* hubClient.registerA2a({ cardUrl: `${agent.url}/.well-known/agent-card.json`, did: "did:mesh:a2a.strict" })
        assert.strictEqual(record.didHash, didHash("did:mesh:a2a.strict" as never))
        const client = yield* AgentClient.make({ hubUrl: hub.url })
        const refused = yield* Effect.flip(client.call(record.didHash, "hi"))
        assert.strictEqual(refused.code, "AUTH_REQUIRED")
        assert.strictEqual(refused.status, 401)
        const reply = yield* client.call(record.didHash, "hi", { bearerToken: "s3cret", sessionId: "conv-1" })
        assert.deepStrictEqual(reply, { message: "ok: hi", sessionId: "conv-1" })
        const streamed = [...(yield* Stream.runCollect(client.stream(record.didHash, "hi", { bearerToken: "s3cret" })))]
        assert.strictEqual(streamed.filter((e) => e.type === "chunk").map((e) => (e as { text: string }).text).join(""), "ok: hi")
        assert.strictEqual(streamed[streamed.length - 1]!.type, "done")
        const rejected = yield* Effect.flip(client.call(record.didHash, "pay", { bearerToken: "s3cret" }))
        assert.strictEqual(rejected.code, "MANDATE_REQUIRED")
      })
    ))
})
