/**
 * The clients' cap on replies that are not event streams: a peer answering a huge body under another type than
 * `text/event-stream` (declared with Content-Length or sent chunked) gets `REPLY_TOO_LARGE`, and is read no further
 * than the cap and a chunk.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as AgentClient from "../../src/agent/AgentClient.js"
import { buildEnvelope, MESH_REQUEST } from "../../src/core/Envelope.js"
import { Keys } from "../../src/core/Keys.js"
import * as Sse from "../../src/core/Sse.js"
import * as MessageClient from "../../src/mesh/MessageClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"

const CHUNK = 64 * 1024
const CAP = Sse.DEFAULT_MAX_REPLY_BYTES
/** Where the fake peer's body ends, so a broken (unbounded) reader stops anyway: twice the default cap. */
const SOURCE_BYTES = 2 * CAP

interface PeerAnswer {
  readonly status?: number
  readonly contentType?: string
  /** Declare the whole body's length up front. */
  readonly declare?: boolean
  readonly size?: number
}

/**
 * A fake peer: every request gets `size` bytes of `a` pulled chunk by chunk (a pull-driven body hands out only what
 * is read), counting the bytes handed out and whether the client cancelled the body.
 */
const fakePeer = (answer: PeerAnswer = {}) => {
  const size = answer.size ?? SOURCE_BYTES
  const sent = { bytes: 0, requests: 0, cancelled: 0 }
  const client = HttpClient.make((request) =>
    Effect.sync(() => {
      sent.requests++
      let left = size
      const body = new ReadableStream<Uint8Array>(
        {
          pull: (controller) => {
            if (left === 0) return controller.close()
            const n = Math.min(CHUNK, left)
            left -= n
            sent.bytes += n
            controller.enqueue(new Uint8Array(n).fill(0x61))
          },
          cancel: () => void sent.cancelled++
        },
        { highWaterMark: 0 }
      )
      const headers: Record<string, string> = { "content-type": answer.contentType ?? "application/json" }
      if (answer.declare === true) headers["content-length"] = String(size)
      return HttpClientResponse.fromWeb(request, new Response(body, { status: answer.status ?? 200, headers }))
    })
  )
  return { sent, layer: Layer.succeed(HttpClient.HttpClient, client) }
}

/** A peer answering one fixed text. */
const textPeer = (text: string, status = 200) =>
  Layer.succeed(
    HttpClient.HttpClient,
    HttpClient.make((request) => Effect.succeed(HttpClientResponse.fromWeb(request, new Response(text, { status, headers: { "content-type": "application/json" } }))))
  )

/**
 * A real server answering every request with up to `total` bytes of JSON-typed junk, written as fast as the
 * connection drains, until the client hangs up; `closed` resolves with the bytes it managed to write.
 */
const floodServer = (total: number, declare: boolean) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly closed: Promise<number>; readonly server: Http.Server }>((resume) => {
      let done: (written: number) => void = () => undefined
      const closed = new Promise<number>((r) => (done = r))
      const chunk = Buffer.alloc(CHUNK, 0x61)
      const server = Http.createServer((req, res) => {
        req.resume()
        let written = 0
        let gone = false
        res.on("close", () => {
          gone = true
          done(written)
        })
        res.writeHead(200, { "content-type": "application/json", ...(declare ? { "content-length": String(total) } : {}) })
        const pump = () => {
          while (!gone && written < total) {
            written += CHUNK
            if (!res.write(chunk)) return void res.once("drain", pump)
          }
          if (!gone) res.end()
        }
        pump()
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`, closed, server })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  )

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(e), (err) => err.code)

/** Read no further than the cap and a chunk or two, and let go of the body. */
const assertCounted = (sent: { readonly bytes: number; readonly cancelled: number }, cap = CAP) => {
  assert.isAtMost(sent.bytes, cap + 2 * CHUNK)
  assert.isAtLeast(sent.bytes, cap)
  assert.strictEqual(sent.cancelled, 1)
}

/** Refused on its declared length: at most one chunk handed out, and the body let go. */
const assertRefusedUnread = (sent: { readonly bytes: number; readonly cancelled: number }) => {
  assert.isAtMost(sent.bytes, CHUNK)
  assert.strictEqual(sent.cancelled, 1)
}

const envelope = Effect.gen(function* () {
  const keys = yield* Keys
  return yield* buildEnvelope({ type: MESH_REQUEST, from: "did:mesh:alice", to: "did:mesh:bob", body: {}, privateKey: yield* keys.generate })
})

describe("Sse.readReply", () => {
  const read = (chunks: ReadonlyArray<number>, limit: Sse.ReplyLimit) =>
    Effect.either(Sse.readReply(Stream.fromIterable(chunks.map((n) => new Uint8Array(n).fill(0x62))), limit))

  it.effect("a body of exactly the cap is read whole; one byte more is ReplyTooLarge, whatever Content-Length says", () =>
    Effect.gen(function* () {
      const exact = yield* read([60, 40], { maxBytes: 100 })
      assert.deepStrictEqual(exact, Either.right("b".repeat(100)))
      const over = yield* read([60, 41], { maxBytes: 100 })
      assert.isTrue(Either.isLeft(over) && over.left._tag === "ReplyTooLarge" && over.left.maxBytes === 100)
      // A peer that declares less than it sends is still stopped by the count.
      const lying = yield* read([60, 60], { maxBytes: 100, contentLength: "10" })
      assert.isTrue(Either.isLeft(lying) && lying.left._tag === "ReplyTooLarge")
      const declared = yield* read([1], { maxBytes: 100, contentLength: "101" })
      assert.isTrue(Either.isLeft(declared) && declared.left._tag === "ReplyTooLarge")
      // An unreadable Content-Length is left to the count.
      assert.deepStrictEqual(yield* read([5], { maxBytes: 100, contentLength: "lots" }), Either.right("bbbbb"))
      // Multi-byte text split across chunks decodes whole.
      const utf = new TextEncoder().encode("héllo")
      const split = yield* Effect.either(Sse.readReply(Stream.make(utf.subarray(0, 2), utf.subarray(2)), { maxBytes: 100 }))
      assert.deepStrictEqual(split, Either.right("héllo"))
    }))
})

describe("AgentClient: replies that are not event streams are bounded", () => {
  it.effect("call: a huge chunked reply is REPLY_TOO_LARGE after at most the cap and a chunk or two", () =>
    Effect.gen(function* () {
      const peer = fakePeer()
      const client = yield* AgentClient.make().pipe(Effect.provide(peer.layer))
      assert.strictEqual(yield* codeOf(client.call("http://agent.test", "go")), AgentClient.REPLY_TOO_LARGE)
      assertCounted(peer.sent)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("call and discover: a declared Content-Length over the cap is refused before the body is read", () =>
    Effect.gen(function* () {
      const peer = fakePeer({ declare: true })
      const client = yield* AgentClient.make().pipe(Effect.provide(peer.layer))
      const error = yield* Effect.flip(client.call("http://agent.test", "go"))
      assert.strictEqual(error.code, AgentClient.REPLY_TOO_LARGE)
      assert.strictEqual(error.status, 200)
      assertRefusedUnread(peer.sent)
      const other = fakePeer({ declare: true })
      const discovering = yield* AgentClient.make().pipe(Effect.provide(other.layer))
      assert.strictEqual(yield* codeOf(discovering.discover("http://agent.test")), AgentClient.REPLY_TOO_LARGE)
      assertRefusedUnread(other.sent)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("stream: a peer answering without text/event-stream (success or error status) is held to the same cap", () =>
    Effect.gen(function* () {
      for (const status of [200, 500]) {
        const peer = fakePeer({ status, contentType: "text/plain" })
        const client = yield* AgentClient.make().pipe(Effect.provide(peer.layer))
        const result = yield* Effect.either(Stream.runDrain(client.stream("http://agent.test", "go")))
        assert.isTrue(Either.isLeft(result) && result.left.code === AgentClient.REPLY_TOO_LARGE, `HTTP ${status}`)
        assertCounted(peer.sent)
        assert.strictEqual(peer.sent.requests, 1)
      }
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("maxReplyBytes sets the cap: a reply under it is read, the same reply over a smaller cap is refused", () =>
    Effect.gen(function* () {
      const reply = JSON.stringify({ message: "x".repeat(2000), sessionId: "s1" })
      const roomy = yield* AgentClient.make({ maxReplyBytes: 4096 }).pipe(Effect.provide(textPeer(reply)))
      const result = yield* roomy.call("http://agent.test", "go")
      assert.strictEqual("sessionId" in result ? result.sessionId : undefined, "s1")
      const tight = yield* AgentClient.make({ maxReplyBytes: 1024 }).pipe(Effect.provide(textPeer(reply)))
      assert.strictEqual(yield* codeOf(tight.call("http://agent.test", "go")), AgentClient.REPLY_TOO_LARGE)
      // An error body keeps its code under the cap.
      const refusal = JSON.stringify({ _tag: "AgentForbidden", error: "no", code: "CALLER_NOT_ALLOWED" })
      const refused = yield* AgentClient.make({ maxReplyBytes: 1024 }).pipe(Effect.provide(textPeer(refusal, 403)))
      assert.strictEqual(yield* codeOf(refused.call("http://agent.test", "go")), "CALLER_NOT_ALLOWED")
      const peer = fakePeer()
      const small = yield* AgentClient.make({ maxReplyBytes: 256 * 1024 }).pipe(Effect.provide(peer.layer))
      assert.strictEqual(yield* codeOf(small.call("http://agent.test", "go")), AgentClient.REPLY_TOO_LARGE)
      assertCounted(peer.sent, 256 * 1024)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("over a real connection (fetch)", () => {
  // Far beyond what socket buffers hold, so a client that reads on (or never lets go) shows in the count.
  const FLOOD = 256 * 1024 * 1024
  for (const declare of [false, true]) {
    it.live(`AgentClient.call: a flood ${declare ? "with" : "without"} Content-Length is REPLY_TOO_LARGE and the connection is dropped early`, () =>
      Effect.gen(function* () {
        const server = yield* floodServer(FLOOD, declare)
        const client = yield* AgentClient.make({ maxReplyBytes: 256 * 1024 })
        assert.strictEqual(yield* codeOf(client.call(server.url, "go")), AgentClient.REPLY_TOO_LARGE)
        const written = yield* Effect.promise(() => server.closed).pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("the client never hung up") }))
        assert.isBelow(written, FLOOD / 4)
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer)))
  }
})

describe("MessageClient: answers that are not event streams are bounded", () => {
  it.effect("send: a huge reply, chunked or declared, is REPLY_TOO_LARGE within the cap and a chunk or two", () =>
    Effect.gen(function* () {
      const env = yield* envelope
      const chunked = fakePeer()
      const client = yield* MessageClient.make().pipe(Effect.provide(chunked.layer))
      assert.strictEqual(yield* codeOf(client.send("http://mesh.test", env)), MessageClient.REPLY_TOO_LARGE)
      assertCounted(chunked.sent)
      const declared = fakePeer({ declare: true })
      const other = yield* MessageClient.make().pipe(Effect.provide(declared.layer))
      assert.strictEqual(yield* codeOf(other.send("http://mesh.test", env)), MessageClient.REPLY_TOO_LARGE)
      assertRefusedUnread(declared.sent)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a huge refusal body, and a huge plain answer to a stream request, are REPLY_TOO_LARGE too", () =>
    Effect.gen(function* () {
      const env = yield* envelope
      const refusal = fakePeer({ status: 400 })
      const client = yield* MessageClient.make().pipe(Effect.provide(refusal.layer))
      const error = yield* Effect.flip(client.send("http://mesh.test", env))
      assert.strictEqual(error.code, MessageClient.REPLY_TOO_LARGE)
      assert.strictEqual(error.status, 400)
      assertCounted(refusal.sent)
      const plain = fakePeer()
      const streaming = yield* MessageClient.make().pipe(Effect.provide(plain.layer))
      const result = yield* Effect.either(Stream.runDrain(streaming.stream("http://mesh.test", env)))
      assert.isTrue(Either.isLeft(result) && result.left.code === MessageClient.REPLY_TOO_LARGE)
      assertCounted(plain.sent)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("maxReplyBytes sets the cap", () =>
    Effect.gen(function* () {
      const env = yield* envelope
      const peer = fakePeer()
      const client = yield* MessageClient.make({ maxReplyBytes: 128 * 1024 }).pipe(Effect.provide(peer.layer))
      assert.strictEqual(yield* codeOf(client.send("http://mesh.test", env)), MessageClient.REPLY_TOO_LARGE)
      assertCounted(peer.sent, 128 * 1024)
      // Under the cap the answer is read and judged on what it says: a body that is not JSON.
      const roomy = yield* MessageClient.make({ maxReplyBytes: 128 * 1024 }).pipe(Effect.provide(textPeer("not json")))
      assert.strictEqual(yield* codeOf(roomy.send("http://mesh.test", env)), MessageClient.INVALID_RESPONSE)
    }).pipe(Effect.provide(KeysNative.layer)))
})
