import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as Serve from "../../src/http/Serve.js"
import { HostNotAllowed, InvalidJson, OriginNotAllowed, Overloaded, PayloadTooLarge, UnsupportedMediaType } from "../../src/http/ErrorBody.js"
import { AgentsLive, ExampleApi } from "./ExampleApi.js"
import { connect, json, request, statuses } from "./Harness.js"

const post = (url: string, body: string | Buffer, contentType?: string, headers: Record<string, string> = {}) =>
  request(url, { method: "POST", headers: { ...(contentType === undefined ? {} : { "content-type": contentType }), ...headers }, body })

const agent = (id: string) => JSON.stringify({ id, name: id })

// An api whose `wait` handler blocks on a latch (to pile requests up in flight) and whose `leak` handler dies with a
// schema error quoting a secret from the body.
const Started = Schema.Struct({ ok: Schema.Boolean })
class ProbeGroup extends HttpApiGroup.make("probe")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Started))
  .add(HttpApiEndpoint.get("wait", "/v1/wait").addSuccess(Started))
  .add(HttpApiEndpoint.post("leak", "/v1/leak").setPayload(Schema.Struct({ token: Schema.String })).addSuccess(Started)) {}
class ProbeApi extends HttpApi.make("probe")
  .add(ProbeGroup)
  .addError(InvalidJson)
  .addError(PayloadTooLarge)
  .addError(UnsupportedMediaType)
  .addError(Overloaded)
  .addError(HostNotAllowed)
  .addError(OriginNotAllowed) {}

const probeLive = (latch: Deferred.Deferred<void>, entered: { n: number }) =>
  HttpApiBuilder.group(ProbeApi, "probe", (h) =>
    Effect.succeed(
      h
        .handle("health", () => Effect.succeed({ ok: true }))
        .handle("wait", () =>
          Effect.suspend(() => {
            entered.n++
            return Effect.as(Deferred.await(latch), { ok: true })
          })
        )
        .handle("leak", ({ payload }) => Effect.sync(() => Schema.decodeUnknownSync(Schema.Struct({ token: Schema.Number }))(payload)).pipe(Effect.as({ ok: true })))
    )
  )

// Polls a condition a bounded number of times, yielding to the event loop in between.
const eventually = (condition: () => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 2_000; i++) {
      if (condition()) return
      yield* Effect.promise(() => new Promise<void>((r) => setImmediate(r)))
    }
    return yield* Effect.dieMessage(`never: ${what}`)
  })

describe("Serve guards", () => {
  describe("strict JSON", () => {
    it.scoped("refuses a duplicate member name with 400 INVALID_JSON and says so", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const reply = yield* post(`${server.url}/v1/agents`, '{"id":"d1","name":"x","name":"y"}', "application/json")
        assert.strictEqual(reply.status, 400)
        assert.strictEqual(json(reply).code, "INVALID_JSON")
        assert.include(String(json(reply).error), "duplicate member name")
      })
    )

    it.scoped("refuses a __proto__ member with 400 INVALID_JSON and says so", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const reply = yield* post(`${server.url}/v1/agents`, '{"id":"p1","name":"x","__proto__":{"admin":true}}', "application/json")
        assert.strictEqual(reply.status, 400)
        assert.strictEqual(json(reply).code, "INVALID_JSON")
        assert.include(String(json(reply).error), "__proto__")
      })
    )
  })

  describe("413 readable by clients that send the whole body first", () => {
    // 1 KiB limit, 1 MiB bodies: far more than a socket buffer, so an unread body would reset the connection.
    const options = { maxBodyBytes: 1024, maxDrainBytes: 4 * 1024 * 1024 }
    const big = JSON.stringify({ id: "x", name: "y".repeat(1024 * 1024) })

    it.scopedLive("Node's fetch sees 413 every time", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, options)
        for (let i = 0; i < 20; i++) {
          const reply = yield* Effect.promise(() =>
            fetch(`${server.url}/v1/agents`, { method: "POST", headers: { "content-type": "application/json" }, body: big }).then(
              async (r) => ({ status: r.status, body: (await r.json()) as { code: string } }),
              (e: unknown) => ({ status: 0, body: { code: String(e) } })
            )
          )
          assert.strictEqual(reply.status, 413, `attempt ${i}: ${reply.body.code}`)
          assert.strictEqual(reply.body.code, "PAYLOAD_TOO_LARGE")
        }
      })
    )

    it.scopedLive("a raw client writing the whole body before reading sees 413, and the connection stays usable", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, options)
        const raw = yield* connect(server.port)
        const head = `POST /v1/agents HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(big)}\r\n\r\n`
        raw.socket.write(head + big)
        raw.socket.write("GET /v1/agents/a1 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        const seen = yield* raw.until((t) => statuses(t).length >= 2)
        assert.deepStrictEqual(statuses(seen), [413, 200])
      })
    )

    it.scopedLive("a body on GET, or on a path that does not exist, is drained under the same bound and its connection closed past it", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { maxBodyBytes: 1024, maxDrainBytes: 4096, requestTimeoutMs: 120_000 })
        const chunk = "a".repeat(1000)
        const frame = `${chunk.length.toString(16)}\r\n${chunk}\r\n`
        // Writes frames one by one (each flushed before the next) until the server closes: how many it took.
        const feed = (raw: Effect.Effect.Success<ReturnType<typeof connect>>, limit: number) =>
          Effect.gen(function* () {
            let sent = 0
            while (sent < limit && !raw.closed()) {
              // The server runs in this process: let it read (a macrotask turn) before the next frame.
              yield* Effect.async<void>((resume) => void raw.socket.write(frame, () => setImmediate(() => resume(Effect.void))))
              sent++
            }
            return sent
          })
        for (const target of ["GET /v1/whoami", "GET /no/such/path"]) {
          const raw = yield* connect(server.port)
          raw.socket.write(`${target} HTTP/1.1\r\nhost: 127.0.0.1\r\ntransfer-encoding: chunked\r\n\r\n`)
          // The bound is 4 KiB: the server closes after a few frames, never reading the 10 MB on offer.
          assert.isBelow(yield* feed(raw, 10_000), 1_000, target)
          assert.strictEqual(statuses(yield* raw.untilClosed).length, 1, target)
          const declared = yield* connect(server.port)
          declared.socket.write(`${target} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100000000000\r\n\r\n`)
          assert.isBelow(yield* feed(declared, 10_000), 1_000, `${target}, declared`)
          assert.strictEqual(statuses(yield* declared.untilClosed).length, 1, `${target}, declared`)
        }
      })
    )

    it.scopedLive("a body past the drain bound is refused and its connection closed", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { maxBodyBytes: 1024, maxDrainBytes: 4096 })
        const raw = yield* connect(server.port)
        raw.socket.write(`POST /v1/agents HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`)
        const chunk = "a".repeat(1000)
        const frame = `${chunk.length.toString(16)}\r\n${chunk}\r\n`
        for (let i = 0; i < 8 && !raw.closed(); i++) raw.socket.write(frame)
        const seen = yield* raw.untilClosed
        assert.deepStrictEqual(statuses(seen), [413])
      })
    )
  })

  describe("media types", () => {
    it.scoped("accepts JSON media types in any case and with parameters, and a body without Content-Type", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const url = `${server.url}/v1/agents`
        assert.strictEqual((yield* post(url, agent("m1"), "Application/JSON")).status, 201)
        assert.strictEqual((yield* post(url, agent("m2"), "application/json; charset=UTF-8")).status, 201)
        assert.strictEqual((yield* post(url, agent("m3"), "application/merge-patch+json")).status, 201)
        assert.strictEqual((yield* post(url, agent("m4"))).status, 201)
      })
    )

    it.scoped("answers other media types with 415 UNSUPPORTED_MEDIA_TYPE", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const url = `${server.url}/v1/agents`
        for (const type of ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"]) {
          const reply = yield* post(url, type.startsWith("multipart") ? "--x\r\n\r\n--x--" : agent("t1"), type)
          assert.strictEqual(reply.status, 415, type)
          assert.strictEqual(json(reply)._tag, "UnsupportedMediaType")
          assert.strictEqual(json(reply).code, "UNSUPPORTED_MEDIA_TYPE")
        }
      })
    )
  })

  describe("slow clients", () => {
    it.scopedLive("closes a connection whose headers trickle past the headers timeout with 408", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { headersTimeoutMs: 200, requestTimeoutMs: 400 })
        const raw = yield* connect(server.port)
        raw.socket.write("GET /v1/agents/a1 HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        const seen = yield* raw.untilClosed
        assert.match(seen, /^HTTP\/1\.1 408 /)
      })
    )

    it.scopedLive("closes a connection whose body trickles past the request timeout with 408", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { headersTimeoutMs: 200, requestTimeoutMs: 400 })
        const raw = yield* connect(server.port)
        raw.socket.write("POST /v1/agents HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        const seen = yield* raw.untilClosed
        assert.match(seen, /^HTTP\/1\.1 408 /)
      })
    )

    it.scopedLive("closes an idle keep-alive connection", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { keepAliveTimeoutMs: 200 })
        const raw = yield* connect(server.port)
        raw.socket.write("GET /v1/agents/a1 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        const seen = yield* raw.untilClosed
        assert.deepStrictEqual(statuses(seen), [200])
      })
    )

    it.scopedLive("refuses connections beyond the per-address cap while another address still connects", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { maxConnectionsPerAddress: 2 })
        const get = "GET /v1/agents/a1 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
        const held = [yield* connect(server.port), yield* connect(server.port)]
        for (const raw of held) {
          raw.socket.write(get)
          assert.deepStrictEqual(statuses(yield* raw.until((t) => statuses(t).length >= 1)), [200])
        }
        const third = yield* connect(server.port)
        third.socket.write(get)
        assert.deepStrictEqual(statuses(yield* third.untilClosed), [])
        const other = yield* connect(server.port, "127.0.0.2")
        other.socket.write(get)
        assert.deepStrictEqual(statuses(yield* other.until((t) => statuses(t).length >= 1)), [200])
        // A held connection closing frees its slot.
        held[0]!.socket.destroy()
        yield* eventually(() => held[0]!.closed(), "held connection closed")
        const again = yield* Effect.retry(
          Effect.gen(function* () {
            const raw = yield* connect(server.port)
            raw.socket.write(get)
            const seen = yield* raw.until((t) => statuses(t).length >= 1)
            if (statuses(seen).length === 0) return yield* Effect.fail(new Error("refused"))
            return statuses(seen)
          }),
          { times: 50 }
        )
        assert.deepStrictEqual(again, [200])
      })
    )

    it.scopedLive("refuses connections beyond the total cap", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { maxConnections: 2 })
        const get = "GET /v1/agents/a1 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
        for (const from of ["127.0.0.1", "127.0.0.2"]) {
          const raw = yield* connect(server.port, from)
          raw.socket.write(get)
          assert.deepStrictEqual(statuses(yield* raw.until((t) => statuses(t).length >= 1)), [200])
        }
        const third = yield* connect(server.port, "127.0.0.3")
        third.socket.write(get)
        assert.deepStrictEqual(statuses(yield* third.untilClosed), [])
      })
    )
  })

  describe("load shedding", () => {
    it.scopedLive("answers requests beyond the in-flight cap with 503 OVERLOADED and Retry-After, keeps /health, recovers", () =>
      Effect.gen(function* () {
        const latch = yield* Deferred.make<void>()
        const entered = { n: 0 }
        const server = yield* Serve.make(ProbeApi, probeLive(latch, entered), { maxInFlight: 4 })
        const blocked = yield* Effect.fork(Effect.forEach(Array.from({ length: 4 }), () => request(`${server.url}/v1/wait`), { concurrency: "unbounded" }))
        yield* eventually(() => entered.n === 4, "four requests in flight")
        const shed = yield* Effect.forEach(Array.from({ length: 10 }), () => request(`${server.url}/v1/wait`), { concurrency: "unbounded" })
        for (const reply of shed) {
          assert.strictEqual(reply.status, 503)
          assert.strictEqual(reply.headers["retry-after"], "1")
          assert.strictEqual(json(reply)._tag, "Overloaded")
          assert.strictEqual(json(reply).code, "OVERLOADED")
          assert.strictEqual(json(reply).retryAfterSeconds, 1)
        }
        assert.strictEqual(entered.n, 4)
        assert.strictEqual((yield* request(`${server.url}/health`)).status, 200)
        yield* Deferred.succeed(latch, undefined)
        const released = yield* Effect.fromFiber(blocked)
        assert.deepStrictEqual(released.map((r) => r.status), [200, 200, 200, 200])
        assert.strictEqual((yield* request(`${server.url}/v1/wait`)).status, 200)
      })
    )

    it.scopedLive("sheds on event-loop lag before reading the body or running the handler, keeps /health, recovers at once", () =>
      Effect.gen(function* () {
        const latch = yield* Deferred.make<void>()
        yield* Deferred.succeed(latch, undefined)
        const entered = { n: 0 }
        const loop = { lagMs: 0 }
        const server = yield* Serve.make(ProbeApi, probeLive(latch, entered), { maxEventLoopLagMs: 100, eventLoopLag: () => loop.lagMs })
        assert.strictEqual((yield* request(`${server.url}/v1/wait`)).status, 200)
        assert.strictEqual(entered.n, 1)
        loop.lagMs = 101
        const shed = [
          ...(yield* Effect.forEach(Array.from({ length: 5 }), () => request(`${server.url}/v1/wait`), { concurrency: "unbounded" })),
          // A body is never parsed: not even a body that would be refused as JSON reaches that check.
          yield* post(`${server.url}/v1/leak`, '{"token":1,"token":2}', "application/json")
        ]
        for (const reply of shed) {
          assert.strictEqual(reply.status, 503)
          assert.strictEqual(reply.headers["retry-after"], "1")
          assert.strictEqual(json(reply)._tag, "Overloaded")
          assert.strictEqual(json(reply).code, "OVERLOADED")
          assert.strictEqual(json(reply).retryAfterSeconds, 1)
          // The body decodes as the declared error (its schema requires a message).
          assert.isString(json(reply).message)
        }
        assert.strictEqual(entered.n, 1)
        const health = yield* request(`${server.url}/health`)
        assert.strictEqual(health.status, 200)
        assert.deepStrictEqual(json(health), { ok: true })
        // Unknown routes still get their own answer.
        assert.strictEqual((yield* request(`${server.url}/v1/nothing`)).status, 404)
        loop.lagMs = 100
        assert.strictEqual((yield* request(`${server.url}/v1/wait`)).status, 200)
        loop.lagMs = 0
        assert.strictEqual((yield* request(`${server.url}/v1/wait`)).status, 200)
        assert.strictEqual(entered.n, 3)
      })
    )
  })

  describe("Host and Origin", () => {
    it.scoped("accepts localhost and IP literals, refuses other names with 421 HOST_NOT_ALLOWED", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const get = (host: string) => request(`${server.url}/v1/agents/a1`, { headers: { host } })
        for (const host of ["localhost", "LOCALHOST:9", "127.0.0.1", `127.0.0.1:${server.port}`, "[::1]:80", "10.1.2.3"]) {
          assert.strictEqual((yield* get(host)).status, 200, host)
        }
        for (const host of ["evil.example", `evil.example:${server.port}`, "localhost.evil.example"]) {
          const reply = yield* get(host)
          assert.strictEqual(reply.status, 421, host)
          assert.strictEqual(json(reply).code, "HOST_NOT_ALLOWED")
        }
        // A refused request with a body is still answered readably.
        const refused = yield* post(`${server.url}/v1/agents`, agent("h1"), "application/json", { host: "evil.example" })
        assert.strictEqual(refused.status, 421)
      })
    )

    it.scoped("accepts the allowed hosts, by name at any port or by name and port, and any host with *", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { allowedHosts: ["hub.example.com", "agent.example.com:8443"] })
        const get = (host: string) => request(`${server.url}/v1/agents/a1`, { headers: { host } })
        assert.strictEqual((yield* get("hub.example.com")).status, 200)
        assert.strictEqual((yield* get("Hub.Example.com:8080")).status, 200)
        assert.strictEqual((yield* get("agent.example.com:8443")).status, 200)
        assert.strictEqual((yield* get("agent.example.com")).status, 421)
        const open = yield* Serve.make(ExampleApi, AgentsLive, { allowedHosts: ["*"] })
        assert.strictEqual((yield* request(`${open.url}/v1/agents/a1`, { headers: { host: "anything.example" } })).status, 200)
      })
    )

    it.scoped("refuses a cross-origin request with 403 ORIGIN_NOT_ALLOWED, even a form post, and serves same-origin", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const form = yield* post(`${server.url}/v1/agents`, "id=f1&name=x", "application/x-www-form-urlencoded", { origin: "http://evil.example" })
        assert.strictEqual(form.status, 403)
        assert.strictEqual(json(form).code, "ORIGIN_NOT_ALLOWED")
        const nul = yield* request(`${server.url}/v1/agents/a1`, { headers: { origin: "null" } })
        assert.strictEqual(nul.status, 403)
        const same = yield* post(`${server.url}/v1/agents`, agent("o1"), "application/json", { origin: server.url })
        assert.strictEqual(same.status, 201)
        assert.isUndefined(same.headers["access-control-allow-origin"])
        const preflight = yield* request(`${server.url}/v1/agents`, {
          method: "OPTIONS",
          headers: { origin: "http://evil.example", "access-control-request-method": "POST" }
        })
        assert.strictEqual(preflight.status, 403)
      })
    )

    it.scoped("serves allowed origins with CORS headers and answers their preflight", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive, { allowedOrigins: ["https://app.example"] })
        const preflight = yield* request(`${server.url}/v1/agents`, {
          method: "OPTIONS",
          headers: { origin: "https://app.example", "access-control-request-method": "POST", "access-control-request-headers": "content-type, authorization" }
        })
        assert.strictEqual(preflight.status, 204)
        assert.strictEqual(preflight.headers["access-control-allow-origin"], "https://app.example")
        assert.include(String(preflight.headers["access-control-allow-methods"]), "POST")
        assert.strictEqual(preflight.headers["access-control-allow-headers"], "content-type, authorization")
        assert.include(String(preflight.headers.vary), "Origin")
        const reply = yield* post(`${server.url}/v1/agents`, agent("c1"), "application/json", { origin: "https://app.example" })
        assert.strictEqual(reply.status, 201)
        assert.strictEqual(reply.headers["access-control-allow-origin"], "https://app.example")
        assert.strictEqual(reply.headers.vary, "Origin")
        const other = yield* post(`${server.url}/v1/agents`, agent("c2"), "application/json", { origin: "https://other.example" })
        assert.strictEqual(other.status, 403)
      })
    )
  })

  describe("housekeeping", () => {
    it.scoped("every response says nosniff and no-store", () =>
      Effect.gen(function* () {
        const server = yield* Serve.make(ExampleApi, AgentsLive)
        const replies = [
          yield* request(`${server.url}/v1/agents/a1`),
          yield* request(`${server.url}/v1/agents/nobody`),
          yield* request(`${server.url}/v1/nowhere`),
          yield* post(`${server.url}/v1/agents`, "{", "application/json"),
          yield* request(`${server.url}/v1/boom`)
        ]
        assert.deepStrictEqual(replies.map((r) => r.status), [200, 404, 404, 400, 500])
        for (const reply of replies) {
          assert.strictEqual(reply.headers["x-content-type-options"], "nosniff")
          assert.strictEqual(reply.headers["cache-control"], "no-store")
        }
      })
    )

    it.scoped("does not log the values of a request body that failed a schema", () =>
      Effect.gen(function* () {
        const lines: Array<string> = []
        const capture = Logger.make(({ cause, message }) => {
          lines.push(`${JSON.stringify(message)} ${Cause.pretty(cause)}`)
        })
        const latch = yield* Deferred.make<void>()
        const server = yield* Serve.make(ProbeApi, probeLive(latch, { n: 0 })).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
        const reply = yield* post(`${server.url}/v1/leak`, JSON.stringify({ token: "sk-live-SECRET-1234" }), "application/json")
        assert.strictEqual(reply.status, 500)
        yield* eventually(() => lines.length > 0, "a log line")
        const log = lines.join("\n")
        assert.include(log, "request failed")
        assert.include(log, "token")
        assert.notInclude(log, "SECRET")
      })
    )
  })
})
