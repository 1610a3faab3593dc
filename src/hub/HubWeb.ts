/**
 * The hub's read paths as a fetch handler (`Request` → `Promise<Response>`): resolving, listing and searching the
 * registry, `/keys`, pools and allocations, the learner statistics, `/health`, `/ready`, `/metrics` and the OpenAPI
 * document, from the same `HubApi` and handlers (`HubHttp`) as the node:http hub, over the same SQL services
 * (`Hub.layerServices`). So it runs where SQLite or Postgres is reached, which is Node: a read replica mounted in a
 * fetch-based server (docs/runtimes.md). Writes (registration, keys, the ledger's allocations) are not routed here
 * (404): they need the node:http hub's per-connection guards and client address.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Keys } from "../core/Keys.js"
import * as HostGuard from "../http/HostGuard.js"
import * as WebHandler from "../http/WebHandler.js"
import type { DatabaseError } from "../sql/Database.js"
import { type HubOptions, layerServices } from "./Hub.js"
import { HubApi } from "./HubApi.js"
import { HandlersLive, HubPublicUrl } from "./HubHttp.js"

/** How to serve the hub's reads as a fetch handler. */
export interface HubWebOptions extends Pick<HubOptions, "database" | "limits" | "staleAfterMs" | "publicUrl" | "nonces" | "rateLimit" | "writeQuota" | "challengePurge"> {
  /** The web handler's request rules (Host, Origin, requests in flight, the client's address). */
  readonly web?: Omit<WebHandler.Options, "routes" | "refusals">
}

/** The methods of the read paths. */
const isRead = (method: string): boolean => method === "GET" || method === "HEAD"

/** Opens the hub's services on its database in the current scope and returns the fetch handler of its reads. */
export const make = (options: HubWebOptions): Effect.Effect<WebHandler.Handler, DatabaseError, Scope.Scope | Keys> =>
  Effect.gen(function* () {
    const services = yield* Layer.build(layerServices(options))
    return yield* WebHandler.make(HubApi, HandlersLive, {
      ...options.web,
      // Clients reach the hub by its public URL's name, as on node:http (`Serve.withPublicUrl`).
      allowedHosts: HostGuard.withHostOf(options.web?.allowedHosts, options.publicUrl),
      routes: isRead
    }).pipe(
      Effect.provide(services),
      options.publicUrl === undefined ? (e) => e : Effect.provideService(HubPublicUrl, options.publicUrl)
    )
  })

/** The hub's reads as a fetch handler built on its first request, with `keys`. */
export const toWebHandler = (options: HubWebOptions, keys: Layer.Layer<Keys>): WebHandler.WebApp =>
  WebHandler.lazy(() => Effect.provide(make(options), keys))
