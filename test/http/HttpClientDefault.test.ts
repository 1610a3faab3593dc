import { assert, describe, it } from "@effect/vitest"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as HttpClientDefault from "../../src/http/HttpClientDefault.js"
import { KeyResolver } from "../../src/core/KeyResolver.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"

/** An in-memory client that answers 404 to everything and remembers the URLs it was asked for. */
const recording = () => {
  const urls: Array<string> = []
  const client = HttpClient.make((request) =>
    Effect.sync(() => {
      urls.push(request.url)
      return HttpClientResponse.fromWeb(request, new Response(JSON.stringify({ code: "NOT_FOUND", error: "no" }), { status: 404, headers: { "content-type": "application/json" } }))
    })
  )
  return { urls, layer: Layer.succeed(HttpClient.HttpClient, client) }
}

describe("HttpClientDefault", () => {
  it.effect("is the HttpClient the caller put in context", () =>
    Effect.gen(function* () {
      const given = recording()
      const client = yield* Effect.provide(HttpClient.HttpClient, HttpClientDefault.layer.pipe(Layer.provide(given.layer)))
      yield* Effect.ignore(client.get("http://sim.invalid/x"))
      assert.deepStrictEqual(given.urls, ["http://sim.invalid/x"])
    }))

  it.effect("is the platform's fetch client when the caller gave none", () =>
    Effect.gen(function* () {
      const given = recording()
      const fetchClient = yield* Effect.provide(HttpClient.HttpClient, HttpClientDefault.layer)
      const withGiven = yield* Effect.provide(HttpClient.HttpClient, HttpClientDefault.layer.pipe(Layer.provide(given.layer)))
      assert.notStrictEqual(fetchClient, withGiven)
    }))

  it.effect("carries the hub's key resolver over the caller's network", () =>
    Effect.gen(function* () {
      const given = recording()
      const resolver = yield* Effect.provide(KeyResolver, MeshClient.layerKeyResolver({ hubUrl: "http://hub.sim", retry: { times: 0 } }).pipe(Layer.provide(given.layer)))
      // The fake hub answers nothing a resolver accepts: what matters is where the request went.
      yield* Effect.flip(resolver.resolve("did:mesh:alice"))
      assert.isTrue(given.urls.length > 0 && given.urls.every((u) => u.startsWith("http://hub.sim/")), JSON.stringify(given.urls))
    }).pipe(Effect.provide(KeysNative.layer)))
})
