import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as Network from "../../src/sim/Network.js"

/** A network with one echo handler at http://echo.sim that counts the requests it handled. */
const echo = Effect.gen(function* () {
  const network = yield* Network.make
  const seen: Array<string> = []
  yield* network.register("http://echo.sim", async (request) => {
    const body = await request.text()
    seen.push(`${request.method} ${new URL(request.url).pathname} ${body}`)
    return new Response(JSON.stringify({ echo: body }), { status: 201, headers: { "content-type": "application/json" } })
  })
  const post = (body: string) =>
    HttpClient.execute(HttpClientRequest.post("http://echo.sim/v1/x").pipe(HttpClientRequest.bodyText(body))).pipe(
      Effect.flatMap((r) => Effect.map(r.json, (json) => ({ status: r.status, json }))),
      Effect.provideService(HttpClient.HttpClient, Network.client(network))
    )
  return { network, seen, post }
})

describe("Network", () => {
  it.effect("delivers a request to the handler of its origin and answers its response", () =>
    Effect.gen(function* () {
      const { network, post, seen } = yield* echo
      const r = yield* post("hello")
      assert.deepStrictEqual(r, { status: 201, json: { echo: "hello" } })
      assert.deepStrictEqual(seen, ["POST /v1/x hello"])
      const trace = yield* network.trace
      assert.deepStrictEqual(trace.map((l) => [l.method, l.origin, l.path, l.outcome]), [["POST", "http://echo.sim", "/v1/x", 201]])
    }))

  it.effect("a request to an origin nothing serves fails as a refused connection", () =>
    Effect.gen(function* () {
      const network = yield* Network.make
      const r = yield* Effect.flip(
        HttpClient.get("http://nobody.sim/").pipe(Effect.provideService(HttpClient.HttpClient, Network.client(network)))
      )
      assert.strictEqual(r._tag, "RequestError")
      assert.strictEqual((yield* network.trace)[0]?.outcome, "unreachable")
    }))

  it.effect("a dropped request never reaches the handler; the client gets a transport error", () =>
    Effect.gen(function* () {
      const { network, post, seen } = yield* echo
      yield* network.reset(new Map([[0, [{ _tag: "DropRequest" }]]]))
      const r = yield* Effect.flip(post("lost"))
      assert.strictEqual(r._tag, "RequestError")
      assert.deepStrictEqual(seen, [])
      // Faults are by request number: the next request goes through.
      assert.strictEqual((yield* post("next")).status, 201)
      assert.deepStrictEqual(seen, ["POST /v1/x next"])
    }))

  it.effect("a dropped response: the handler ran, the client gets a transport error", () =>
    Effect.gen(function* () {
      const { network, post, seen } = yield* echo
      yield* network.reset(new Map([[0, [{ _tag: "DropResponse" }]]]))
      const r = yield* Effect.flip(post("done"))
      assert.strictEqual(r._tag, "RequestError")
      assert.deepStrictEqual(seen, ["POST /v1/x done"])
      assert.strictEqual((yield* network.trace)[0]?.outcome, "dropped")
    }))

  it.effect("a duplicated request reaches the handler twice with the same body; the client sees one response", () =>
    Effect.gen(function* () {
      const { network, post, seen } = yield* echo
      yield* network.reset(new Map([[0, [{ _tag: "Duplicate" }]]]))
      const r = yield* post("twice")
      assert.deepStrictEqual(r, { status: 201, json: { echo: "twice" } })
      assert.deepStrictEqual(seen, ["POST /v1/x twice", "POST /v1/x twice"])
    }))

  it.effect("a delayed request waits on the clock, so a later one overtakes it", () =>
    Effect.gen(function* () {
      const { network, post, seen } = yield* echo
      yield* network.reset(new Map([[0, [{ _tag: "Delay", millis: 5_000 }]]]))
      const slow = yield* Effect.fork(post("first"))
      yield* Effect.yieldNow()
      yield* post("second")
      assert.deepStrictEqual(seen, ["POST /v1/x second"])
      yield* TestClock.adjust(5_000)
      assert.strictEqual((yield* Fiber.join(slow)).status, 201)
      assert.deepStrictEqual(seen, ["POST /v1/x second", "POST /v1/x first"])
      assert.deepStrictEqual((yield* network.trace).map((l) => l.faults), [[], ["Delay(5000)"]])
    }))

  it.effect("a trigger runs as its request is sent, and the request goes on once it has ended", () =>
    Effect.gen(function* () {
      const { network, post, seen } = yield* echo
      const fired: Array<number> = []
      yield* network.reset(new Map(), new Map([[1, Effect.sync(() => void fired.push(seen.length))]]))
      yield* post("a")
      yield* post("b")
      // Fired on the second request, before the handler saw it.
      assert.deepStrictEqual(fired, [1])
      assert.deepStrictEqual(seen, ["POST /v1/x a", "POST /v1/x b"])
    }))

  it.effect("a handler's requests in flight are counted until it answers them, apart from another handler's", () =>
    Effect.gen(function* () {
      const network = yield* Network.make
      let answer: (r: Response) => void = () => {}
      const slow: Network.Handler = () => new Promise<Response>((resolve) => (answer = resolve))
      const other: Network.Handler = async () => new Response(null, { status: 204 })
      yield* network.register("http://slow.sim", slow)
      yield* network.register("http://other.sim", other)
      const http = Network.client(network)
      const pending = yield* Effect.fork(HttpClient.get("http://slow.sim/").pipe(Effect.provideService(HttpClient.HttpClient, http)))
      yield* HttpClient.get("http://other.sim/").pipe(Effect.provideService(HttpClient.HttpClient, http))
      yield* Effect.yieldNow()
      assert.deepStrictEqual([yield* network.inFlightAt(slow), yield* network.inFlightAt(other)], [1, 0])
      answer(new Response(null, { status: 204 }))
      assert.strictEqual((yield* Fiber.join(pending)).status, 204)
      assert.strictEqual(yield* network.inFlightAt(slow), 0)
    }))

  it.effect("an origin unregistered (a crash) refuses, and registered again (a restart) serves", () =>
    Effect.gen(function* () {
      const { network, post } = yield* echo
      const handler = async () => new Response("{}", { status: 200, headers: { "content-type": "application/json" } })
      yield* network.unregister("http://echo.sim")
      assert.strictEqual((yield* Effect.flip(post("x")))._tag, "RequestError")
      yield* network.register("http://echo.sim", handler)
      assert.strictEqual((yield* post("y")).status, 200)
    }))
})
