/**
 * A MeshServer as a Worker (`MeshServerWeb`, test/runtimes/workerd/mesh-worker.ts) under workerd, without
 * `nodejs_compat`: a signed envelope from Node answered with signed envelopes streamed over SSE, a replay refused.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { generateDid } from "../../src/core/Did.js"
import { buildEnvelope, type Envelope, MESH_REQUEST, validateEnvelope } from "../../src/core/Envelope.js"
import { toBase64 } from "../../src/core/internal/bytes.js"
import * as NonceStore from "../../src/core/NonceStore.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { bundle, freePort, startWorkerd } from "./support.js"

describe("a MeshServer as a Worker under workerd", () => {
  it.live("bundles with no import left", () =>
    Effect.gen(function* () {
      const built = yield* Effect.promise(() => bundle("test/runtimes/workerd/mesh-worker.ts"))
      assert.deepStrictEqual(built.imports, [])
    }))


  it.live("answers a signed envelope with signed replies streamed as SSE; a replay is refused", () =>
    Effect.gen(function* () {
      const server = yield* generateDid("server")
      const alice = yield* generateDid("alice")
      const built = yield* Effect.promise(() => bundle("test/runtimes/workerd/mesh-worker.ts"))
      const port = yield* Effect.promise(freePort)
      const workerd = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startWorkerd(
            port,
            [["mesh.js", built.code]],
            { SERVER_DID: server.did, SERVER_KEY: toBase64(server.privateKey.seed), SENDER_DID: alice.did, SENDER_PUBLIC_KEY: alice.publicKey },
            []
          )
        ),
        (w) => Effect.promise(w.stop)
      )
      const envelope = yield* buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: server.did, body: { capability: "echo", params: { n: 1 } }, privateKey: alice.privateKey })
      const send = (accept: string) =>
        fetch(`${workerd.url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", accept }, body: JSON.stringify(envelope) })
      const streamed = yield* Effect.promise(() => send("text/event-stream"))
      assert.strictEqual(streamed.status, 200)
      assert.match(streamed.headers.get("content-type") ?? "", /^text\/event-stream/)
      const frames = (yield* Effect.promise(() => streamed.text())).split("\n\n").filter((f) => f.trim() !== "")
      const replies = frames.map((f) => JSON.parse(f.split("\n").find((l) => l.startsWith("data: "))!.slice(6)) as Envelope)
      assert.deepStrictEqual(replies.map((r) => r.body), [{ part: 1 }, { echo: { capability: "echo", params: { n: 1 } } }])
      for (const reply of replies) {
        const valid = yield* validateEnvelope(reply, server.publicKey, alice.did, NonceStore.makeMemory())
        assert.strictEqual(valid.correlationId, envelope.correlationId)
      }
      const replayed = yield* Effect.promise(() => send("application/json"))
      assert.strictEqual(replayed.status, 401)
      const body = (yield* Effect.promise(() => replayed.json())) as Record<string, unknown>
      assert.strictEqual(body.code, "REPLAYED")
      assert.strictEqual(body.correlationId, replayed.headers.get("x-correlation-id"))
    }).pipe(Effect.provide(KeysNative.layer), Effect.scoped), 60_000)
})
