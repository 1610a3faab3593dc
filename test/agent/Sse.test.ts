/**
 * The shared SSE reader and writer, and the clients reading through it: bounded per event and per stream, strict
 * JSON in event data and in the discovery document.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { buildEnvelope, MESH_REQUEST } from "../../src/core/Envelope.js"
import { Keys } from "../../src/core/Keys.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as MessageClient from "../../src/mesh/MessageClient.js"
import * as Sse from "../../src/core/Sse.js"

const bytes = (s: string) => new TextEncoder().encode(s)

const parseAll = (chunks: ReadonlyArray<string | Uint8Array>, limits?: Sse.SseLimits) =>
  Stream.runCollect(Sse.parse(Stream.fromIterable(chunks.map((c) => (typeof c === "string" ? bytes(c) : c))), limits)).pipe(
    Effect.map(Chunk.toReadonlyArray),
    Effect.either
  )

/**
 * A fake peer: answers every request with an SSE body pulled chunk by chunk from `next` (undefined ends it),
 * counting the bytes it has handed out.
 */
const fakePeer = (next: (i: number) => Uint8Array | undefined, contentType = Sse.CONTENT_TYPE) => {
  const sent = { bytes: 0, requests: 0 }
  const client = HttpClient.make((request) =>
    Effect.sync(() => {
      sent.requests++
      let i = 0
      const body = new ReadableStream<Uint8Array>(
        {
          pull: (controller) => {
            const chunk = next(i++)
            if (chunk === undefined) return controller.close()
            sent.bytes += chunk.length
            controller.enqueue(chunk)
          }
        },
        { highWaterMark: 0 }
      )
      return HttpClientResponse.fromWeb(request, new Response(body, { status: 200, headers: { "content-type": contentType } }))
    })
  )
  return { sent, layer: Layer.succeed(HttpClient.HttpClient, client) }
}

const CHUNK = 64 * 1024
/** Where a broken (unbounded) reader would stop anyway, so the test stays bounded: 8 MiB. */
const SOURCE_CAP = 128

describe("SSE", () => {
  it.effect("reads events split anywhere, with LF, CR or CRLF line ends, multi-line data, comments and a BOM", () =>
    Effect.gen(function* () {
      const text = "\uFEFFid: 1\r\nevent: chunk\r\ndata: a\r\ndata: b\r\n\r\n: keep-alive\rdata: c\r\rid: 2\nevent: done\ndata: {}\n\nretry: 5\ndata: unfinished"
      const whole = yield* parseAll([text])
      const expected = [
        { id: "1", event: "chunk", data: "a\nb" },
        { id: "1", event: "message", data: "c" },
        { id: "2", event: "done", data: "{}" }
      ]
      assert.deepStrictEqual(whole, Either.right(expected))
      // The same bytes one at a time: every split point, a CR and its LF in different chunks included.
      const split = Array.from(bytes(text), (b) => new Uint8Array([b]))
      assert.deepStrictEqual(yield* parseAll(split), Either.right(expected))
    }))

  it.effect("encodeEvent frames an event that parse reads back, a data value with line breaks included", () =>
    Effect.gen(function* () {
      const frame = Sse.encodeEvent({ id: "r:3", event: "chunk", data: "line one\nline two\r\nthree" })
      assert.strictEqual(frame, "id: r:3\nevent: chunk\ndata: line one\ndata: line two\ndata: three\n\n")
      assert.deepStrictEqual(yield* parseAll([frame]), Either.right([{ id: "r:3", event: "chunk", data: "line one\nline two\nthree" }]))
    }))

  it.effect("an event past maxEventBytes, terminated or not, fails with SseLimitExceeded; so does a stream past maxStreamBytes", () =>
    Effect.gen(function* () {
      const long = yield* parseAll([`data: ${"x".repeat(200)}\n`, "\n"], { maxEventBytes: 100 })
      assert.isTrue(Either.isLeft(long) && long.left._tag === "SseLimitExceeded" && long.left.limit === "event")
      const manyLines = yield* parseAll(Array.from({ length: 20 }, () => "data: 0123456789\n"), { maxEventBytes: 100 })
      assert.isTrue(Either.isLeft(manyLines) && manyLines.left._tag === "SseLimitExceeded" && manyLines.left.limit === "event")
      const unterminated = yield* parseAll(["data: ", "y".repeat(60), "y".repeat(60)], { maxEventBytes: 100 })
      assert.isTrue(Either.isLeft(unterminated) && unterminated.left._tag === "SseLimitExceeded" && unterminated.left.limit === "event")
      const stream = yield* parseAll(Array.from({ length: 20 }, () => "data: 0123456789\n\n"), { maxStreamBytes: 100 })
      assert.isTrue(Either.isLeft(stream) && stream.left._tag === "SseLimitExceeded" && stream.left.limit === "stream")
      // Under the limits, the same events are read.
      assert.isTrue(Either.isRight(yield* parseAll(Array.from({ length: 20 }, () => "data: 0123456789\n\n"))))
    }))

  it.effect("AgentClient: an unterminated huge event ends in SSE_LIMIT_EXCEEDED before the peer sent more than the limit and a chunk", () =>
    Effect.gen(function* () {
      const peer = fakePeer((i) => (i === 0 ? bytes("id: r:0\nevent: chunk\ndata: ") : i < SOURCE_CAP ? new Uint8Array(CHUNK).fill(0x61) : undefined))
      const client = yield* AgentClient.make().pipe(Effect.provide(peer.layer))
      const result = yield* Effect.either(Stream.runDrain(client.stream("http://agent.test", "go")))
      assert.isTrue(Either.isLeft(result))
      if (Either.isLeft(result)) assert.strictEqual(result.left.code, "SSE_LIMIT_EXCEEDED")
      assert.isAtMost(peer.sent.bytes, Sse.DEFAULT_MAX_EVENT_BYTES + 2 * CHUNK)
      assert.isAtLeast(peer.sent.bytes, Sse.DEFAULT_MAX_EVENT_BYTES)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("AgentClient: the limits are configurable; a stream past maxStreamBytes is SSE_LIMIT_EXCEEDED too, and not retried", () =>
    Effect.gen(function* () {
      const keepAlive = bytes(`: ${"k".repeat(1022)}\n`)
      // A first event with an id, so a client that took the limit for a dropped connection would reconnect.
      const first = bytes(`id: r:0\nevent: chunk\ndata: {"text":"a"}\n\n`)
      const peer = fakePeer((i) => (i === 0 ? first : i < SOURCE_CAP * 64 ? keepAlive : undefined))
      const client = yield* AgentClient.make({ sse: { maxStreamBytes: 256 * 1024 } }).pipe(Effect.provide(peer.layer))
      const seen: Array<AgentClient.StreamEvent> = []
      const result = yield* Effect.either(Stream.runForEach(client.stream("http://agent.test", "go"), (e) => Effect.sync(() => void seen.push(e))))
      assert.isTrue(Either.isLeft(result) && result.left.code === "SSE_LIMIT_EXCEEDED")
      assert.deepStrictEqual(seen, [{ type: "chunk", text: "a" }])
      assert.strictEqual(peer.sent.requests, 1)
      assert.isAtMost(peer.sent.bytes, 256 * 1024 + 2 * keepAlive.length)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("MessageClient: an unterminated huge event ends in SSE_LIMIT_EXCEEDED at the limit", () =>
    Effect.gen(function* () {
      const keys = yield* Keys
      const key = yield* keys.generate
      const envelope = yield* buildEnvelope({ type: MESH_REQUEST, from: "did:mesh:alice", to: "did:mesh:bob", body: {}, privateKey: key })
      const peer = fakePeer((i) => (i === 0 ? bytes("data: ") : i < SOURCE_CAP ? new Uint8Array(CHUNK).fill(0x62) : undefined))
      const client = yield* MessageClient.make({ sse: { maxEventBytes: 256 * 1024 } }).pipe(Effect.provide(peer.layer))
      const result = yield* Effect.either(Stream.runDrain(client.stream("http://mesh.test", envelope)))
      assert.isTrue(Either.isLeft(result) && result.left.code === MessageClient.SSE_LIMIT_EXCEEDED)
      assert.isAtMost(peer.sent.bytes, 256 * 1024 + 2 * CHUNK)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("AgentClient: event data with a duplicate member is BAD_RESPONSE (strict JSON)", () =>
    Effect.gen(function* () {
      const frames = [bytes('id: r:0\nevent: done\ndata: {"message":"a","message":"b","sessionId":"s"}\n\n')]
      const peer = fakePeer((i) => frames[i])
      const client = yield* AgentClient.make().pipe(Effect.provide(peer.layer))
      const result = yield* Effect.either(Stream.runDrain(client.stream("http://agent.test", "go")))
      assert.isTrue(Either.isLeft(result) && result.left.code === "BAD_RESPONSE")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("AgentClient.discover reads the signed discovery document, strictly", () =>
    Effect.gen(function* () {
      const dup = fakePeer((i) => (i === 0 ? bytes('{"did":"did:mesh:a","did":"did:mesh:b"}') : undefined), "application/json")
      const bad = yield* Effect.either((yield* AgentClient.make().pipe(Effect.provide(dup.layer))).discover("http://agent.test"))
      assert.isTrue(Either.isLeft(bad) && bad.left.code === "BAD_RESPONSE")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.live("AgentClient.discover against a real agent", () =>
    Effect.gen(function* () {
      const agent = yield* AgentServer.make({ name: "disc", handler: () => "x", database: ":memory:" })
      const client = yield* AgentClient.make()
      const doc = yield* client.discover(agent.url)
      assert.strictEqual(doc.did, agent.did)
      assert.strictEqual(doc.type, "MeshAgent")
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer)))
})
