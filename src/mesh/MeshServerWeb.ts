/**
 * A MeshServer as a fetch handler (`Request` → `Promise<Response>`), for Workers, Edge runtimes and any runtime with
 * the fetch API (docs/runtimes.md): the same `MeshServerApi` and the same handlers (`MeshServerHandlers`) as
 * `MeshServer`, replies streamed over SSE as a `ReadableStream`. Nonces go to the `NonceStore` in context (else a
 * bounded memory store: per isolate on Workers), sender keys to `resolvePublicKey` or the `KeyResolver` in context
 * (`MeshClient.layerKeyResolver` asks a hub over HTTP). Imports no SQL and no node:http.
 *
 * Floor: mesh (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { InvalidDid } from "../core/Did.js"
import type { Keys, MalformedKey } from "../core/Keys.js"
import type { KeyResolver } from "../core/KeyResolver.js"
import type { NonceStore } from "../core/NonceStore.js"
import * as WebHandler from "../http/WebHandler.js"
import { MeshServerApi } from "./MeshServerApi.js"
import { makeHandlers, type MeshServerError, type MeshServerOptions } from "./MeshServerHandlers.js"

/** How to serve a MeshServer as a fetch handler: its options without the listening address and node:http's guards. */
export interface MeshServerWebOptions<R = never> extends Omit<MeshServerOptions<R>, "port" | "host" | "serving"> {
  /** The web handler's request rules (Host, Origin, requests in flight, the client's address). */
  readonly web?: Omit<WebHandler.Options, "maxBodyBytes" | "refusals">
}

/** Builds the handlers in the current scope and returns the fetch handler. */
export const make = <R = never>(
  options: MeshServerWebOptions<R>
): Effect.Effect<WebHandler.Handler, MeshServerError | InvalidDid | MalformedKey, Scope.Scope | Keys | R> =>
  Effect.flatMap(makeHandlers(options), ({ handlers }) =>
    WebHandler.make(MeshServerApi, handlers, { ...options.web, ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }) })
  )

/**
 * The MeshServer as a fetch handler built on its first request (once per isolate on Workers) over `layers`: `Keys`
 * (`Keys.noble` where there is no node:crypto) and, optionally, a `NonceStore` and a `KeyResolver`.
 */
export const toWebHandler = <E>(
  options: MeshServerWebOptions,
  layers: Layer.Layer<Keys | NonceStore | KeyResolver, E> | Layer.Layer<Keys, E>
): WebHandler.WebApp => WebHandler.lazy(() => Effect.provide(make(options), layers as Layer.Layer<Keys, E>))
