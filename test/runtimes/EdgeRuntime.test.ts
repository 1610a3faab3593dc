/**
 * The example agent (examples/worker/edge.ts, the same fetch handler as the Worker) in the edge-runtime package's
 * Edge VM, the runtime Vercel's Edge Functions emulate: bundled with no Node module at all, served by the package's
 * own server and called from Node with mesh-sig, a streamed run and a replay included.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { EdgeRuntime, runServer } from "edge-runtime"
import * as path from "node:path"
import * as AgentClient from "../../src/agent/AgentClient.js"
import { generateDid, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import { toBase64 } from "../../src/core/internal/bytes.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { bundle, freePort } from "./support.js"

const client = Layer.provideMerge(AgentClient.layer(), Layer.merge(FetchHttpClient.layer, KeysNative.layer))

/** The Edge bundle: node:crypto aliased to the Web Crypto shim, Buffer injected (docs/runtimes.md, "Vercel Edge"). */
const edgeBundle = () =>
  bundle("examples/worker/edge.ts", {
    format: "iife",
    globalName: "meshEdge",
    alias: { "node:crypto": path.resolve("examples/worker/edge-node-crypto.ts") },
    inject: [path.resolve("examples/worker/edge-buffer.ts")]
  })

describe("the example agent in the Edge VM", () => {
  it.live("bundles with no import left: no node:*, no SQL, no native module", () =>
    Effect.gen(function* () {
      const built = yield* Effect.promise(edgeBundle)
      assert.deepStrictEqual(built.inputs.filter((f) => /src\/sql\/|better-sqlite3|@effect\/sql|src\/http\/Serve\.ts/.test(f)), [])
      assert.deepStrictEqual([...new Set(built.imports)].filter((i) => !i.startsWith("@modelcontextprotocol/sdk/")), [])
    }))

  it.live("serves the agent with mesh-sig: a run, a streamed run, a replay refused", () =>
    Effect.gen(function* () {
      const keys = KeysNative.layer
      const agent = yield* Effect.provide(generateDid("spelling"), keys)
      const caller = yield* Effect.provide(generateDid("caller"), keys)
      const built = yield* Effect.promise(edgeBundle)
      const port = yield* Effect.promise(freePort)
      const url = `http://127.0.0.1:${port}`
      const env = {
        AGENT_DID: agent.did,
        AGENT_PRIVATE_KEY: toBase64(agent.privateKey.seed),
        PUBLIC_URL: url,
        CALLER_KEYS: JSON.stringify({ [caller.did]: caller.publicKey })
      }
      const runtime = new EdgeRuntime({
        // Vercel gives an Edge Function its settings as process.env.
        extend: (context) => Object.assign(context, { process: { env } }),
        initialCode: `${built.code}\naddEventListener("fetch", (event) => event.respondWith(meshEdge.default(event.request)))`
      })
      // Inside the VM there is no Buffer and no node:crypto: what the bundle runs on is the Web platform alone.
      assert.strictEqual(runtime.evaluate("typeof Buffer"), "undefined")
      yield* Effect.acquireRelease(
        Effect.promise(() => runServer({ runtime, port, host: "127.0.0.1" })),
        (server) => Effect.promise(() => server.close())
      )

      const signAs = { did: caller.did, privateKey: caller.privateKey }
      const agents = yield* AgentClient.AgentClient
      const reply = yield* agents.call(url, "edge functions too", { signAs })
      assert.strictEqual("message" in reply ? reply.message : undefined, "EDGE FUNCTIONS TOO ")

      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(agents.stream(url, "one two three", { signAs })))
      assert.deepStrictEqual(events.filter((e) => e.type === "chunk").map((e) => (e.type === "chunk" ? e.text : "")), ["ONE ", "TWO ", "THREE "])
      assert.strictEqual(events.at(-1)?.type, "done")

      const bytes = new TextEncoder().encode(JSON.stringify({ message: "once" }))
      const headers = yield* signRequest({ method: "POST", url: `${url}/v1/run`, body: bytes }, { privateKey: caller.privateKey, keyId: verificationMethodId(caller.did) }).pipe(
        Effect.provide(keys)
      )
      const send = () => fetch(`${url}/v1/run`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: bytes })
      assert.strictEqual((yield* Effect.promise(send)).status, 200)
      const replayed = yield* Effect.promise(send)
      assert.strictEqual(replayed.status, 401)
      const body = (yield* Effect.promise(() => replayed.json())) as Record<string, unknown>
      assert.strictEqual(body.code, "REPLAYED")
      assert.strictEqual(body.correlationId, replayed.headers.get("x-correlation-id"))
    }).pipe(Effect.provide(client), Effect.scoped), 60_000)
})
