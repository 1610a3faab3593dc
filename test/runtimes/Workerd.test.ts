/**
 * The example Worker (examples/worker/) bundled with esbuild and run by workerd, the Workers runtime itself, in a
 * child process on 127.0.0.1; called from Node with mesh-sig through the library's own client: a run, a streamed
 * run, a replayed nonce refused, an unsigned request refused, all in the contract's error shape.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as AgentClient from "../../src/agent/AgentClient.js"
import { generateDid, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import { toBase64 } from "../../src/core/internal/bytes.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, startHub } from "../hub/support.js"
import { bundle, freePort, startWorkerd, type Workerd } from "./support.js"

const client = Layer.provideMerge(AgentClient.layer(), Layer.merge(FetchHttpClient.layer, KeysNative.layer))

/** The agent's and the caller's identities, and the Worker's bindings naming them. */
const identities = Effect.gen(function* () {
  const agent = yield* generateDid("spelling")
  const caller = yield* generateDid("caller")
  return { agent, caller }
}).pipe(Effect.provide(KeysNative.layer))

describe("the example Worker under workerd", () => {
  it.live("bundles without SQL, node:http or a native module: only node:crypto (nodejs_compat) and MCP's SDK (never loaded) stay outside", () =>
    Effect.gen(function* () {
      const built = yield* Effect.promise(() => bundle("examples/worker/worker.ts"))
      assert.deepStrictEqual(built.inputs.filter((f) => /src\/sql\/|better-sqlite3|@effect\/sql|src\/http\/Serve\.ts|node:http/.test(f)), [])
      assert.deepStrictEqual([...new Set(built.imports)].filter((i) => i !== "node:crypto" && !i.startsWith("@modelcontextprotocol/sdk/")), [])
    }))


  it.live("serves the agent with mesh-sig: a run, a streamed run, a replay refused, an unsigned call refused", () =>
    Effect.gen(function* () {
      const { agent, caller } = yield* identities
      const built = yield* Effect.promise(() => bundle("examples/worker/worker.ts"))
      const port = yield* Effect.promise(freePort)
      const url = `http://127.0.0.1:${port}`
      const workerd: Workerd = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startWorkerd(port, [["worker.js", built.code]], {
            AGENT_DID: agent.did,
            AGENT_PRIVATE_KEY: toBase64(agent.privateKey.toPkcs8()),
            PUBLIC_URL: url,
            CALLER_KEYS: JSON.stringify({ [caller.did]: caller.publicKey })
          })
        ),
        (w) => Effect.promise(w.stop)
      )
      assert.strictEqual(workerd.url, url)

      const health = yield* Effect.promise(() => fetch(`${url}/health`).then((r) => r.json() as Promise<Record<string, unknown>>))
      assert.strictEqual(health.did, agent.did)

      const signAs = { did: caller.did, privateKey: caller.privateKey }
      const agents = yield* AgentClient.AgentClient
      const reply = yield* agents.call(url, "signed envelopes everywhere", { signAs })
      assert.strictEqual("message" in reply ? reply.message : undefined, "SIGNED ENVELOPES EVERYWHERE ")

      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agents.stream(url, "one two three", { signAs })))
      assert.deepStrictEqual(events.filter((e) => e.type === "chunk").map((e) => (e.type === "chunk" ? e.text : "")), ["ONE ", "TWO ", "THREE "])
      const done = events.at(-1)
      assert.strictEqual(done?.type, "done")
      assert.strictEqual(done?.type === "done" ? done.message : undefined, "ONE TWO THREE ")

      // The same signed bytes twice: the nonce store (isolate memory) refuses the second.
      const bytes = new TextEncoder().encode(JSON.stringify({ message: "once" }))
      const headers = yield* signRequest({ method: "POST", url: `${url}/v1/run`, body: bytes }, { privateKey: caller.privateKey, keyId: verificationMethodId(caller.did) }).pipe(
        Effect.provide(KeysNative.layer)
      )
      const send = () => fetch(`${url}/v1/run`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: bytes })
      const first = yield* Effect.promise(send)
      assert.strictEqual(first.status, 200)
      const replayed = yield* Effect.promise(send)
      assert.strictEqual(replayed.status, 401)
      const body = (yield* Effect.promise(() => replayed.json())) as Record<string, unknown>
      assert.strictEqual(body.code, "REPLAYED")
      assert.strictEqual(body._tag, "AgentUnauthorized")
      assert.strictEqual(typeof body.error, "string")
      assert.strictEqual(body.correlationId, replayed.headers.get("x-correlation-id"))

      const unsigned = yield* Effect.promise(() => fetch(`${url}/v1/run`, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"message\":\"x\"}" }))
      assert.strictEqual(unsigned.status, 401)
      const missing = yield* Effect.promise(() => fetch(`${url}/nowhere`))
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(((yield* Effect.promise(() => missing.json())) as Record<string, unknown>).code, "ROUTE_NOT_FOUND")
    }).pipe(Effect.provide(client), Effect.scoped), 60_000)

  it.live("resolves caller keys over HTTP from a hub (MeshClient.layerKeyResolver inside workerd)", () =>
    Effect.gen(function* () {
      const { client: hubClient, hub } = yield* startHub()
      const { identity: caller } = yield* Effect.provide(registeredAgent(hubClient, "registered-caller"), KeysNative.layer)
      const { agent, caller: stranger } = yield* identities
      const built = yield* Effect.promise(() => bundle("examples/worker/worker.ts"))
      const port = yield* Effect.promise(freePort)
      const url = `http://127.0.0.1:${port}`
      yield* Effect.acquireRelease(
        Effect.promise(() =>
          startWorkerd(
            port,
            [["worker.js", built.code]],
            { AGENT_DID: agent.did, AGENT_PRIVATE_KEY: toBase64(agent.privateKey.seed), PUBLIC_URL: url, HUB_URL: hub.url },
            ["nodejs_compat"],
            // The hub listens on loopback; a deployed Worker reaches its hub on the internet.
            ["public", "local"]
          )
        ),
        (w) => Effect.promise(w.stop)
      )
      const agents = yield* AgentClient.AgentClient
      const reply = yield* agents.call(url, "resolved by the hub", { signAs: { did: caller.did, privateKey: caller.privateKey } })
      assert.strictEqual("message" in reply ? reply.message : undefined, "RESOLVED BY THE HUB ")
      const refused = yield* Effect.flip(agents.call(url, "unknown", { signAs: { did: stranger.did, privateKey: stranger.privateKey } }))
      assert.strictEqual(refused.code, "KEY_NOT_FOUND")
    }).pipe(Effect.provide(client), Effect.scoped), 60_000)
})
