import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as OpenApi from "@effect/platform/OpenApi"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Http from "node:http"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as ApiGroup from "../../src/http/ApiGroup.js"
import { holdAnswer } from "../../src/http/LeanRequest.js"
import * as Serve from "../../src/http/Serve.js"
import { AgentNotFound, AgentsLive, ExampleApi } from "./ExampleApi.js"

interface Reply {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

// node:http directly, so the test sees exactly what goes on the wire (status, headers, raw body).
const request = (url: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}) =>
  Effect.async<Reply, Error>((resume) => {
    const req = Http.request(url, { method: options.method ?? "GET", headers: options.headers ?? {}, agent: false }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") })))
    })
    req.on("error", (e) => resume(Effect.fail(e)))
    req.end(options.body)
  })

const json = (reply: Reply): Record<string, unknown> => JSON.parse(reply.body) as Record<string, unknown>

const serve = Serve.make(ExampleApi, AgentsLive, { maxBodyBytes: 1024 })

describe("Serve", () => {
  it.scoped("serves the typed client", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const client = yield* HttpApiClient.make(ExampleApi, { baseUrl: server.url })
      const alice = yield* client.agents.get({ path: { id: "a1" } })
      assert.strictEqual(alice.name, "Alice")
      const bob = yield* client.agents.create({ payload: { id: "b1", name: "Bob" } })
      assert.strictEqual(bob.id, "b1")
      const again = yield* Effect.either(client.agents.create({ payload: { id: "b1", name: "Bob" } }))
      assert(Either.isLeft(again))
      assert.strictEqual(again.left._tag, "AgentExists")
      if (again.left._tag === "AgentExists") assert.strictEqual(again.left.code, "AGENT_EXISTS")
      const missing = yield* Effect.either(client.agents.get({ path: { id: "nobody" } }))
      assert(Either.isLeft(missing))
      assert.strictEqual(missing.left._tag, "AgentNotFound")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.effect("lists the endpoints in the OpenAPI document", () =>
    Effect.sync(() => {
      const doc = OpenApi.fromApi(ExampleApi)
      assert.deepStrictEqual(Object.keys(doc.paths).sort(), ["/v1/agents", "/v1/agents/{id}", "/v1/boom", "/v1/whoami"])
      assert.isDefined(doc.paths["/v1/agents"]?.post?.responses["409"])
    })
  )

  it.scoped("answers a typed error with its status, code and the request's correlation id", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const reply = yield* request(`${server.url}/v1/agents`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-correlation-id": "req-409" },
        body: JSON.stringify({ id: "a1", name: "Again" })
      })
      assert.strictEqual(reply.status, 409)
      assert.strictEqual(reply.headers["x-correlation-id"], "req-409")
      const body = json(reply)
      assert.strictEqual(body._tag, "AgentExists")
      assert.strictEqual(body.code, "AGENT_EXISTS")
      assert.strictEqual(body.error, "agent a1 exists")
      assert.strictEqual(body.correlationId, "req-409")
    })
  )

  it.scoped("makes a correlation id when the request has none, and hands it to handlers", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const reply = yield* request(`${server.url}/v1/whoami`)
      assert.strictEqual(reply.status, 200)
      const cid = reply.headers["x-correlation-id"]
      assert.match(String(cid), /^[0-9a-f-]{36}$/)
      assert.strictEqual(json(reply).correlationId, cid)
    })
  )

  it.scoped("answers malformed JSON with 400 INVALID_JSON", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const reply = yield* request(`${server.url}/v1/agents`, { method: "POST", headers: { "content-type": "application/json" }, body: "{nope" })
      assert.strictEqual(reply.status, 400)
      const body = json(reply)
      assert.strictEqual(body.code, "INVALID_JSON")
      assert.strictEqual(body._tag, "InvalidJson")
      assert.strictEqual(body.correlationId, reply.headers["x-correlation-id"])
    })
  )

  it.scoped("answers a body failing the schema with 400 INVALID_REQUEST", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const reply = yield* request(`${server.url}/v1/agents`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"id":""}' })
      assert.strictEqual(reply.status, 400)
      const body = json(reply)
      assert.strictEqual(body._tag, "HttpApiDecodeError")
      assert.strictEqual(body.code, "INVALID_REQUEST")
      assert.isString(body.error)
    })
  )

  it.scoped("answers an unknown route with 404 ROUTE_NOT_FOUND", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const reply = yield* request(`${server.url}/v1/nowhere`, { headers: { "x-correlation-id": "req-404" } })
      assert.strictEqual(reply.status, 404)
      assert.deepStrictEqual(json(reply), { _tag: "RouteNotFound", error: "no route for GET /v1/nowhere", code: "ROUTE_NOT_FOUND", correlationId: "req-404" })
    })
  )

  it.scoped("refuses a body over the limit with 413, declared or streamed", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const big = JSON.stringify({ id: "x", name: "y".repeat(2000) })
      const declared = yield* request(`${server.url}/v1/agents`, { method: "POST", headers: { "content-type": "application/json" }, body: big })
      assert.strictEqual(declared.status, 413)
      assert.strictEqual(json(declared).code, "PAYLOAD_TOO_LARGE")
      const chunked = yield* request(`${server.url}/v1/agents`, {
        method: "POST",
        headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
        body: big
      })
      assert.strictEqual(chunked.status, 413)
      assert.strictEqual(json(chunked).code, "PAYLOAD_TOO_LARGE")
    })
  )

  it.scoped("answers a defect with 500 INTERNAL_ERROR and no stack", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const reply = yield* request(`${server.url}/v1/boom`)
      assert.strictEqual(reply.status, 500)
      const body = json(reply)
      assert.strictEqual(body.code, "INTERNAL_ERROR")
      assert.strictEqual(body.correlationId, reply.headers["x-correlation-id"])
      assert.notInclude(reply.body, "secret stack detail")
      assert.notInclude(reply.body, "at ")
    })
  )

  it.scoped("serves concurrent requests", () =>
    Effect.gen(function* () {
      const server = yield* serve
      const ids = Array.from({ length: 50 }, (_, i) => `c${i}`)
      const created = yield* Effect.forEach(
        ids,
        (id) =>
          request(`${server.url}/v1/agents`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-correlation-id": `req-${id}` },
            body: JSON.stringify({ id, name: id })
          }),
        { concurrency: "unbounded" }
      )
      for (const [i, reply] of created.entries()) {
        assert.strictEqual(reply.status, 201)
        assert.strictEqual(reply.headers["x-correlation-id"], `req-${ids[i]}`)
        assert.strictEqual(json(reply).id, ids[i])
      }
      const read = yield* Effect.forEach(ids, (id) => request(`${server.url}/v1/agents/${id}`), { concurrency: "unbounded" })
      assert.deepStrictEqual(read.map((r) => json(r).name), ids)
    })
  )

  it.scoped("exposes a plain listener for a server the caller owns", () =>
    Effect.gen(function* () {
      const handle = yield* Serve.listener(ExampleApi, AgentsLive)
      const server = Http.createServer(handle)
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
      )
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const reply = yield* request(`http://127.0.0.1:${port}/v1/agents/a1`)
      assert.strictEqual(reply.status, 200)
      assert.strictEqual(json(reply).name, "Alice")
    })
  )

  it.scoped("writes an answer its handler holds back (holdAnswer) once it lets go, whether the handler succeeded or failed", () =>
    Effect.gen(function* () {
      const held: Array<() => void> = []
      const registered = yield* Queue.unbounded<void>()
      const HoldGroup = HttpApiGroup.make("hold")
        .add(HttpApiEndpoint.get("held", "/held").addSuccess(Schema.String))
        .add(HttpApiEndpoint.get("failing", "/failing").addSuccess(Schema.String).addError(AgentNotFound))
        .add(HttpApiEndpoint.get("free", "/free").addSuccess(Schema.String))
      const HoldApi = HttpApi.make("hold").add(HoldGroup)
      const hold = (request: HttpServerRequest.HttpServerRequest) =>
        Effect.sync(() => {
          held.push(holdAnswer(request)!)
          Queue.unsafeOffer(registered, undefined)
        })
      const handlers = ApiGroup.group(HoldApi, "hold", (h) =>
        h.handle("held", ({ request }) => Effect.as(hold(request), "kept"))
          .handle("failing", ({ request }) => Effect.zipRight(hold(request), Effect.fail(new AgentNotFound({ code: "AGENT_NOT_FOUND", message: "none" }))))
          .handle("free", () => Effect.succeed("free")))
      const server = yield* Serve.make(HoldApi, handlers)
      for (const [path, status, body] of [["/held", 200, "\"kept\""], ["/failing", 404, undefined]] as const) {
        const answer = yield* Effect.fork(request(`${server.url}${path}`))
        yield* Queue.take(registered)
        // Another request answered after it: the held one was not written meanwhile.
        assert.strictEqual((yield* request(`${server.url}/free`)).status, 200)
        assert.isTrue(Option.isNone(yield* Fiber.poll(answer)))
        held.shift()!()
        const reply = yield* Fiber.join(answer)
        assert.strictEqual(reply.status, status)
        if (body !== undefined) assert.strictEqual(reply.body, body)
      }
    })
  )

  it.scoped("stops accepting connections once closed", () =>
    Effect.gen(function* () {
      const server = yield* serve
      assert.strictEqual((yield* request(`${server.url}/v1/agents/a1`)).status, 200)
      yield* server.close
      const after = yield* Effect.either(request(`${server.url}/v1/agents/a1`))
      assert(Either.isLeft(after))
    })
  )
})
