/**
 * The fetch handlers in-process under Node, a web `Request` in and a `Response` out: the agent server (mesh-sig
 * verified over the raw body and the public URL as on node:http, a streamed run as a `ReadableStream`, the serving
 * layer's refusals in the contract's shape), a MeshServer (a signed reply, streamed replies) and the hub's reads
 * over SQLite (the same records the node:http hub answers; writes not routed).
 */
import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentWeb from "../../src/agent/AgentWeb.js"
import type { Handler as AgentHandler } from "../../src/agent/Handler.js"
import { generateDid, verificationMethodId } from "../../src/core/Did.js"
import { buildEnvelope, type Envelope, MESH_REQUEST, validateEnvelope } from "../../src/core/Envelope.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import { Keys } from "../../src/core/Keys.js"
import * as NonceStore from "../../src/core/NonceStore.js"
import * as HubWeb from "../../src/hub/HubWeb.js"
import type { Handler } from "../../src/http/WebHandler.js"
import * as MeshServerWeb from "../../src/mesh/MeshServerWeb.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, startHub, tempDatabase } from "../hub/support.js"

const PUBLIC_URL = "https://agent.example"

const spelling: AgentHandler = async function* ({ message }) {
  for (const word of message.split(/\s+/)) yield `${word.toUpperCase()} `
}

/** An AgentClient whose every request goes to `handler` in-process. */
const clientOf = (handler: Handler) =>
  AgentClient.layer().pipe(
    Layer.provide(FetchHttpClient.layer),
    Layer.provide(Layer.succeed(FetchHttpClient.Fetch, ((input: RequestInfo | URL, init?: RequestInit) => handler(new Request(input, init))) as typeof fetch)),
    Layer.provideMerge(KeysNative.layer)
  )

const json = (response: Response) => Effect.promise(() => response.json() as Promise<Record<string, unknown>>)

/** The events of an SSE body read from its ReadableStream. */
const readEvents = (response: Response) =>
  Effect.promise(async () => {
    assert.instanceOf(response.body, ReadableStream)
    const reader = response.body!.getReader()
    let text = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    return text.split("\n\n").filter((e) => e.trim() !== "")
  })

const assertErrorShape = (body: Record<string, unknown>, response: Response, code: string) => {
  assert.strictEqual(body.code, code)
  assert.strictEqual(typeof body._tag, "string")
  assert.strictEqual(typeof body.error, "string")
  assert.strictEqual(body.correlationId, response.headers.get("x-correlation-id"))
}

describe("the agent server as a fetch handler", () => {
  it.scoped("verifies mesh-sig over the raw body and the public URL, streams, refuses a replay and bad requests in the contract's shape", () =>
    Effect.gen(function* () {
      const caller = yield* generateDid("caller")
      const handler = yield* AgentWeb.make({
        name: "spelling",
        handler: spelling,
        auth: "mesh-sig",
        publicUrl: PUBLIC_URL,
        maxBodyBytes: 4096,
        resolveCallerKey: (did) => (did === caller.did ? caller.publicKey : null)
      })
      const signAs = { did: caller.did, privateKey: caller.privateKey }
      const agents = yield* Effect.provide(AgentClient.AgentClient, clientOf(handler))
      const reply = yield* agents.call(PUBLIC_URL, "fetch handlers", { signAs })
      assert.strictEqual("message" in reply ? reply.message : undefined, "FETCH HANDLERS ")
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agents.stream(PUBLIC_URL, "a b", { signAs })))
      assert.deepStrictEqual(events.map((e) => e.type), ["chunk", "chunk", "done"])

      // The bytes as signed; whitespace the JSON parser would ignore is part of what the signature covers.
      const bytes = new TextEncoder().encode(`{ "message" : "raw bytes" }`)
      const headers = yield* signRequest({ method: "POST", url: `${PUBLIC_URL}/v1/run`, body: bytes }, { privateKey: caller.privateKey, keyId: verificationMethodId(caller.did) })
      const signed = (accept: string) =>
        handler(new Request(`${PUBLIC_URL}/v1/run`, { method: "POST", headers: { ...headers, "content-type": "application/json", accept }, body: bytes }))
      const streamed = yield* Effect.promise(() => signed("text/event-stream"))
      assert.strictEqual(streamed.status, 200)
      assert.match(streamed.headers.get("content-type") ?? "", /^text\/event-stream/)
      const frames = yield* readEvents(streamed)
      assert.include(frames.at(-1)!, "event: done")
      assert.include(frames.at(-1)!, "RAW BYTES ")

      const replayed = yield* Effect.promise(() => signed("application/json"))
      assert.strictEqual(replayed.status, 401)
      assertErrorShape(yield* json(replayed), replayed, "REPLAYED")

      // Signed for another URL: refused, whatever the Host of the request says.
      const elsewhere = yield* signRequest({ method: "POST", url: "https://other.example/v1/run", body: bytes }, { privateKey: caller.privateKey, keyId: verificationMethodId(caller.did) })
      const misdirected = yield* Effect.promise(() =>
        handler(new Request(`${PUBLIC_URL}/v1/run`, { method: "POST", headers: { ...elsewhere, "content-type": "application/json" }, body: bytes }))
      )
      assert.strictEqual(misdirected.status, 401)

      const noRoute = yield* Effect.promise(() => handler(new Request(`${PUBLIC_URL}/nowhere`)))
      assert.strictEqual(noRoute.status, 404)
      assertErrorShape(yield* json(noRoute), noRoute, "ROUTE_NOT_FOUND")
      const badJson = yield* Effect.promise(() => handler(new Request(`${PUBLIC_URL}/v1/run`, { method: "POST", headers: { "content-type": "application/json" }, body: "{nope" })))
      assert.strictEqual(badJson.status, 400)
      assertErrorShape(yield* json(badJson), badJson, "INVALID_JSON")
      const tooLarge = yield* Effect.promise(() => handler(new Request(`${PUBLIC_URL}/v1/run`, { method: "POST", body: JSON.stringify({ message: "x".repeat(5000) }) })))
      assert.strictEqual(tooLarge.status, 413)
      assertErrorShape(yield* json(tooLarge), tooLarge, "PAYLOAD_TOO_LARGE")
      const notJson = yield* Effect.promise(() => handler(new Request(`${PUBLIC_URL}/v1/run`, { method: "POST", headers: { "content-type": "text/plain" }, body: "hi" })))
      assert.strictEqual(notJson.status, 415)
      assertErrorShape(yield* json(notJson), notJson, "UNSUPPORTED_MEDIA_TYPE")
      const health = yield* Effect.promise(() => handler(new Request(`${PUBLIC_URL}/health`)))
      assert.strictEqual(health.status, 200)
      assert.strictEqual(health.headers.get("x-content-type-options"), "nosniff")
      // The A2A card is served by the same handlers.
      const card = yield* Effect.promise(() => handler(new Request(`${PUBLIC_URL}/.well-known/agent-card.json`)))
      assert.strictEqual(card.status, 200)
      assert.strictEqual((yield* json(card)).name, "spelling")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.scoped("refuses mesh-sig without a public URL, and persistent memory without a durable store", () =>
    Effect.gen(function* () {
      const noUrl = yield* Effect.flip(AgentWeb.make({ name: "a", handler: spelling, auth: "mesh-sig", resolveCallerKey: () => null }))
      assert.strictEqual(noUrl.code, "INVALID_CONFIG")
      const persistent = yield* Effect.flip(AgentWeb.make({ name: "a", handler: spelling, memory: "persistent" }))
      assert.strictEqual(persistent.code, "INVALID_CONFIG")
    }).pipe(Effect.provide(Keys.noble)))
})

describe("a fetch handler built on its first request", () => {
  it.live("answers 500 INTERNAL_ERROR while its options cannot start; a good one serves until disposed", () =>
    Effect.gen(function* () {
      const broken = AgentWeb.toWebHandler({ name: "broken", handler: spelling, auth: "mesh-sig", resolveCallerKey: () => null }, { keys: Keys.noble })
      const refused = yield* Effect.promise(() => broken.handler(new Request(`${PUBLIC_URL}/health`)))
      assert.strictEqual(refused.status, 500)
      assertErrorShape(yield* json(refused), refused, "INTERNAL_ERROR")
      yield* Effect.promise(broken.dispose)
      const app = AgentWeb.toWebHandler({ name: "lazy", handler: spelling, publicUrl: PUBLIC_URL }, { keys: Keys.noble })
      const health = yield* Effect.promise(() => app.handler(new Request(`${PUBLIC_URL}/health`)))
      assert.strictEqual(health.status, 200)
      assert.strictEqual((yield* json(health)).name, "lazy")
      yield* Effect.promise(app.dispose)
    }))
})

describe("a MeshServer as a fetch handler", () => {
  it.scoped("answers a signed envelope with a signed reply, streams replies as a ReadableStream, refuses a replay", () =>
    Effect.gen(function* () {
      const server = yield* generateDid("server")
      const alice = yield* generateDid("alice")
      const handler = yield* MeshServerWeb.make({
        agentDid: server.did,
        privateKey: server.privateKey,
        resolvePublicKey: (did) => (did === alice.did ? alice.publicKey : null),
        onMessage: (envelope, respond, stream) => {
          stream({ part: 1 })
          respond({ echo: envelope.body })
        },
        web: { allowedHosts: ["mesh.example"] }
      }).pipe(Effect.provide(NonceStore.layerMemory()))
      const envelope = yield* buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: server.did, body: { capability: "echo", params: { n: 1 } }, privateKey: alice.privateKey })
      const send = (accept: string) =>
        handler(new Request("http://mesh.example/v1/messages", { method: "POST", headers: { "content-type": "application/json", accept }, body: JSON.stringify(envelope) }))
      const streamed = yield* Effect.promise(() => send("text/event-stream"))
      assert.strictEqual(streamed.status, 200)
      const frames = yield* readEvents(streamed)
      assert.strictEqual(frames.length, 2)
      const replies = frames.map((f) => JSON.parse(f.split("\n").find((l) => l.startsWith("data: "))!.slice(6)) as Envelope)
      for (const reply of replies) {
        const valid = yield* validateEnvelope(reply, server.publicKey, alice.did, NonceStore.makeMemory())
        assert.strictEqual(valid.correlationId, envelope.correlationId)
      }
      assert.deepStrictEqual(replies.map((r) => r.body), [{ part: 1 }, { echo: { capability: "echo", params: { n: 1 } } }])
      const replayed = yield* Effect.promise(() => send("application/json"))
      assert.strictEqual(replayed.status, 401)
      assertErrorShape(yield* json(replayed), replayed, "REPLAYED")

      const fresh = yield* buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: server.did, body: { capability: "echo" }, privateKey: alice.privateKey })
      const once = yield* Effect.promise(() =>
        handler(new Request("http://mesh.example/v1/messages", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(fresh) }))
      )
      assert.strictEqual(once.status, 200)
      const reply = (yield* json(once)) as unknown as Envelope
      assert.strictEqual(reply.from, server.did)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("the hub's reads as a fetch handler", () => {
  it.scoped("answers what the node:http hub answers on the same database; writes are not routed", () =>
    Effect.gen(function* () {
      const database = tempDatabase()
      const { client, hub } = yield* startHub({ database })
      const { record } = yield* registeredAgent(client, "reader")
      const handler = yield* HubWeb.make({ database, publicUrl: "http://hub.example" })
      const viaWeb = yield* Effect.promise(() => handler(new Request(`http://hub.example/v1/agents/${record.didHash}`)))
      assert.strictEqual(viaWeb.status, 200, JSON.stringify(yield* Effect.promise(() => viaWeb.clone().json())))
      const viaNode = yield* Effect.promise(() => fetch(`${hub.url}/v1/agents/${record.didHash}`).then((r) => r.json() as Promise<Record<string, unknown>>))
      const web = yield* json(viaWeb)
      assert.deepStrictEqual({ ...web, live: undefined }, { ...viaNode, live: undefined })
      const search = yield* Effect.promise(() => handler(new Request("http://hub.example/v1/search?q=reader")))
      assert.strictEqual(search.status, 200)
      const missing = yield* Effect.promise(() => handler(new Request("http://hub.example/v1/agents/zzzz")))
      assert.strictEqual(missing.status, 404)
      const write = yield* Effect.promise(() => handler(new Request("http://hub.example/v1/agents", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })))
      assert.strictEqual(write.status, 404)
      assertErrorShape(yield* json(write), write, "ROUTE_NOT_FOUND")
    }).pipe(Effect.provide(KeysNative.layer)))
})
