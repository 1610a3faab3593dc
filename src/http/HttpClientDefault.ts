/**
 * The `HttpClient` the mesh's own clients run on (hub client, key resolver, MCP client, agent client, model
 * providers): the one already in context when a caller provides one (a simulation's in-memory network, a client
 * behind a proxy), else the platform's fetch. Layers that provided `FetchHttpClient.layer` themselves take this
 * instead, so their client can be swapped without a change to their types.
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/** The caller's `HttpClient` if the building context holds one, else `FetchHttpClient.layer`. */
export const layer: Layer.Layer<HttpClient.HttpClient> = Layer.unwrapEffect(
  Effect.map(
    Effect.serviceOption(HttpClient.HttpClient),
    Option.match({
      onNone: () => FetchHttpClient.layer,
      onSome: (client) => Layer.succeed(HttpClient.HttpClient, client)
    })
  )
)
