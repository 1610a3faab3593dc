/**
 * An agent server as a fetch handler (`Request` → `Promise<Response>`), for Cloudflare Workers, Vercel Edge and any
 * runtime with the fetch API: the same `AgentApi`, the same handlers (`AgentHttp`, `A2aHttp`) and the same parts
 * (`AgentServices.layerParts`) as `AgentServer`, over stores chosen by layer — in isolate memory by default, or the
 * caller's own (a Durable Object, KV, a database reached over HTTP) through the store tags, which are the adapter
 * interface (docs/runtimes.md, "Durable state"). Imports no SQL and no node:http.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AgentApi } from "./AgentApi.js"
import { AgentConfigError } from "./AgentError.js"
import * as AgentHttp from "./AgentHttp.js"
import * as A2aHttp from "./A2aHttp.js"
import { challengeOf } from "./Auth.js"
import * as A2aTasks from "./A2aTasks.js"
import { type AgentServerOptions, checkOptions, layerParts, layerResolver, type Stores } from "./AgentServices.js"
import * as Identity from "./Identity.js"
import * as RunStreams from "./RunStreams.js"
import * as AgentMemory from "../core/AgentMemory.js"
import * as IdempotencyStore from "../core/IdempotencyStore.js"
import type { Keys, MalformedKey } from "../core/Keys.js"
import * as NonceStore from "../core/NonceStore.js"
import * as TaskStore from "../core/TaskStore.js"
import type * as Scope from "effect/Scope"
import * as HostGuard from "../http/HostGuard.js"
import * as WebHandler from "../http/WebHandler.js"

/** How to serve an agent as a fetch handler: `AgentServerOptions` without what only a node:http server has. */
export interface AgentWebOptions
  extends Omit<AgentServerOptions, "database" | "host" | "port" | "serving" | "mcpServers" | "mcpTools"> {
  /**
   * The base URL callers use (the one a mesh-sig caller signs). Required under mesh-sig: a Worker's request URL is
   * built from the Host header the caller sent, which must not decide what was signed. Otherwise the first
   * request's origin is published.
   */
  readonly publicUrl?: string
  /** The web handler's request rules (Host, Origin, requests in flight); `maxBodyBytes` is the agent's own option. */
  readonly web?: Omit<WebHandler.Options, "maxBodyBytes" | "refusals">
}

/**
 * The stores kept in isolate memory: paused tasks, nonces (bounded), stored replies (bounded) and session memory.
 * On Workers they live as long as the isolate, and each isolate has its own: replay protection holds per isolate
 * only (docs/runtimes.md, "Durable state").
 */
export const layerStoresMemory = (options: AgentWebOptions): Layer.Layer<Stores, AgentConfigError, Keys> => {
  const mode = options.memory ?? "none"
  if (mode === "persistent") {
    return Layer.fail(new AgentConfigError({ code: "INVALID_CONFIG", message: "memory persistent needs a durable AgentMemory layer (give stores)" }))
  }
  return Layer.mergeAll(
    TaskStore.layerMemory,
    options.nonceStore === undefined ? NonceStore.layerMemory() : Layer.succeed(NonceStore.NonceStore, options.nonceStore),
    mode === "session" ? AgentMemory.layerSession() : AgentMemory.layerNone,
    IdempotencyStore.layerMemory(),
    layerResolver(options)
  )
}

/**
 * Builds the agent's parts in the current scope and returns its fetch handler; `stores` replaces the memory stores.
 * Closing the scope stops streamed runs and A2A tasks.
 */
export const make = <E = never>(
  options: AgentWebOptions,
  stores?: Layer.Layer<Stores, E, Keys>,
  firstRequest?: Request
): Effect.Effect<WebHandler.Handler, AgentConfigError | MalformedKey | E, Scope.Scope | Keys> =>
  Effect.gen(function* () {
    yield* checkOptions(options)
    if (options.auth === "mesh-sig" && options.publicUrl === undefined) {
      return yield* Effect.fail(new AgentConfigError({ code: "INVALID_CONFIG", message: "auth mesh-sig behind a fetch handler needs publicUrl: the URL callers sign" }))
    }
    const services = yield* Layer.build(layerParts<AgentConfigError | E>(options, stores ?? layerStoresMemory(options)))
    return yield* Effect.provide(
      Effect.gen(function* () {
        const identity = yield* Identity.Identity
        const streams = yield* RunStreams.RunStreams
        const a2a = yield* A2aTasks.A2aTasks
        const handler = yield* WebHandler.make(AgentApi, Layer.merge(AgentHttp.layer, A2aHttp.layer), {
          ...options.web,
          // Callers reach the agent by its public URL's name, as on node:http (`Serve.withPublicUrl`).
          allowedHosts: HostGuard.withHostOf(options.web?.allowedHosts, options.publicUrl),
          refusals: new Map([["/", A2aHttp.refusal]]),
          challenge: challengeOf(options.auth ?? "none", options.name),
          ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
        })
        yield* Effect.addFinalizer(() => Effect.zipRight(streams.stopAll, a2a.stopAll))
        const published = options.publicUrl ?? (firstRequest === undefined ? undefined : new URL(firstRequest.url).origin)
        if (published !== undefined) yield* identity.publish(published)
        return handler
      }),
      services
    )
  })

/**
 * The agent as a fetch handler built on its first request (once per isolate on Workers), with `keys` (`Keys.noble`
 * where there is no node:crypto) and optionally its own stores. A configuration that cannot start answers 500.
 */
export const toWebHandler = <E = never>(
  options: AgentWebOptions,
  layers: { readonly keys: Layer.Layer<Keys>; readonly stores?: Layer.Layer<Stores, E, Keys> }
): WebHandler.WebApp =>
  WebHandler.lazy((request) => Effect.provide(make(options, layers.stores, request), layers.keys))
