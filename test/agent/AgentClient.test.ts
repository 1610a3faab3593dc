import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { startHub } from "../hub/support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

const frame = (id: string, event: string, data: unknown) => `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** An SSE server that drops the first connection after two events and finishes the run for whoever reconnects from `r:1`. */
const flakyServer = Effect.acquireRelease(
  Effect.async<{
    readonly url: string
    readonly lastEventIds: Array<string | undefined>
    readonly signatureInputs: Array<string | undefined>
    readonly signatures: Array<string | undefined>
    readonly server: Http.Server
  }>((resume) => {
    const lastEventIds: Array<string | undefined> = []
    const signatureInputs: Array<string | undefined> = []
    const signatures: Array<string | undefined> = []
    const server = Http.createServer((req, res) => {
      req.resume()
      const last = req.headers["last-event-id"] as string | undefined
      lastEventIds.push(last)
      signatureInputs.push(req.headers["signature-input"] as string | undefined)
      signatures.push(req.headers["signature"] as string | undefined)
      res.writeHead(200, { "content-type": "text/event-stream" })
      if (last === undefined) {
        res.write(frame("r:0", "chunk", { text: "a" }) + frame("r:1", "chunk", { text: "b" }))
        setImmediate(() => res.destroy())
      } else if (last === "r:1") {
        res.end(frame("r:2", "chunk", { text: "c" }) + frame("r:3", "done", { message: "abc", sessionId: "s" }))
      } else res.end(frame("r:9", "error", { _tag: "AgentNotFound", error: "no", code: "RUN_NOT_FOUND", correlationId: "x" }))
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`, lastEventIds, signatureInputs, signatures, server }))
    )
  }),
  ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
)

describe("agent client", () => {
  it.live("a dropped stream reconnects with Last-Event-ID and yields every event exactly once", () =>
    provide(
      Effect.gen(function* () {
        const fake = yield* flakyServer
        const client = yield* AgentClient.make()
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(client.stream(fake.url, "go")))
        assert.deepStrictEqual(events, [
          { type: "chunk", text: "a" },
          { type: "chunk", text: "b" },
          { type: "chunk", text: "c" },
          { type: "done", message: "abc", sessionId: "s" }
        ])
        assert.deepStrictEqual(fake.lastEventIds, [undefined, "r:1"])
      })
    ))

  it.live("with signAs, every reconnect is signed afresh: a new nonce and a new signature", () =>
    provide(
      Effect.gen(function* () {
        const fake = yield* flakyServer
        const alice = yield* generateDid("alice")
        const client = yield* AgentClient.make()
        const events = Chunk.toReadonlyArray(yield* Stream.runCollect(client.stream(fake.url, "go", { signAs: { did: alice.did, privateKey: alice.privateKey } })))
        assert.strictEqual(events.length, 4)
        assert.deepStrictEqual(fake.lastEventIds, [undefined, "r:1"])
        const nonces = fake.signatureInputs.map((input) => /;nonce="([^"]+)"/.exec(input ?? "")?.[1])
        assert.strictEqual(nonces.length, 2)
        assert.isString(nonces[0])
        assert.isString(nonces[1])
        assert.notStrictEqual(nonces[0], nonces[1])
        assert.notStrictEqual(fake.signatures[0], fake.signatures[1])
      })
    ))

  it.live("errors carry the agent's code; an unknown didHash is AGENT_NOT_FOUND; an unreachable agent AGENT_UNREACHABLE", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub()
        const agent = yield* AgentServer.make({ name: "guarded", handler: () => "never", auth: "bearer", bearerTokens: ["t"], database: ":memory:" })
        const client = yield* AgentClient.make({ hubUrl: hub.url })
        const refused = yield* Effect.flip(client.call(agent.url, "hi"))
        assert.strictEqual(refused.code, "AUTH_REQUIRED")
        assert.strictEqual(refused.status, 401)
        const ok = yield* client.call(agent.url, "hi", { bearerToken: "t" })
        assert.strictEqual("message" in ok ? ok.message : "", "never")
        const streamed = yield* Effect.flip(Stream.runDrain(client.stream(agent.url, "hi")))
        assert.strictEqual(streamed.code, "AUTH_REQUIRED")
        assert.strictEqual((yield* Effect.flip(client.call("aaaaaaaaaaaaaaaaaaaaaaaa", "hi"))).code, "AGENT_NOT_FOUND")
        assert.strictEqual((yield* Effect.flip(client.call("http://127.0.0.1:1", "hi"))).code, "AGENT_UNREACHABLE")
      })
    ))
})
