import * as OpenApi from "@effect/platform/OpenApi"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Http from "node:http"
import { buildEnvelope, type Envelope, MESH_REQUEST, MESH_RESPONSE, validateEnvelope } from "../src/core/Envelope.js"
import { KeyResolver } from "../src/core/KeyResolver.js"
import { Keys, type PrivateKey } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as MeshServer from "../src/mesh/MeshServer.js"
import { MeshServerApi, MessageForbidden } from "../src/mesh/MeshServerApi.js"
import * as MessageClient from "../src/mesh/MessageClient.js"
import * as NonceStore from "../src/core/NonceStore.js"
import * as Mesh from "../src/promise/Promise.js"

class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}

const SERVER = "did:mesh:test.server"
const ALICE = "did:mesh:test.alice"
const BOB = "did:mesh:test.bob"
const CAROL = "did:mesh:test.carol"
const MALLORY = "did:mesh:test.mallory"

// Every test gets its own client (and so its own reply nonce store) on node:crypto keys.
const TestLayer = MessageClient.layer().pipe(Layer.provideMerge(KeysNative.layer))

interface Parties {
  readonly server: PrivateKey
  readonly alice: PrivateKey
  readonly bob: PrivateKey
  readonly carol: PrivateKey
  readonly mallory: PrivateKey
  /** The keys the server knows; mallory is not among them. */
  readonly known: ReadonlyMap<string, Uint8Array>
}

const parties = Effect.gen(function* () {
  const keys = yield* Keys
  const [server, alice, bob, carol, mallory] = yield* Effect.all([keys.generate, keys.generate, keys.generate, keys.generate, keys.generate])
  const known = new Map([
    [SERVER, server.publicKey],
    [ALICE, alice.publicKey],
    [BOB, bob.publicKey],
    [CAROL, carol.publicKey]
  ])
  return { server, alice, bob, carol, mallory, known } satisfies Parties
})

const echo: MeshServer.MessageHandler = (envelope, respond) => respond({ capability: "echo", result: envelope.body })

/** A server on 127.0.0.1:0 that knows everyone but mallory and echoes; `options` override. */
const start = (p: Parties, options: Partial<MeshServer.MeshServerOptions> = {}) =>
  MeshServer.make({ agentDid: SERVER, privateKey: p.server, resolvePublicKey: (did) => p.known.get(did) ?? null, onMessage: echo, ...options })

const request = (from: string, key: PrivateKey, params: unknown = { n: 1 }, extra: { readonly to?: string; readonly ttlSeconds?: number } = {}) =>
  buildEnvelope({
    type: MESH_REQUEST,
    from,
    to: extra.to ?? SERVER,
    body: { capability: "echo", params },
    privateKey: key,
    ...(extra.ttlSeconds === undefined ? {} : { ttlSeconds: extra.ttlSeconds })
  })

/** The refusal a send ends with. */
const refusal = <R>(effect: Effect.Effect<unknown, MessageClient.MessageClientError, R>) =>
  Effect.map(Effect.flip(effect), (e) => ({ code: e.code, status: e.status, retryAfterSeconds: e.retryAfterSeconds, message: e.message, reason: e.reason }))

interface RawReply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

/** A raw request, for what the client hides (headers, exact bytes). */
const raw = (url: string, init: RequestInit = {}) =>
  Effect.promise(async (): Promise<RawReply> => {
    const res = await fetch(url, init)
    return { status: res.status, headers: res.headers, text: await res.text() }
  })

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  raw(`${url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

describe("MeshServer", () => {
  it.scoped("answers a request with a reply signed by the server, addressed and correlated to the request", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const env = yield* request(ALICE, p.alice, { text: "hi" })
      const reply = yield* MessageClient.send(server.url, env)
      assert.isNotNull(reply)
      if (reply === null) return
      assert.strictEqual(reply.type, MESH_RESPONSE)
      assert.strictEqual(reply.from, SERVER)
      assert.strictEqual(reply.to, ALICE)
      assert.strictEqual(reply.correlationId, env.correlationId)
      assert.deepStrictEqual(reply.body, { capability: "echo", result: { capability: "echo", params: { text: "hi" } } })
      // Alice checks the reply as any envelope: under the server's key, addressed to her.
      const checked = yield* validateEnvelope(reply, p.server.publicKey, ALICE, NonceStore.makeMemory())
      assert.strictEqual(checked.id, reply.id)
      // The client verifies replies itself when given the server's key; the endpoint may name the path.
      const again = yield* MessageClient.send(`${server.url}/v1/messages`, yield* request(ALICE, p.alice), { serverPublicKey: p.server.publicKeyB64 })
      assert.strictEqual(again?.from, SERVER)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("awaits a Promise handler, and answers 202 (null) when the handler never responds", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const seen: Array<string> = []
      const server = yield* start(p, {
        onMessage: async (envelope) => {
          await Promise.resolve()
          seen.push(envelope.id)
        }
      })
      const env = yield* request(ALICE, p.alice)
      assert.isNull(yield* MessageClient.send(server.url, env))
      assert.deepStrictEqual(seen, [env.id])
      const reply = yield* post(server.url, JSON.stringify(yield* request(ALICE, p.alice)))
      assert.strictEqual(reply.status, 202)
      assert.strictEqual(reply.text, "")
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("without SSE answers the last respond, else the last chunk", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, {
        onMessage: (envelope, respond, stream) => {
          const params = envelope.body.params as { readonly mode: string }
          stream({ part: 1 })
          stream({ part: 2 })
          if (params.mode === "respond") {
            respond({ final: 1 })
            respond({ final: 2 }, { type: "Custom" })
          }
        }
      })
      const responded = yield* MessageClient.send(server.url, yield* request(ALICE, p.alice, { mode: "respond" }))
      assert.strictEqual(responded?.type, "Custom")
      assert.deepStrictEqual(responded?.body, { final: 2 })
      const chunked = yield* MessageClient.send(server.url, yield* request(ALICE, p.alice, { mode: "chunks" }))
      assert.strictEqual(chunked?.type, MeshServer.MESH_STREAM_CHUNK)
      assert.deepStrictEqual(chunked?.body, { part: 2 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("streams chunks as server-sent events while the handler runs, each a signed envelope", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const gate = yield* Deferred.make<void>()
      const server = yield* start(p, {
        onMessage: (_envelope, respond, stream) =>
          Effect.gen(function* () {
            stream({ part: 1 })
            // The client opens the gate on the first event: it must arrive before the handler finishes.
            yield* Deferred.await(gate)
            stream({ part: 2 })
            stream({ part: 3 })
            respond({ done: true })
          })
      })
      const env = yield* request(ALICE, p.alice)
      const replies = yield* MessageClient.stream(server.url, env, { serverPublicKey: p.server.publicKey }).pipe(
        Stream.tap(() => Deferred.succeed(gate, undefined)),
        Stream.runCollect,
        Effect.map(Chunk.toReadonlyArray)
      )
      assert.deepStrictEqual(
        replies.map((r) => [r.type, r.body]),
        [
          [MeshServer.MESH_STREAM_CHUNK, { part: 1 }],
          [MeshServer.MESH_STREAM_CHUNK, { part: 2 }],
          [MeshServer.MESH_STREAM_CHUNK, { part: 3 }],
          [MESH_RESPONSE, { done: true }]
        ]
      )
      assert.isTrue(replies.every((r) => r.correlationId === env.correlationId && r.to === ALICE && r.from === SERVER))
      assert.strictEqual(new Set(replies.map((r) => r.nonce)).size, 4)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("writes one `id:` and one `data:` line (the envelope JSON) per event", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, {
        onMessage: (_e, respond, stream) => {
          stream({ part: 1 })
          respond({ done: true })
        }
      })
      const reply = yield* post(server.url, JSON.stringify(yield* request(ALICE, p.alice)), { accept: "text/event-stream" })
      assert.strictEqual(reply.status, 200)
      assert.match(reply.headers.get("content-type") ?? "", /^text\/event-stream/)
      assert.strictEqual(reply.headers.get("cache-control"), "no-cache")
      const events = reply.text.split("\n\n").filter((e) => e !== "")
      assert.strictEqual(events.length, 2)
      events.forEach((event, i) => {
        const [id, data, ...rest] = event.split("\n")
        assert.strictEqual(id, `id: ${i + 1}`)
        assert.deepStrictEqual(rest, [])
        const envelope = JSON.parse(data!.slice("data: ".length)) as Envelope
        assert.strictEqual(envelope.from, SERVER)
      })
      // Asked for events, a handler that sends nothing still answers 202.
      const silent = yield* start(p, { onMessage: () => undefined })
      const none = yield* post(silent.url, JSON.stringify(yield* request(ALICE, p.alice)), { accept: "text/event-stream" })
      assert.strictEqual(none.status, 202)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("ends the event stream with an error event when the handler fails after streaming", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, {
        onMessage: (_e, _respond, stream) =>
          Effect.gen(function* () {
            stream({ part: 1 })
            yield* Effect.yieldNow()
            return yield* Effect.die(new Error("database password is hunter2"))
          })
      })
      const received: Array<Envelope> = []
      const result = yield* MessageClient.stream(server.url, yield* request(ALICE, p.alice)).pipe(
        Stream.runForEach((e) => Effect.sync(() => received.push(e))),
        Effect.either
      )
      assert.strictEqual(received.length, 1)
      assert(Either.isLeft(result))
      assert.strictEqual(result.left.code, "INTERNAL_ERROR")
      assert.notInclude(result.left.message, "hunter2")
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("interrupts a streaming handler when the client goes away", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const interrupted = yield* Deferred.make<void>()
      const server = yield* start(p, {
        onMessage: (_e, _respond, stream) =>
          Effect.gen(function* () {
            stream({ part: 1 })
            return yield* Effect.never
          }).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
      })
      const first = yield* MessageClient.stream(server.url, yield* request(ALICE, p.alice)).pipe(Stream.take(1), Stream.runCollect)
      assert.strictEqual(Chunk.size(first), 1)
      yield* Deferred.await(interrupted)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("runs Effect handlers with the services make was given", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* MeshServer.make({
        agentDid: SERVER,
        privateKey: p.server,
        resolvePublicKey: (did) => p.known.get(did) ?? null,
        onMessage: (_e, respond) => Effect.map(Greeting, (g) => respond({ greeting: g }))
      }).pipe(Effect.provideService(Greeting, "hello"))
      const reply = yield* MessageClient.send(server.url, yield* request(ALICE, p.alice))
      assert.deepStrictEqual(reply?.body, { greeting: "hello" })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses a tampered envelope with 401 SIGNATURE_INVALID", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const env = yield* request(ALICE, p.alice)
      const forged = { ...env, body: { capability: "echo", params: { n: 2 } } }
      const r = yield* refusal(MessageClient.send(server.url, forged))
      assert.deepInclude(r, { code: "SIGNATURE_INVALID", status: 401 })
      // Signed by mallory in alice's name: same answer.
      const impostor = yield* request(ALICE, p.mallory)
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, impostor)), { code: "SIGNATURE_INVALID", status: 401 })
      // A forgery burns no nonce: the genuine envelope still goes through.
      assert.isNotNull(yield* MessageClient.send(server.url, env))
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses an unknown sender with 401 UNKNOWN_SENDER, and looks up no key for misaddressed or stale traffic", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const asked: Array<string> = []
      const server = yield* start(p, {
        resolvePublicKey: (did) => {
          asked.push(did)
          return p.known.get(did) ?? null
        }
      })
      const r = yield* refusal(MessageClient.send(server.url, yield* request(MALLORY, p.mallory)))
      assert.deepInclude(r, { code: "UNKNOWN_SENDER", status: 401 })
      assert.deepStrictEqual(asked, [MALLORY])
      const misaddressed = yield* refusal(MessageClient.send(server.url, yield* request(MALLORY, p.mallory, {}, { to: BOB })))
      assert.deepInclude(misaddressed, { code: "WRONG_RECIPIENT", status: 421 })
      assert.deepStrictEqual(asked, [MALLORY])
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses a replayed envelope with 401 REPLAYED", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const env = yield* request(ALICE, p.alice)
      assert.isNotNull(yield* MessageClient.send(server.url, env))
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, env)), { code: "REPLAYED", status: 401 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses an envelope for another agent with 421 WRONG_RECIPIENT", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const r = yield* refusal(MessageClient.send(server.url, yield* request(ALICE, p.alice, {}, { to: BOB })))
      assert.deepInclude(r, { code: "WRONG_RECIPIENT", status: 421 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses an expired envelope with 401 EXPIRED (after the clock tolerance)", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const env = yield* request(ALICE, p.alice, {}, { ttlSeconds: 10 })
      // Expires at 10 s; the default tolerance keeps it valid until 40 s.
      yield* TestClock.adjust("39 seconds")
      const late = yield* request(ALICE, p.alice, {}, { ttlSeconds: 10 })
      yield* TestClock.adjust("2 seconds")
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, env)), { code: "EXPIRED", status: 401 })
      assert.isNotNull(yield* MessageClient.send(server.url, late))
      // A tighter tolerance is an option.
      const strict = yield* start(p, { clockToleranceMs: 0 })
      const short = yield* request(ALICE, p.alice, {}, { ttlSeconds: 1 })
      yield* TestClock.adjust("1 second")
      assert.deepInclude(yield* refusal(MessageClient.send(strict.url, short)), { code: "EXPIRED", status: 401 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses what is not an envelope with 400 MALFORMED, and bad JSON with 400 INVALID_JSON", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const empty = yield* post(server.url, "{}", { "x-correlation-id": "cid-1" })
      assert.strictEqual(empty.status, 400)
      const body = JSON.parse(empty.text) as Record<string, unknown>
      assert.strictEqual(body._tag, "MessageInvalid")
      assert.strictEqual(body.code, "MALFORMED")
      assert.strictEqual(body.correlationId, "cid-1")
      assert.isString(body.error)
      const long = yield* request(ALICE, p.alice)
      assert.deepInclude(
        yield* refusal(MessageClient.send(server.url, { ...long, expiresAt: "1970-01-03T00:00:00.000Z" })),
        { code: "TTL_TOO_LONG", status: 400 }
      )
      const bad = yield* post(server.url, "{nope")
      assert.strictEqual(bad.status, 400)
      assert.strictEqual((JSON.parse(bad.text) as Record<string, unknown>).code, "INVALID_JSON")
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("refuses a body over maxBodyBytes with 413 before parsing it", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, { maxBodyBytes: 1024 })
      const big = yield* request(ALICE, p.alice, { blob: "x".repeat(2048) })
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, big)), { code: "PAYLOAD_TOO_LARGE", status: 413 })
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("devMode accepts unsigned and badly signed envelopes, never resolves keys, and warns loudly once at start", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) =>
        lines.push(`${logLevel.label} ${Array.isArray(message) ? message.map(String).join(" ") : String(message)}`)
      )
      let resolved = 0
      const server = yield* start(p, {
        devMode: true,
        resolvePublicKey: () => {
          resolved++
          return null
        }
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      const banner = lines.filter((l) => l.includes("DEV MODE"))
      assert.strictEqual(banner.length, 1, lines.join("\n"))
      assert.isTrue(banner[0]!.startsWith("WARN"))
      assert.isAtLeast(banner[0]!.split("\n").length, 5)
      assert.include(banner[0]!, "NOT VERIFIED")

      const env = yield* request(MALLORY, p.mallory)
      const tampered = { ...env, body: { capability: "echo", params: "changed" } }
      const fromAlice = yield* request(ALICE, p.alice)
      const unsigned = { ...fromAlice, proof: { ...fromAlice.proof, proofValue: "z1111" } }
      for (const e of [tampered, unsigned]) {
        const reply = yield* MessageClient.send(server.url, e, { serverPublicKey: p.server.publicKey })
        assert.strictEqual(reply?.to, e.from)
      }
      assert.strictEqual(resolved, 0)
      assert.strictEqual(lines.filter((l) => l.includes("DEV MODE")).length, 1)
      // The rest of validation still holds: a replay is refused.
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, tampered)), { code: "REPLAYED", status: 401 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("rbacMiddleware lets trusted senders through and refuses the others with 403 TRUST_LEVEL_INSUFFICIENT", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const levels: Record<string, number> = { [ALICE]: 2, [BOB]: 1 }
      const server = yield* start(p, { middleware: [MeshServer.rbacMiddleware(2)], trustLevelOf: (did) => Promise.resolve(levels[did]) })
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(BOB, p.bob))), { code: "TRUST_LEVEL_INSUFFICIENT", status: 403 })
      // No level known: 0.
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(CAROL, p.carol))), { code: "TRUST_LEVEL_INSUFFICIENT", status: 403 })
      // The middleware's own trustLevelOf wins over the server's.
      const own = yield* start(p, {
        middleware: [MeshServer.rbacMiddleware(1, { trustLevelOf: (did) => (did === CAROL ? 5 : 0) })],
        trustLevelOf: () => 9
      })
      assert.isNotNull(yield* MessageClient.send(own.url, yield* request(CAROL, p.carol)))
      assert.deepInclude(yield* refusal(MessageClient.send(own.url, yield* request(ALICE, p.alice))), { code: "TRUST_LEVEL_INSUFFICIENT", status: 403 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("rateLimitMiddleware answers 429 RATE_LIMITED with Retry-After per sender, and refills on the clock", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, { middleware: [MeshServer.rateLimitMiddleware(2)] })
      for (let i = 0; i < 2; i++) assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      const limited = yield* post(server.url, JSON.stringify(yield* request(ALICE, p.alice)))
      assert.strictEqual(limited.status, 429)
      assert.strictEqual(limited.headers.get("retry-after"), "30")
      const body = JSON.parse(limited.text) as Record<string, unknown>
      assert.strictEqual(body.code, "RATE_LIMITED")
      assert.strictEqual(body.retryAfterSeconds, 30)
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(ALICE, p.alice))), { code: "RATE_LIMITED", status: 429, retryAfterSeconds: 30 })
      // Another sender has its own bucket.
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(BOB, p.bob)))
      yield* TestClock.adjust("30 seconds")
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("runs middleware in order and stops at the first refusal", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const ran: Array<string> = []
      const note = (name: string, refuse: boolean): MeshServer.Middleware => ({
        name,
        check: (ctx) =>
          Effect.suspend(() => {
            ran.push(`${name}:${ctx.sender}`)
            return refuse ? Effect.fail(new MessageForbidden({ code: "FORBIDDEN", message: "no" })) : Effect.void
          })
      })
      const server = yield* start(p, { middleware: [note("a", false), note("b", true), note("c", false)] })
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(ALICE, p.alice))), { code: "FORBIDDEN", status: 403 })
      assert.deepStrictEqual(ran, [`a:${ALICE}`, `b:${ALICE}`])
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("answers a failing handler with 500 INTERNAL_ERROR and no details; a declared refusal goes out as itself", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, {
        onMessage: (envelope) => {
          switch ((envelope.body.params as { readonly how: string }).how) {
            case "throw":
              throw new Error("secret: database password is hunter2")
            case "reject":
              return Promise.reject(new Error("secret: hunter2"))
            case "fail":
              return Effect.fail({ secret: "hunter2" })
            default:
              return Effect.fail(new MessageForbidden({ code: "FORBIDDEN", message: "not this capability" }))
          }
        }
      })
      for (const how of ["throw", "reject", "fail"]) {
        const reply = yield* post(server.url, JSON.stringify(yield* request(ALICE, p.alice, { how })))
        assert.strictEqual(reply.status, 500)
        assert.notInclude(reply.text, "hunter2")
        const body = JSON.parse(reply.text) as Record<string, unknown>
        assert.deepInclude(body, { _tag: "InternalError", code: "INTERNAL_ERROR", error: "internal server error" })
      }
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(ALICE, p.alice, { how: "refuse" }))), {
        code: "FORBIDDEN",
        status: 403,
        message: "not this capability"
      })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("takes keys as publicKeyB64 from a Promise, and answers a failing resolver with 503 RESOLVER_UNAVAILABLE", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, {
        resolvePublicKey: (did) => (did === ALICE ? Promise.resolve(p.alice.publicKeyB64) : Promise.reject(new Error("registry down")))
      })
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(BOB, p.bob))), { code: "RESOLVER_UNAVAILABLE", status: 503 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("falls back to the KeyResolver in context, and needs one of the two unless in devMode", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const { resolvePublicKey: _omit, ...noResolver } = { agentDid: SERVER, privateKey: p.server, onMessage: echo, resolvePublicKey: undefined }
      const server = yield* MeshServer.make(noResolver).pipe(
        Effect.provide(KeyResolver.layerStatic({ [ALICE]: { publicKey: p.alice.publicKey, keyVersion: 1 } }))
      )
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(BOB, p.bob))), { code: "UNKNOWN_SENDER", status: 401 })
      const missing = yield* Effect.flip(MeshServer.make(noResolver))
      assert.strictEqual(missing._tag, "MeshServerError")
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("takes the NonceStore from context (a full store answers 503 NONCE_STORE_FULL)", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p).pipe(Effect.provide(NonceStore.layerMemory({ capacity: 1 })))
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(BOB, p.bob))), { code: "NONCE_STORE_FULL", status: 503 })
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("a sender the rbac middleware refuses records no nonce, so its flood leaves room for trusted senders", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const capacity = 8
      // A quota as large as the store: only the order of authorization and recording keeps the store free.
      const store = NonceStore.makeMemory({ capacity, perSenderQuota: capacity })
      const levels: Record<string, number> = { [ALICE]: 2, [BOB]: 1 }
      const server = yield* start(p, { middleware: [MeshServer.rbacMiddleware(2)], trustLevelOf: (did) => levels[did] }).pipe(
        Effect.provideService(NonceStore.NonceStore, store)
      )
      const codes = new Set<string>()
      for (let i = 0; i < capacity + 10; i++) {
        const e = yield* refusal(MessageClient.send(server.url, yield* request(BOB, p.bob)))
        codes.add(`${e.status} ${e.code}`)
      }
      const recorded = store.size()
      const after = yield* Effect.either(MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      assert.isTrue(Either.isRight(after), Either.isLeft(after) ? after.left.code : "")
      assert.deepStrictEqual([...codes], ["403 TRUST_LEVEL_INSUFFICIENT"])
      assert.strictEqual(recorded, 0)
      assert.strictEqual(store.size(), 1)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("a rate-limited sender records no nonce past its limit; a sender past its nonce quota gets 429 NONCE_QUOTA_EXCEEDED alone", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const store = NonceStore.makeMemory({ capacity: 8, perSenderQuota: 3 })
      const limited = yield* start(p, { middleware: [MeshServer.rateLimitMiddleware(2)] }).pipe(Effect.provideService(NonceStore.NonceStore, store))
      for (let i = 0; i < 2; i++) assert.isNotNull(yield* MessageClient.send(limited.url, yield* request(ALICE, p.alice)))
      for (let i = 0; i < 10; i++) {
        assert.deepInclude(yield* refusal(MessageClient.send(limited.url, yield* request(ALICE, p.alice))), { code: "RATE_LIMITED", status: 429 })
      }
      assert.strictEqual(store.size(), 2)

      const open = yield* start(p).pipe(Effect.provideService(NonceStore.NonceStore, store))
      assert.isNotNull(yield* MessageClient.send(open.url, yield* request(ALICE, p.alice)))
      assert.deepInclude(yield* refusal(MessageClient.send(open.url, yield* request(ALICE, p.alice))), {
        code: "NONCE_QUOTA_EXCEEDED",
        status: 429,
        // Until the first envelope (300 s, plus the 30 s tolerance) expires.
        retryAfterSeconds: 330
      })
      assert.isNotNull(yield* MessageClient.send(open.url, yield* request(BOB, p.bob)))
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("accepts envelopes living up to 300 s by default; a longer lifetime is 400 TTL_TOO_LONG unless configured", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      assert.isNotNull(yield* MessageClient.send(server.url, yield* request(ALICE, p.alice, { n: 1 }, { ttlSeconds: 300 })))
      assert.deepInclude(yield* refusal(MessageClient.send(server.url, yield* request(ALICE, p.alice, { n: 1 }, { ttlSeconds: 301 }))), {
        code: "TTL_TOO_LONG",
        status: 400
      })
      const longer = yield* start(p, { maxTtlSeconds: 3600 })
      assert.isNotNull(yield* MessageClient.send(longer.url, yield* request(ALICE, p.alice, { n: 1 }, { ttlSeconds: 3600 })))
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("serves /health and declares its contract in OpenAPI", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p, { agentDid: "DID:MESH:TEST.SERVER" })
      assert.strictEqual(server.did, SERVER)
      const health = yield* raw(`${server.url}/health`)
      assert.strictEqual(health.status, 200)
      assert.deepStrictEqual(JSON.parse(health.text), { status: "ok", did: SERVER, protocolVersion: "1.0" })
      const doc = OpenApi.fromApi(MeshServerApi)
      assert.deepStrictEqual(Object.keys(doc.paths).sort(), ["/health", "/v1/messages"])
      const statuses = Object.keys(doc.paths["/v1/messages"]?.post?.responses ?? {}).sort()
      for (const s of ["200", "202", "400", "401", "403", "413", "421", "429", "500", "503"]) assert.include(statuses, s)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("client: TRANSPORT_ERROR when nothing answers; REPLY_INVALID when the reply is not the server's", () =>
    Effect.gen(function* () {
      const p = yield* parties
      const server = yield* start(p)
      const wrongKey = yield* Effect.flip(MessageClient.send(server.url, yield* request(ALICE, p.alice), { serverPublicKey: p.bob.publicKey }))
      assert.strictEqual(wrongKey.code, "REPLY_INVALID")
      assert.strictEqual(wrongKey.reason, "SIGNATURE_INVALID")
      yield* server.close
      const down = yield* Effect.flip(MessageClient.send(server.url, yield* request(ALICE, p.alice)))
      assert.strictEqual(down.code, "TRANSPORT_ERROR")
      assert.isUndefined(down.status)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("client: a verified reply must be fresh, from the addressee, and correlated to the request", () =>
    Effect.gen(function* () {
      const p = yield* parties
      // A fake agent answering every request with one fixed reply, signed by the server's key.
      let reply: Envelope | undefined
      const fake = yield* Effect.acquireRelease(
        Effect.async<Http.Server>((resume) => {
          const s = Http.createServer((req, res) => {
            req.resume()
            res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(reply))
          })
          s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
        }),
        (s) => Effect.async<void>((resume) => void s.close(() => resume(Effect.void)))
      )
      const url = `http://127.0.0.1:${(fake.address() as { port: number }).port}`
      const env = yield* request(ALICE, p.alice)
      reply = yield* buildEnvelope({ type: MESH_RESPONSE, from: SERVER, to: ALICE, body: {}, privateKey: p.server, correlationId: env.correlationId })
      const options = { serverPublicKey: p.server.publicKey }
      assert.strictEqual((yield* MessageClient.send(url, env, options))?.id, reply.id)
      const again = yield* Effect.flip(MessageClient.send(url, env, options))
      assert.deepInclude(again, { code: "REPLY_INVALID", reason: "REPLAYED" })
      reply = yield* buildEnvelope({ type: MESH_RESPONSE, from: SERVER, to: ALICE, body: {}, privateKey: p.server })
      assert.deepInclude(yield* Effect.flip(MessageClient.send(url, env, options)), { code: "REPLY_INVALID", reason: "CORRELATION_MISMATCH" })
      reply = yield* buildEnvelope({ type: MESH_RESPONSE, from: BOB, to: ALICE, body: {}, privateKey: p.server, correlationId: env.correlationId })
      assert.deepInclude(yield* Effect.flip(MessageClient.send(url, env, options)), { code: "REPLY_INVALID", reason: "WRONG_SENDER" })
      // Unverified, a reply is only checked for shape.
      reply = { ...reply, proof: { ...reply.proof, proofValue: "zbad" } }
      assert.isNotNull(yield* MessageClient.send(url, env))
    }).pipe(Effect.provide(TestLayer)))
})

describe("MeshServer and MessageClient from Promise code", () => {
  it("start a server with an async handler, send and stream", async () => {
    const server = await Mesh.generateDid("promise.server")
    const alice = await Mesh.generateDid("promise.alice")
    const running = await MeshServer.startPromise({
      agentDid: server.did,
      privateKey: server.privateKey,
      resolvePublicKey: async (did) => (did === alice.did ? alice.publicKey : null),
      onMessage: async (envelope, respond, stream) => {
        stream({ step: 1 })
        await new Promise((resolve) => setImmediate(resolve))
        respond({ capability: "echo", result: envelope.body })
      }
    })
    try {
      const build = () => Mesh.buildEnvelope({ type: MESH_REQUEST, from: alice.did, to: server.did, body: { capability: "echo", params: { x: 1 } }, privateKey: alice.privateKey })
      const reply = await MessageClient.MessageClientPromise.send(running.url, await build(), { serverPublicKey: server.publicKey })
      assert.strictEqual(reply?.type, MESH_RESPONSE)
      const types: Array<string> = []
      for await (const e of MessageClient.MessageClientPromise.stream(running.url, await build(), { serverPublicKey: server.publicKey })) types.push(e.type)
      assert.deepStrictEqual(types, [MeshServer.MESH_STREAM_CHUNK, MESH_RESPONSE])
      const env = await build()
      await MessageClient.MessageClientPromise.send(running.url, env)
      await MessageClient.MessageClientPromise.send(running.url, env).then(
        () => assert.fail("a replay must be refused"),
        (e: MessageClient.MessageClientError) => {
          assert.strictEqual(e.code, "REPLAYED")
          assert.strictEqual(e.status, 401)
        }
      )
    } finally {
      await running.close()
    }
  })
})
