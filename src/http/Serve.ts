/**
 * Serves an `HttpApi` on node:http through a lean path (docs/architecture.md §6): the handler layer is built once, its
 * routes are taken from HttpApiBuilder's router, and the endpoints of groups made with `ApiGroup.group` are compiled
 * at start (`Endpoint.ts`: HttpApiBuilder's decoding, middleware and success encoding with every schema compiled
 * once). A request runs synchronously where its handler does, as one fiber on a prebuilt runtime where it does not,
 * with the body already read natively; other groups run HttpApiBuilder's route effect. A handler that answers at once
 * but must not be heard before something else is done holds its answer back (`LeanRequest.holdAnswer`) rather than
 * waiting on a fiber: it is written when the handler lets go. No per-request layer, scope or web `Request`; a span only while tracing is on (`Tracing`). Every answer is
 * counted for `/metrics` (`Metrics`), written to the access log when it is on (`AccessLog`), and a 5xx is logged once
 * with its correlation id (`FailureLog`). Errors go out as `{ _tag, error, code, correlationId }` with the status
 * annotated on the error schema.
 *
 * The serving layer's own errors (`InvalidJson`, `RouteNotFound`, `PayloadTooLarge`, `UnsupportedMediaType`,
 * `Overloaded`, `HostNotAllowed`, `OriginNotAllowed`, `InternalError` from ErrorBody.ts) go out in the same shape
 * whether or not the api declares them; add them with `api.addError(…)` so that `HttpApiClient` decodes them as
 * typed errors and `OpenApi.fromApi` lists them.
 *
 * Every request passes the same guards before a handler runs, cheapest first (docs/protocol.md, "HTTP serving
 * rules"): Host (421), Origin and CORS preflight (403), route (404), body size with a bounded drain (413), media
 * type (415), strict JSON (400). Load is shed before the body is read and before any handler runs: while the event
 * loop lags past `maxEventLoopLagMs` or `maxInFlight` handlers run, a request gets 503 `OVERLOADED` with `Retry-After`
 * at once (paths in `shedExemptPaths` are always served). The server itself bounds header, request and keep-alive
 * time and connections in total and per address. Every response says
 * `X-Content-Type-Options: nosniff` and, unless the handler set its own, `Cache-Control: no-store` (API keys and
 * tokens travel in bodies).
 *
 * Not supported on this path: `HttpApiMiddleware` attached to the whole api (attach it to the groups; `listener`
 * dies at start otherwise), global HttpApp middleware added with `HttpApiBuilder.middleware*` (ignored), multipart
 * bodies, websocket upgrades. Handlers get no per-request `Scope`.
 *
 * Floor: http (docs/architecture.md §3).
 */
import type * as Headers from "@effect/platform/Headers"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as AccessLog from "./AccessLog.js"
import { CorrelationId, fromHeader, HEADER } from "./CorrelationId.js"
import { Entropy, requireCsprng } from "../core/Entropy.js"
import { wasLogged } from "./FailureLog.js"
import { RequestMetrics, type RouteStats, ServedMetrics, UNMATCHED } from "./Metrics.js"
import { fromTraceparent, HEADER as TRACEPARENT, Tracing } from "./Tracing.js"
import { parseJsonStrict, StrictJsonError } from "../core/internal/json.js"
import { errorBody } from "./ErrorBody.js"
import { type AnyRoute, type ApiContext, BODY_METHODS, codeOfTag, collectErrors, DEFAULT_MAX_BODY, DEFAULT_MAX_IN_FLIGHT, DEFAULT_SHED_EXEMPT, field, isJsonMediaType, loggable, MAX_JSON_DEPTH, nestsDeeperThan, nonJsonRoutes, type Provided } from "./ServeRules.js"

/** The JSON depth bound and its check, from `ServeRules`, kept here for callers that import them from `Serve`. */
export { MAX_JSON_DEPTH, nestsDeeperThan }
import * as HostGuard from "./HostGuard.js"
import { LeanRequest } from "./LeanRequest.js"
import * as LoopLag from "./LoopLag.js"
import { discardBody, hasBody, readBody } from "./ReadBody.js"
import { RouteTable } from "./RouteTable.js"
import { writeJson, writeResponse } from "./WriteResponse.js"
import { CompiledGroups, type GroupHandlers } from "./ApiGroup.js"
import { compilable, compile, type CompiledEndpoint, refailCause, type Written } from "./Endpoint.js"
import { clientKey } from "../core/internal/clientKey.js"
import * as RunSync from "./RunSync.js"

/** Serving options. */
export interface Options {
  readonly port?: number
  readonly host?: string
  /** Largest accepted request body; larger ones get 413 before anything is parsed. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /**
   * How much of a refused body (413, or any early refusal) is read and thrown away so the client can read the
   * answer; past it the connection is closed. Default 4 × `maxBodyBytes`.
   */
  readonly maxDrainBytes?: number
  /**
   * DNS names (`name` or `name:port`) accepted in the `Host` header besides `localhost` and IP literals, which are
   * always accepted; `"*"` accepts any. Guards against DNS rebinding: a name not listed gets 421 HOST_NOT_ALLOWED.
   */
  readonly allowedHosts?: ReadonlyArray<string>
  /**
   * Origins (`scheme://host[:port]`, `"*"` for any) whose cross-origin requests are served and whose CORS
   * preflights are answered; a request from another origin gets 403 ORIGIN_NOT_ALLOWED. Default none.
   */
  readonly allowedOrigins?: ReadonlyArray<string>
  /** Time to receive a request's headers; then 408 and close. Default 10 s. */
  readonly headersTimeoutMs?: number
  /** Time to receive a whole request, headers and body; then 408 and close. Default 30 s. */
  readonly requestTimeoutMs?: number
  /** How long an idle keep-alive connection is kept. Default 5 s. */
  readonly keepAliveTimeoutMs?: number
  /** Open connections in total; further ones are closed at once. Default 1024. */
  readonly maxConnections?: number
  /** Open connections from one remote address; further ones are closed at once. Default 256. */
  readonly maxConnectionsPerAddress?: number
  /** Requests being handled at once; further ones get 503 OVERLOADED with `Retry-After` at once. Default 256. */
  readonly maxInFlight?: number
  /**
   * Event-loop lag (ms) past which new requests get 503 OVERLOADED with `Retry-After` at once, so that a flood of
   * requests whose handlers finish synchronously (never "in flight") cannot queue every request and new connection
   * behind it. `Infinity` turns it off. Default 100.
   */
  readonly maxEventLoopLagMs?: number
  /** The current event-loop lag in ms. Default: a sampler on a 20 ms timer (`LoopLag.ts`); tests inject their own. */
  readonly eventLoopLag?: () => number
  /** Paths (exact) never shed, so probes still answer under load. Default `["/health"]`. */
  readonly shedExemptPaths?: ReadonlyArray<string>
  /**
   * A second port (0 for any) on `host` answering only `shedExemptPaths`, for health probes. Node accepts one new
   * connection per event-loop turn, so under a flood a probe's new connection on the main port waits behind every
   * connection queued before it; this port's queue holds probes only. Default none.
   */
  readonly probePort?: number
  /**
   * On close (the scope ending, e.g. on SIGTERM), how long requests and responses in flight (streams included) may take
   * to finish after the server stops accepting connections; past it, the connections left are closed. Default 0:
   * close at once. `mesh hub` and `mesh agent` default to 10 s (`--shutdown-timeout`).
   */
  readonly shutdownTimeoutMs?: number
  /**
   * Paths (exact) whose routes speak a protocol of their own on the wire (A2A's JSON-RPC on `/`): refusals of a
   * request to them that found its route (400 INVALID_JSON, 413, 415) are written by their writer instead of as the
   * error body of docs/architecture.md §4. Default none.
   */
  readonly refusals?: ReadonlyMap<string, RefusalWriter>
  /** The headers a 401 with this code carries besides its body: the `WWW-Authenticate` challenge of the server's auth (RFC 9110 §11.6.1). */
  readonly challenge?: (code: string) => Readonly<Record<string, string>>
}

/** A serving-layer refusal (400 INVALID_JSON, 413 PAYLOAD_TOO_LARGE, 415 UNSUPPORTED_MEDIA_TYPE) of a request to a route. */
export interface Refusal {
  readonly status: number
  readonly code: string
  readonly message: string
  readonly correlationId: string
}

/** Writes a refusal in the protocol a route speaks (JSON-RPC, say): the status and the JSON body to send. */
export type RefusalWriter = (refusal: Refusal) => { readonly status: number; readonly body: string }

/** The serving guards and limits a surface (hub, agent, mesh server) passes through from its own options. */
export type Guards = Omit<Options, "port" | "host" | "maxBodyBytes">

/** `guards` with the host of `publicUrl` (the name callers use, behind a proxy or DNS) added to `allowedHosts`. */
export const withPublicUrl = (guards: Guards | undefined, publicUrl: string | undefined): Guards => {
  const host = HostGuard.hostOfUrl(publicUrl)
  return host === undefined ? { ...guards } : { ...guards, allowedHosts: [...(guards?.allowedHosts ?? []), host] }
}

/** The options `listener` uses (the others belong to the node:http server `make` creates). */
export type ListenerOptions = Pick<
  Options,
  "maxBodyBytes" | "maxDrainBytes" | "allowedHosts" | "allowedOrigins" | "maxInFlight" | "maxEventLoopLagMs" | "eventLoopLag" | "shedExemptPaths" | "refusals" | "challenge"
>

/** A running server. */
export interface Server {
  readonly port: number
  readonly url: string
  /** The URL of the `probePort` listener, when one was asked for. */
  readonly probeUrl?: string
  /** Closes at once: every connection, whatever it is doing. */
  readonly close: Effect.Effect<void>
  /**
   * Stops accepting connections and waits, up to `shutdownTimeoutMs`, until every request and response in flight has
   * finished and `also` has completed; connections close as they fall idle. What is left is closed when the scope ends.
   */
  readonly drain: (also?: Effect.Effect<void>) => Effect.Effect<void>
}

/** A node:http request listener. */
export type Listener = (req: Http.IncomingMessage, res: Http.ServerResponse) => void

/** The server could not listen. */
export class ServeError extends Data.TaggedError("ServeError")<{ readonly message: string; readonly cause?: unknown }> {}

/** The layer implementing every group of `Api`, as `HttpApiBuilder.group` layers merged. */
export type HandlersLayer<Api extends HttpApi.HttpApi.Any, E, R> = Api extends HttpApi.HttpApi<infer Id, infer Groups, infer _E, infer _R>
  ? Layer.Layer<HttpApiGroup.HttpApiGroup.ToService<Id, Groups>, E, R>
  : never

// What the route table holds per route: the route, its declared path, whether its payload is JSON, its counters,
// and, for an endpoint of a group made with `ApiGroup.group`, the endpoint compiled with its group's context.
interface Served {
  readonly route: AnyRoute
  readonly path: string
  readonly json: boolean
  readonly stats: RouteStats
  readonly compiled: { readonly endpoint: CompiledEndpoint; readonly base: BaseContext; readonly services: ReadonlyMap<string, unknown> } | undefined
}

// The services every request of a route starts from, as parallel arrays: copying them into a fresh Map with `set`
// costs about half of `new Map(map)`, which allocates an entry per service.
interface BaseContext {
  readonly keys: ReadonlyArray<string>
  readonly values: ReadonlyArray<unknown>
}

const baseContext = (map: ReadonlyMap<string, unknown>): BaseContext => ({ keys: Array.from(map.keys()), values: Array.from(map.values()) })

const contextMap = (base: BaseContext): Map<string, unknown> => {
  const map = new Map<string, unknown>()
  const { keys, values } = base
  for (let i = 0; i < keys.length; i++) map.set(keys[i]!, values[i])
  return map
}

/** A request's services: its route's, then the request, its route and parameters, span, search and correlation id. */
const requestContext = (base: BaseContext, request: LeanRequest, routeContext: unknown, search: unknown, cid: string, span: Tracer.Span | undefined): Map<string, unknown> => {
  const map = contextMap(base)
  map.set(HttpServerRequest.HttpServerRequest.key, request)
  map.set(HttpRouter.RouteContext.key, routeContext)
  if (span !== undefined) map.set(Tracer.ParentSpan.key, span)
  map.set(HttpServerRequest.ParsedSearchParams.key, search)
  map.set(CorrelationId.key, cid)
  return map
}

// The status a request is counted and logged with when no response was sent (its client went away first).
const CLIENT_CLOSED = 499

const DRAIN_FACTOR = 4
const DEFAULT_HEADERS_TIMEOUT = 10_000
const DEFAULT_REQUEST_TIMEOUT = 30_000
const DEFAULT_KEEP_ALIVE_TIMEOUT = 5_000
const DEFAULT_MAX_CONNECTIONS = 1024
const DEFAULT_MAX_PER_ADDRESS = 256
// A healthy loop turns in well under 10 ms; 100 ms of lag is already a tenth of a second added to every request and
// to every new connection's first answer, yet stays above a GC pause or one slow query, which must not shed.
const DEFAULT_MAX_LAG_MS = 100

/**
 * A body the server will not read (refused early, a method without one, a preflight) is drained up to `maxDrain`,
 * so the client can read the answer; past the bound the answer says `Connection: close`.
 */
const drainUnread = (req: Http.IncomingMessage, res: Http.ServerResponse, maxDrain: number): void => {
  if (hasBody(req) && !discardBody(req, maxDrain)) res.setHeader("connection", "close")
}

/** Seconds a shed request is told to wait (`Retry-After`): shedding ends as soon as lag or requests in flight drop. */
const OVERLOADED_RETRY_AFTER_SECONDS = 1
const OVERLOADED_MESSAGE = "the server is overloaded; retry later"
// `message` is a field of `Overloaded`: a typed client decodes the 503 only when the body has it.
const OVERLOADED_FIELDS = { message: OVERLOADED_MESSAGE, retryAfterSeconds: OVERLOADED_RETRY_AFTER_SECONDS }
const CORS_METHODS = "GET, POST, PUT, PATCH, DELETE"
const CORS_MAX_AGE = "600"
const EMPTY_BODY = Buffer.alloc(0)
const NO_SEARCH_PARAMS: Readonly<Record<string, string | Array<string>>> = Object.freeze({})

const sendError = (
  res: Http.ServerResponse,
  status: number,
  fields: object | undefined,
  tag: string,
  message: string,
  code: string,
  cid: string,
  extra?: Readonly<Record<string, string>>
): void => {
  if (res.headersSent || res.destroyed) return
  const body = errorBody(fields, tag, message, code, cid)
  const headers: Http.OutgoingHttpHeaders = {
    ...extra,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    [HEADER]: cid,
    "x-content-type-options": "nosniff",
    "cache-control": "no-store"
  }
  // An error that says when to come back (RATE_LIMITED) says it in the standard header too.
  const retryAfter = fields !== undefined && "retryAfterSeconds" in fields ? (fields as { retryAfterSeconds: unknown }).retryAfterSeconds : undefined
  if (typeof retryAfter === "number" && Number.isFinite(retryAfter)) headers["retry-after"] = String(Math.max(0, Math.ceil(retryAfter)))
  res.writeHead(status, headers)
  res.end(body)
}

/**
 * Builds the handler layer in the current scope and returns the node:http listener serving `api`. Use it to
 * mount the API on a server you own, or in tests.
 */
export const listener = <Api extends HttpApi.HttpApi.Any, E, R>(
  api: Api,
  handlers: HandlersLayer<Api, E, R>,
  options: ListenerOptions = {}
): Effect.Effect<Listener, E, Scope.Scope | Exclude<R | ApiContext<Api>, Provided>> =>
  Effect.gen(function* () {
    const apiProps = api as unknown as HttpApi.HttpApi.AnyWithProps
    if (apiProps.middlewares.size > 0) {
      return yield* Effect.dieMessage("Serve: api-level middleware is not supported; attach it to the groups")
    }
    const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY
    const maxDrain = options.maxDrainBytes ?? DRAIN_FACTOR * maxBody
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT
    const shedExempt = new Set(options.shedExemptPaths ?? DEFAULT_SHED_EXEMPT)
    const maxLag = options.maxEventLoopLagMs ?? DEFAULT_MAX_LAG_MS
    const lag =
      options.eventLoopLag ??
      (maxLag === Infinity ? () => 0 : (yield* Effect.acquireRelease(Effect.sync(() => LoopLag.start()), (s) => Effect.sync(s.stop))).lag)
    const guard = HostGuard.make(options.allowedHosts, options.allowedOrigins)
    let inFlight = 0
    // Read once: with tracing off the per-request cost is one boolean test.
    const tracing = yield* Tracing
    const entropy = yield* Entropy
    const tracer = yield* Effect.tracer
    const clock = yield* Effect.clock
    const metrics = new RequestMetrics(() => inFlight)
    const unmatched = metrics.route("*", UNMATCHED)
    // HttpApiBuilder.group registers each handler as a route on HttpApiBuilder.Router; building the layers here
    // gives exactly the routes the stock server would run, with the handlers' context already captured.
    // Groups made with `ApiGroup.group` also record their handlers here, to be compiled below.
    const groups: Array<GroupHandlers> = []
    const recorded = Layer.succeed(CompiledGroups, { add: (g: GroupHandlers) => void groups.push(g) })
    const built: Layer.Layer<HttpApi.Api | HttpApiBuilder.Router, E, Exclude<R | ApiContext<Api>, Provided>> = HttpApiBuilder.api(
      apiProps
    ).pipe(
      Layer.provide((handlers as Layer.Layer<never, E, R>).pipe(Layer.provide(Layer.merge(Layer.succeed(ServedMetrics, metrics), recorded)))),
      Layer.provideMerge(Layer.merge(HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer))
    ) as never
    const context = yield* Layer.build(built)
    const router = yield* Effect.provide(HttpApiBuilder.Router.router, context)
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const baseMap: ReadonlyMap<string, unknown> = runtime.context.unsafeMap
    const runtimeBase = baseContext(baseMap)
    const accessLog = (yield* AccessLog.AccessLog) ? AccessLog.writer(runtime, () => clock.unsafeCurrentTimeMillis()) : undefined

    // Each compiled endpoint runs in its group's context with the server's over it, as HttpApiBuilder's route merges
    // them per request (the request's services win); the merged map is made once per group.
    const compiled = new Map<string, Served["compiled"]>()
    for (const g of groups) {
      const merged = new Map(g.context.unsafeMap)
      for (const [key, value] of baseMap) merged.set(key, value)
      for (const item of g.items) {
        if (!compilable(item)) continue
        const endpoint = compile(item, g.context, g.group.middlewares)
        const base = new Map(merged)
        for (const [key, value] of endpoint.provided) base.set(key, value)
        compiled.set(`${item.endpoint.method} ${item.endpoint.path}`, { endpoint, base: baseContext(base), services: base })
      }
    }
    const table = new RouteTable<Served>()
    const nonJson = nonJsonRoutes(apiProps)
    for (const route of router.routes) {
      const path = typeof route.path === "string" ? route.path : String(route.path)
      const key = `${route.method} ${path}`
      table.add(route.method, path, { route: route as AnyRoute, path, json: !nonJson.has(key), stats: metrics.route(route.method, path), compiled: compiled.get(key) })
    }

    /**
     * Every request ends here once its answer's head is written (or its client went away): counted, its span ended,
     * its access line written. Durations read the monotonic timer; nothing but the figures depends on them.
     */
    const finish = (
      method: string,
      path: string,
      res: Http.ServerResponse,
      stats: RouteStats,
      t0: number,
      cid: string,
      caller: string | undefined,
      span: Tracer.Span | undefined,
      exit: Exit.Exit<unknown, unknown> | undefined
    ): void => {
      const status = res.headersSent ? res.statusCode : CLIENT_CLOSED
      const seconds = (performance.now() - t0) / 1000
      stats.record(status, seconds)
      if (span !== undefined) {
        span.attribute("http.response.status_code", status)
        span.end(clock.unsafeCurrentTimeNanos(), status >= 500 && exit !== undefined ? exit : Exit.void)
      }
      if (accessLog !== undefined) {
        accessLog({ method, path, status, durationMs: Math.round(seconds * 10_000) / 10, correlationId: cid, caller, traceId: span?.traceId })
      }
    }
    const errors = collectErrors(apiProps)
    const refusals = options.refusals ?? new Map<string, RefusalWriter>()

    /** A refusal of a request whose route was found, written in that route's protocol when it has one. */
    const refuse = (res: Http.ServerResponse, path: string, status: number, tag: string, message: string, code: string, cid: string): void => {
      const writer = refusals.get(path)
      if (writer === undefined) return sendError(res, status, undefined, tag, message, code, cid)
      if (res.headersSent || res.destroyed) return
      const written = writer({ status, code, message, correlationId: cid })
      res.writeHead(written.status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(written.body),
        [HEADER]: cid,
        "x-content-type-options": "nosniff",
        "cache-control": "no-store"
      })
      res.end(written.body)
    }

    // A routed request refused before its handler ran (415, 400, 503), counted under its route.
    const refuseRouted = (
      res: Http.ServerResponse,
      served: Served,
      method: string,
      path: string,
      t0: number,
      cid: string,
      status: number,
      tag: string,
      message: string,
      code: string,
      fields?: object
    ): void => {
      if (fields === undefined) refuse(res, path, status, tag, message, code, cid)
      else sendError(res, status, fields, tag, message, code, cid)
      finish(method, path, res, served.stats, t0, cid, undefined, undefined, undefined)
    }

    const respondFailure = (res: Http.ServerResponse, cid: string, cause: Cause.Cause<unknown>): void => {
      const failure = Cause.failureOption(cause)
      if (failure._tag === "Some") {
        const e = failure.value
        for (const enc of errors) {
          if (!enc.is(e)) continue
          const encoded = enc.encode(e)
          if (Either.isLeft(encoded)) break
          const fields = typeof encoded.right === "object" && encoded.right !== null ? encoded.right : undefined
          const tag = field(e, "_tag") ?? "Error"
          const message = field(encoded.right, "message") ?? field(e, "message") ?? tag
          const code = field(encoded.right, "code") ?? codeOfTag(tag)
          // A 5xx is the server's own failure: logged once, here, unless the code that failed logged its cause already.
          if (enc.status >= 500 && !wasLogged(e)) {
            runFork(Effect.logError(`answered ${enc.status} ${code}: ${message}`).pipe(Effect.annotateLogs("correlationId", cid)))
          }
          return sendError(res, enc.status, fields, tag, message, code, cid, enc.status === 401 ? options.challenge?.(code) : undefined)
        }
      } else if (Cause.isInterruptedOnly(cause)) {
        return void res.destroy()
      }
      runFork(Effect.logError("request failed", ...loggable(cause)).pipe(Effect.annotateLogs("correlationId", cid)))
      sendError(res, 500, undefined, "InternalError", "internal server error", "INTERNAL_ERROR", cid)
    }

    const writeCompiled = (res: Http.ServerResponse, cid: string, written: Written): void => {
      if (written._tag === "Json") writeJson(res, cid, written.status, written.contentType, written.body)
      else writeResponse(res, cid, written.response, runFork, (cause) => respondFailure(res, cid, cause))
    }

    /** A compiled endpoint's exit on the wire: its success encoded (synchronously unless a schema is async). */
    const respondCompiled = (
      res: Http.ServerResponse,
      cid: string,
      endpoint: CompiledEndpoint,
      exit: Exit.Exit<unknown, unknown>,
      ended: (exit: Exit.Exit<unknown, unknown>) => void
    ): void => {
      if (Exit.isFailure(exit)) {
        respondFailure(res, cid, endpoint.refailParseErrors ? refailCause(exit.cause) : exit.cause)
        return ended(exit)
      }
      const encoded = endpoint.encode(exit.value)
      if (Either.isEither(encoded)) {
        if (Either.isRight(encoded)) writeCompiled(res, cid, encoded.right)
        else respondFailure(res, cid, encoded.left)
        return ended(exit)
      }
      runFork(encoded).addObserver((e) => {
        if (Exit.isSuccess(e)) writeCompiled(res, cid, e.value)
        else respondFailure(res, cid, e.cause)
        ended(e)
      })
    }

    const dispatch = (
      req: Http.IncomingMessage,
      res: Http.ServerResponse,
      cid: string,
      served: Served,
      params: Readonly<Record<string, string | undefined>>,
      url: string,
      query: number,
      path: string,
      body: Buffer,
      t0: number
    ): void => {
      const method = req.method ?? "GET"
      let parsed: unknown = undefined
      let headers: Headers.Headers | undefined = undefined
      if (body.length > 0 && served.json) {
        // No Content-Type is read as JSON: browsers always send one with a body (a form's is urlencoded or
        // multipart, a fetch string's text/plain), so only non-browser clients omit it.
        const type = req.headers["content-type"]
        if (type !== undefined && !isJsonMediaType(type)) {
          return refuseRouted(res, served, method, path, t0, cid, 415, "UnsupportedMediaType", "request body must be application/json", "UNSUPPORTED_MEDIA_TYPE")
        }
        // HttpApi reads a body as JSON only when its type contains "application/json"; `+json` types are JSON too.
        if (type !== undefined && !type.toLowerCase().includes("application/json")) {
          headers = { ...(req.headers as Headers.Headers), "content-type": "application/json" } as Headers.Headers
        }
        const text = body.toString("utf8")
        if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
          return refuseRouted(res, served, method, path, t0, cid, 400, "InvalidJson", `request body nests deeper than ${MAX_JSON_DEPTH} levels`, "INVALID_JSON")
        }
        try {
          parsed = parseJsonStrict(text)
        } catch (e) {
          const message = e instanceof StrictJsonError && e.reason !== "syntax" ? `request body is not accepted JSON: ${e.message}` : "request body is not valid JSON"
          return refuseRouted(res, served, method, path, t0, cid, 400, "InvalidJson", message, "INVALID_JSON")
        }
      }
      if (inFlight >= maxInFlight && !shedExempt.has(path)) return refuseRouted(res, served, method, path, t0, cid, 503, "Overloaded", OVERLOADED_MESSAGE, "OVERLOADED", OVERLOADED_FIELDS)
      inFlight++
      const route = served.route
      const compiled = served.compiled
      const request = new LeanRequest(req, url, body, parsed, headers)
      let span: Tracer.Span | undefined = undefined
      if (tracing) {
        // The caller's traceparent, when valid, makes this request's span a child of the caller's.
        span = tracer.span(`${method} ${served.path}`, Option.fromNullable(fromTraceparent(req.headers[TRACEPARENT]) as Tracer.AnySpan | undefined), Context.empty(), [], clock.unsafeCurrentTimeNanos(), "server")
        span.attribute("http.request.method", method)
        span.attribute("http.route", served.path)
        span.attribute("url.path", path)
        span.attribute("mesh.correlation_id", cid)
      }
      const search = query < 0 ? NO_SEARCH_PARAMS : HttpServerRequest.searchParamsFromURL(new URL(url, "http://l"))
      let effect = (compiled === undefined ? route.handler : compiled.endpoint.program(request, params, search)) as Effect.Effect<unknown, unknown>
      const ended = (exit: Exit.Exit<unknown, unknown>): void => finish(method, path, res, served.stats, t0, cid, request.caller, span, exit)
      // In flight means the handler runs (or its answer is held back): a streamed response (SSE) that outlives it
      // does not hold a slot.
      const respond = (exit: Exit.Exit<unknown, unknown>): void => {
        inFlight--
        if (compiled !== undefined) return respondCompiled(res, cid, compiled.endpoint, exit, ended)
        if (Exit.isSuccess(exit)) writeResponse(res, cid, exit.value, runFork, (cause) => respondFailure(res, cid, cause))
        else respondFailure(res, cid, exit.cause)
        ended(exit)
      }
      // An answer the handler holds back (`holdAnswer`) is written once it lets go.
      const done = (exit: Exit.Exit<unknown, unknown>): void => request.whenReleased(() => respond(exit))
      // An answer known without running anything (a decoding failure, `Effect.succeed`) needs no fiber, nor context.
      if (Exit.isExit(effect)) return done(effect)
      // Made once, when first asked for: by the handler's services, its context, or the fiber's.
      let routeContextValue: unknown
      const routeContext = () => (routeContextValue ??= { [HttpRouter.RouteContextTypeId]: HttpRouter.RouteContextTypeId, params, route })
      if (compiled !== undefined && span === undefined) {
        // As far as the handler needs no fiber it runs here, its services read from the same values a fiber's
        // context would hold; the rest, if any, runs on a fiber below (RunSync.ts).
        const services = compiled.services
        const step = RunSync.run(effect, (key) =>
          key === HttpServerRequest.HttpServerRequest.key
            ? request
            : key === CorrelationId.key
              ? cid
              : key === HttpServerRequest.ParsedSearchParams.key
                ? search
                : key === HttpRouter.RouteContext.key
                  ? routeContext()
                  : services.has(key)
                    ? services.get(key)
                    : RunSync.MISSING
        , () => RunSync.lazyContext(() => requestContext(compiled.base, request, routeContext(), search, cid, undefined)))
        if (Exit.isExit(step)) return done(step)
        effect = step
      }
      const map = requestContext(compiled === undefined ? runtimeBase : compiled.base, request, routeContext(), search, cid, span)
      // A runtime per request (a plain object) seeds the fiber's context directly; `Effect.provide` would add a
      // FiberRef `locally` around the whole handler for the same result.
      const fiber = Runtime.runFork(
        Runtime.make({ context: Context.unsafeMake<never>(map), runtimeFlags: runtime.runtimeFlags, fiberRefs: runtime.fiberRefs }),
        effect
      )
      const exit = fiber.unsafePoll()
      if (exit !== null) return done(exit)
      // Only a handler that went async can outlive its client; only then is the close listener worth its cost.
      const onClose = () => {
        if (!res.writableFinished) runFork(fiber.interruptAsFork(fiber.id()))
      }
      res.once("close", onClose)
      fiber.addObserver((exit) => {
        res.off("close", onClose)
        done(exit)
      })
    }

    // An answer given before the body is read: the body is drained (bounded) so the client can read the answer.
    const refuseEarly = (
      req: Http.IncomingMessage,
      res: Http.ServerResponse,
      status: number,
      tag: string,
      message: string,
      code: string,
      cid: string,
      fields?: object
    ) => {
      drainUnread(req, res, maxDrain)
      sendError(res, status, fields, tag, message, code, cid)
    }

    const preflight = (req: Http.IncomingMessage, res: Http.ServerResponse, origin: string): void => {
      const headers: Http.OutgoingHttpHeaders = {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": CORS_METHODS,
        "access-control-max-age": CORS_MAX_AGE,
        vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        "x-content-type-options": "nosniff",
        "cache-control": "no-store",
        "content-length": "0"
      }
      const asked = req.headers["access-control-request-headers"]
      if (asked !== undefined) headers["access-control-allow-headers"] = asked
      res.writeHead(204, headers)
      res.end()
    }

    return (req: Http.IncomingMessage, res: Http.ServerResponse): void => {
      const t0 = performance.now()
      const cid = fromHeader(req.headers[HEADER], entropy)
      const host = req.headers.host
      const method = req.method ?? "GET"
      const url = req.url ?? "/"
      const query = url.indexOf("?")
      const path = query < 0 ? url : url.slice(0, query)
      if (!guard.hostAllowed(host)) {
        refuseEarly(req, res, 421, "HostNotAllowed", "this server does not answer for the requested host", "HOST_NOT_ALLOWED", cid)
        return finish(method, path, res, unmatched, t0, cid, undefined, undefined, undefined)
      }
      const origin = req.headers.origin
      if (origin !== undefined) {
        const verdict = guard.origin(origin, host)
        if (verdict === "refused") {
          refuseEarly(req, res, 403, "OriginNotAllowed", "cross-origin requests from this origin are not allowed", "ORIGIN_NOT_ALLOWED", cid)
          return finish(method, path, res, unmatched, t0, cid, undefined, undefined, undefined)
        }
        if (method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined) {
          drainUnread(req, res, maxDrain)
          preflight(req, res, origin)
          return finish(method, path, res, unmatched, t0, cid, undefined, undefined, undefined)
        }
        if (verdict === "allowed") {
          res.setHeader("access-control-allow-origin", origin)
          res.setHeader("access-control-expose-headers", "x-correlation-id, retry-after, www-authenticate")
          res.setHeader("vary", "Origin")
        }
      }
      const match = table.find(method, path)
      if (match === undefined) {
        refuseEarly(req, res, 404, "RouteNotFound", `no route for ${method} ${path}`, "ROUTE_NOT_FOUND", cid)
        return finish(method, path, res, unmatched, t0, cid, undefined, undefined, undefined)
      }
      const served = match.route
      // Shed before the body is read and the handler runs: an answer costs little, so the loop frees itself.
      if ((lag() > maxLag || inFlight >= maxInFlight) && !shedExempt.has(path)) {
        refuseEarly(req, res, 503, "Overloaded", OVERLOADED_MESSAGE, "OVERLOADED", cid, OVERLOADED_FIELDS)
        return finish(method, path, res, served.stats, t0, cid, undefined, undefined, undefined)
      }
      if (!BODY_METHODS.has(method)) {
        // A body on GET, HEAD or OPTIONS is ignored, but read and thrown away under the same bound as a refused one:
        // left to node:http it would be read to its end, however long the client keeps sending.
        drainUnread(req, res, maxDrain)
        return dispatch(req, res, cid, served, match.params, url, query, path, EMPTY_BODY, t0)
      }
      readBody(req, maxBody, maxDrain, (result) => {
        switch (result._tag) {
          case "Body":
            return dispatch(req, res, cid, served, match.params, url, query, path, result.bytes, t0)
          case "TooLarge":
            if (result.close) res.setHeader("connection", "close")
            refuse(res, path, 413, "PayloadTooLarge", `request body exceeds ${maxBody} bytes`, "PAYLOAD_TOO_LARGE", cid)
            return finish(method, path, res, served.stats, t0, cid, undefined, undefined, undefined)
          case "Aborted":
            res.destroy()
            return finish(method, path, res, served.stats, t0, cid, undefined, undefined, undefined)
        }
      })
    }
  })

/** Starts a node:http server for `api` on `options.port` (0 for any) and stops it when the scope closes. */
export const make = <Api extends HttpApi.HttpApi.Any, E, R>(
  api: Api,
  handlers: HandlersLayer<Api, E, R>,
  options: Options = {}
): Effect.Effect<Server, E | ServeError, Scope.Scope | Exclude<R | ApiContext<Api>, Provided>> =>
  Effect.gen(function* () {
    // A real socket serves real traffic: keys, API keys and nonces must not be predictable from a seed.
    yield* requireCsprng("Serve.make")
    const handle = yield* listener(api, handlers, options)
    const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT
    // node:http refuses a headers timeout longer than the request timeout.
    const headersTimeout = Math.min(options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT, requestTimeout)
    const checkInterval = Math.max(10, Math.min(1_000, Math.floor(headersTimeout / 4)))
    const server = Http.createServer(
      {
        keepAlive: true,
        requestTimeout,
        headersTimeout,
        keepAliveTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT,
        // node:http checks both timeouts on this interval (30 s by default, which would triple a 10 s limit).
        connectionsCheckingInterval: checkInterval
      },
      handle
    )
    server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS
    const perAddress = options.maxConnectionsPerAddress ?? DEFAULT_MAX_PER_ADDRESS
    const open = new Map<string, number>()
    server.on("connection", (socket: Net.Socket) => {
      // Counted by client key: an IPv6 client by its /64, which one subscriber usually holds whole.
      const address = clientKey(socket.remoteAddress ?? "")
      const n = (open.get(address) ?? 0) + 1
      if (n > perAddress) return void socket.destroy()
      open.set(address, n)
      socket.once("close", () => {
        const left = (open.get(address) ?? 1) - 1
        if (left <= 0) open.delete(address)
        else open.set(address, left)
      })
    })
    const close = closer(server)
    const address = yield* listen(server, options.port ?? 0, options.host ?? "127.0.0.1")
    let probeUrl: string | undefined = undefined
    let probes: Http.Server | undefined = undefined
    if (options.probePort !== undefined) {
      const exempt = new Set(options.shedExemptPaths ?? DEFAULT_SHED_EXEMPT)
      probes = Http.createServer({ keepAlive: true, requestTimeout, headersTimeout, keepAliveTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT, connectionsCheckingInterval: checkInterval }, (req, res) => {
        const url = req.url ?? "/"
        const query = url.indexOf("?")
        if (exempt.has(query < 0 ? url : url.slice(0, query))) return handle(req, res)
        drainUnread(req, res, options.maxDrainBytes ?? DRAIN_FACTOR * (options.maxBodyBytes ?? DEFAULT_MAX_BODY))
        sendError(res, 404, undefined, "RouteNotFound", "this port answers health probes only", "ROUTE_NOT_FOUND", fromHeader(req.headers[HEADER]))
      })
      probes.maxConnections = PROBE_MAX_CONNECTIONS
      probeUrl = urlOf(yield* listen(probes, options.probePort, options.host ?? "127.0.0.1"))
    }
    const servers = probes === undefined ? [server] : [server, probes]
    const drain = drainer(servers, options.shutdownTimeoutMs ?? 0)
    // Runs before the listeners' own release (added after them): a graceful close first, then whatever is left.
    yield* Effect.addFinalizer(() => Effect.zipRight(drain(), Effect.sync(() => servers.forEach((s) => s.closeAllConnections()))))
    return {
      port: address.port,
      url: urlOf(address),
      ...(probeUrl === undefined ? {} : { probeUrl }),
      close: Effect.suspend(() => (server.listening ? close : Effect.void)),
      drain
    }
  })

// Probes are few; the cap keeps the probe port from being a second way in for a flood.
const PROBE_MAX_CONNECTIONS = 64

const urlOf = (address: Net.AddressInfo): string => `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`

// How often a draining server closes the connections that fell idle (a finished response leaves its keep-alive
// connection open, and node closes idle ones only when asked).
const DRAIN_POLL_MS = 25

/**
 * A graceful close of `servers`: stop accepting, then close each connection once it is idle, until none is left and
 * `also` is done, or `timeoutMs` passed. The servers' "close" event says when their last connection ended.
 */
const drainer = (servers: ReadonlyArray<Http.Server>, timeoutMs: number) => {
  let open = servers.length
  for (const s of servers) s.once("close", () => void open--)
  const settled = Effect.gen(function* () {
    while (open > 0) {
      for (const s of servers) s.closeIdleConnections()
      yield* Effect.sleep(Duration.millis(DRAIN_POLL_MS))
    }
  })
  return (also: Effect.Effect<void> = Effect.void): Effect.Effect<void> =>
    Effect.suspend(() => {
      for (const s of servers) if (s.listening) s.close()
      if (timeoutMs <= 0) return Effect.void
      return Effect.all([settled, also], { concurrency: "unbounded", discard: true }).pipe(Effect.timeoutOption(Duration.millis(timeoutMs)), Effect.asVoid)
    })
}

const closer = (server: Http.Server): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    server.close(() => resume(Effect.void))
    server.closeAllConnections()
  })

// Listens until the scope closes.
const listen = (server: Http.Server, port: number, host: string): Effect.Effect<Net.AddressInfo, ServeError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<Net.AddressInfo, ServeError>((resume) => {
      const onError = (cause: unknown) =>
        resume(Effect.fail(new ServeError({ message: `cannot listen on ${host}:${port}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })))
      server.once("error", onError)
      // listen() throws at once on an argument it refuses (a port out of range): a failure like any other, not a defect.
      try {
        server.listen(port, host, () => {
          server.off("error", onError)
          resume(Effect.succeed(server.address() as Net.AddressInfo))
        })
      } catch (cause) {
        server.off("error", onError)
        onError(cause)
      }
    }),
    () => (server.listening ? closer(server) : Effect.void)
  )

/** `make` as a layer: the server runs while the layer is alive. */
export const layer = <Api extends HttpApi.HttpApi.Any, E, R>(
  api: Api,
  handlers: HandlersLayer<Api, E, R>,
  options: Options = {}
): Layer.Layer<never, E | ServeError, Exclude<R | ApiContext<Api>, Provided>> =>
  Layer.scopedDiscard(make(api, handlers, options))
