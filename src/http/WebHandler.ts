/**
 * Serves an `HttpApi` as a fetch handler (`Request` → `Promise<Response>`), for Cloudflare Workers, Vercel Edge and
 * any runtime with the fetch API (docs/runtimes.md). The twin of `Serve.listener`: the handler layer is built once,
 * its routes are HttpApiBuilder's own (decoding, handlers, group and endpoint middleware, success encoding), and
 * each request runs as one fiber with the body already read and checked, so a handler sees what it sees on node:http
 * — the raw body bytes (mesh-sig signs them) and the parsed JSON. Errors go out as `{ _tag, error, code,
 * correlationId }` with the status annotated on the error schema; streamed responses (SSE) as a `ReadableStream`.
 *
 * The same request rules as on node:http, cheapest first (docs/protocol.md, "HTTP serving rules"): Host (421),
 * Origin and CORS preflight (403), route (404), body size (413, a declared `Content-Length` over it refused unread),
 * media type (415), strict JSON (400), requests in flight (503 `OVERLOADED`). What belongs to the process and
 * not to a request is the platform's on these runtimes and is not applied here: connection limits, header and
 * keep-alive timeouts, event-loop lag shedding, graceful drain, the access log and request spans.
 *
 * Floor: http (docs/architecture.md §3). It names no Node API.
 */
import * as Cookies from "@effect/platform/Cookies"
import * as Headers from "@effect/platform/Headers"
import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { CorrelationId, fromHeader, HEADER } from "./CorrelationId.js"
import { errorBody } from "./ErrorBody.js"
import { wasLogged } from "./FailureLog.js"
import * as HostGuard from "./HostGuard.js"
import { RequestMetrics, type RouteStats, ServedMetrics, UNMATCHED } from "./Metrics.js"
import { RouteTable } from "./RouteTable.js"
import type { HandlersLayer, RefusalWriter } from "./Serve.js"
import { type AnyRoute, type ApiContext, BODY_METHODS, codeOfTag, collectErrors, DEFAULT_MAX_BODY, DEFAULT_MAX_IN_FLIGHT, DEFAULT_SHED_EXEMPT, field, isJsonMediaType, loggable, MAX_JSON_DEPTH, nestsDeeperThan, nonJsonRoutes, type Provided } from "./ServeRules.js"
import { WebRequest } from "./WebRequest.js"
import { parseJsonStrict, StrictJsonError } from "../core/internal/json.js"
import { Entropy } from "../core/Entropy.js"

/** A fetch handler: what Workers' `fetch`, Vercel Edge functions and `Deno.serve` call. */
export type Handler = (request: Request) => Promise<Response>

/** The request rules of a web handler. */
export interface Options {
  /** Largest accepted request body; larger ones get 413 before anything is parsed. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /** DNS names accepted in `Host` besides `localhost` and IP literals (`"*"`: any); see `Serve.Options`. */
  readonly allowedHosts?: ReadonlyArray<string>
  /** Origins whose cross-origin requests are served and preflights answered (`"*"`: any). Default none. */
  readonly allowedOrigins?: ReadonlyArray<string>
  /** Requests being handled at once; further ones get 503 OVERLOADED. Default 256. */
  readonly maxInFlight?: number
  /** Paths (exact) never shed. Default `["/health"]`. */
  readonly shedExemptPaths?: ReadonlyArray<string>
  /** Paths whose routes speak a protocol of their own (A2A's JSON-RPC on `/`): their refusals are written by it. */
  readonly refusals?: ReadonlyMap<string, RefusalWriter>
  /** The headers a 401 with this code carries besides its body (its `WWW-Authenticate` challenge); see `Serve.Options`. */
  readonly challenge?: (code: string) => Readonly<Record<string, string>>
  /**
   * The client's address as handlers see it (`remoteAddress`), from what the platform vouches for: on Workers
   * `CF-Connecting-IP`. Default none: a header a client can set is never trusted by default.
   */
  readonly clientAddress?: (request: Request) => string | undefined
  /** Which of the api's routes are served (say, reads only: `(method) => method === "GET"`); others get 404. Default all. */
  readonly routes?: (method: string, path: string) => boolean
}

interface Served {
  readonly route: AnyRoute
  readonly path: string
  readonly json: boolean
  readonly stats: RouteStats
}

const OVERLOADED_MESSAGE = "the server is overloaded; retry later"
const OVERLOADED_FIELDS = { message: OVERLOADED_MESSAGE, retryAfterSeconds: 1 }
const CORS_METHODS = "GET, POST, PUT, PATCH, DELETE"
const CORS_MAX_AGE = "600"
const EMPTY = new Uint8Array(0)
const NO_SEARCH_PARAMS: Readonly<Record<string, string | Array<string>>> = Object.freeze({})
const decoder = new TextDecoder()
// The status a request is counted with when its client went away before an answer.
const CLIENT_CLOSED = 499

/** The headers every answer carries. */
const baseHeaders = (cid: string): globalThis.Headers =>
  new globalThis.Headers({ [HEADER]: cid, "x-content-type-options": "nosniff", "cache-control": "no-store" })

const errorResponse = (
  status: number,
  fields: object | undefined,
  tag: string,
  message: string,
  code: string,
  cid: string,
  extra?: Readonly<Record<string, string>>
): Response => {
  const body = errorBody(fields, tag, message, code, cid)
  const headers = baseHeaders(cid)
  for (const [k, v] of Object.entries(extra ?? {})) headers.set(k, v)
  headers.set("content-type", "application/json")
  const retryAfter = fields !== undefined && "retryAfterSeconds" in fields ? (fields as { retryAfterSeconds: unknown }).retryAfterSeconds : undefined
  if (typeof retryAfter === "number" && Number.isFinite(retryAfter)) headers.set("retry-after", String(Math.max(0, Math.ceil(retryAfter))))
  return new Response(body, { status, headers })
}

type Read = { readonly _tag: "Body"; readonly bytes: Uint8Array } | { readonly _tag: "TooLarge" } | { readonly _tag: "Aborted" }

/** Reads a body up to `max` bytes; a declared length over it is refused unread, a stream past it is cancelled. */
const readBody = async (request: Request, max: number): Promise<Read> => {
  const declared = request.headers.get("content-length")
  if (declared !== null && Number(declared) > max) {
    await request.body?.cancel().catch(() => undefined)
    return { _tag: "TooLarge" }
  }
  if (request.body === null) return { _tag: "Body", bytes: EMPTY }
  const reader = request.body.getReader()
  const chunks: Array<Uint8Array> = []
  let total = 0
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > max) {
        await reader.cancel().catch(() => undefined)
        return { _tag: "TooLarge" }
      }
      chunks.push(value)
    }
  } catch {
    return { _tag: "Aborted" }
  }
  if (chunks.length === 1) return { _tag: "Body", bytes: chunks[0]! }
  const bytes = new Uint8Array(total)
  let at = 0
  for (const c of chunks) {
    bytes.set(c, at)
    at += c.byteLength
  }
  return { _tag: "Body", bytes }
}

/**
 * Builds the handler layer in the current scope and returns the fetch handler serving `api`. The scope closing
 * stops whatever the handlers started (streamed runs included).
 */
export const make = <Api extends HttpApi.HttpApi.Any, E, R>(
  api: Api,
  handlers: HandlersLayer<Api, E, R>,
  options: Options = {}
): Effect.Effect<Handler, E, Scope.Scope | Exclude<R | ApiContext<Api>, Provided>> =>
  Effect.gen(function* () {
    const apiProps = api as unknown as HttpApi.HttpApi.AnyWithProps
    if (apiProps.middlewares.size > 0) {
      return yield* Effect.dieMessage("WebHandler: api-level middleware is not supported; attach it to the groups")
    }
    const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT
    const shedExempt = new Set(options.shedExemptPaths ?? DEFAULT_SHED_EXEMPT)
    const guard = HostGuard.make(options.allowedHosts, options.allowedOrigins)
    let inFlight = 0
    const metrics = new RequestMetrics(() => inFlight)
    const unmatched = metrics.route("*", UNMATCHED)
    // As in `Serve`: building the group layers registers exactly the routes the stock server would run.
    const built: Layer.Layer<HttpApi.Api | HttpApiBuilder.Router, E, Exclude<R | ApiContext<Api>, Provided>> = HttpApiBuilder.api(apiProps).pipe(
      Layer.provide((handlers as Layer.Layer<never, E, R>).pipe(Layer.provide(Layer.succeed(ServedMetrics, metrics)))),
      Layer.provideMerge(Layer.merge(HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer))
    ) as never
    const context = yield* Layer.build(built)
    const router = yield* Effect.provide(HttpApiBuilder.Router.router, context)
    const runtime = yield* Effect.runtime<never>()
    const entropy = yield* Entropy
    const runFork = Runtime.runFork(runtime)
    const baseMap: ReadonlyMap<string, unknown> = runtime.context.unsafeMap
    const table = new RouteTable<Served>()
    const nonJson = nonJsonRoutes(apiProps)
    for (const route of router.routes) {
      const path = typeof route.path === "string" ? route.path : String(route.path)
      if (options.routes !== undefined && !options.routes(route.method, path)) continue
      table.add(route.method, path, { route: route as AnyRoute, path, json: !nonJson.has(`${route.method} ${path}`), stats: metrics.route(route.method, path) })
    }
    const errors = collectErrors(apiProps)
    const refusals = options.refusals ?? new Map<string, RefusalWriter>()

    const counted = (stats: RouteStats, t0: number, response: Response): Response => {
      stats.record(response.status, (performance.now() - t0) / 1000)
      return response
    }

    /** A refusal of a request whose route was found, written in that route's protocol when it has one. */
    const refuse = (path: string, status: number, tag: string, message: string, code: string, cid: string): Response => {
      const writer = refusals.get(path)
      if (writer === undefined) return errorResponse(status, undefined, tag, message, code, cid)
      const written = writer({ status, code, message, correlationId: cid })
      const headers = baseHeaders(cid)
      headers.set("content-type", "application/json")
      return new Response(written.body, { status: written.status, headers })
    }

    const failureResponse = (cid: string, cause: Cause.Cause<unknown>): Response => {
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
          if (enc.status >= 500 && !wasLogged(e)) {
            runFork(Effect.logError(`answered ${enc.status} ${code}: ${message}`).pipe(Effect.annotateLogs("correlationId", cid)))
          }
          return errorResponse(enc.status, fields, tag, message, code, cid, enc.status === 401 ? options.challenge?.(code) : undefined)
        }
      } else if (Cause.isInterruptedOnly(cause)) {
        return new Response(null, { status: CLIENT_CLOSED, headers: baseHeaders(cid) })
      }
      runFork(Effect.logError("request failed", ...loggable(cause)).pipe(Effect.annotateLogs("correlationId", cid)))
      return errorResponse(500, undefined, "InternalError", "internal server error", "INTERNAL_ERROR", cid)
    }

    /** The handler's response as a fetch `Response`; a streamed body becomes a `ReadableStream` run on this runtime. */
    const toResponse = (value: unknown, cid: string): Response => {
      if (!HttpServerResponse.isServerResponse(value)) return failureResponse(cid, Cause.die(new Error("handler returned a non-response")))
      const headers = baseHeaders(cid)
      // The handler's own Cache-Control (SSE says no-cache) wins over the default.
      for (const [name, v] of Object.entries(value.headers)) headers.set(name, v)
      if (!Cookies.isEmpty(value.cookies)) for (const c of Cookies.toSetCookieHeaders(value.cookies)) headers.append("set-cookie", c)
      const body = value.body
      const init = { status: value.status, headers }
      switch (body._tag) {
        case "Empty":
          return new Response(null, init)
        case "Uint8Array":
          if (!headers.has("content-type")) headers.set("content-type", body.contentType)
          return new Response(body.body as BodyInit, init)
        case "Raw":
          if (body.contentType !== undefined && !headers.has("content-type")) headers.set("content-type", body.contentType)
          return new Response(body.body as BodyInit, init)
        case "Stream":
          if (!headers.has("content-type")) headers.set("content-type", body.contentType)
          // Cancelling the ReadableStream (the client went away) interrupts the stream's fiber.
          return new Response(Stream.toReadableStreamRuntime(body.stream, runtime), init)
        case "FormData":
          return new Response(body.formData, init)
      }
    }

    const dispatch = (
      request: Request,
      cid: string,
      served: Served,
      params: Readonly<Record<string, string | undefined>>,
      url: URL,
      body: Uint8Array,
      t0: number
    ): Response | Promise<Response> => {
      const method = request.method
      const path = url.pathname
      let parsed: unknown = undefined
      let headers = Headers.fromInput(request.headers as unknown as Iterable<readonly [string, string]>)
      if (body.length > 0 && served.json) {
        const type = headers["content-type"]
        if (type !== undefined && !isJsonMediaType(type)) {
          return counted(served.stats, t0, refuse(path, 415, "UnsupportedMediaType", "request body must be application/json", "UNSUPPORTED_MEDIA_TYPE", cid))
        }
        // HttpApi reads a body as JSON only when its type contains "application/json"; `+json` types are JSON too.
        if (type !== undefined && !type.toLowerCase().includes("application/json")) headers = Headers.set(headers, "content-type", "application/json")
        const text = decoder.decode(body)
        if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
          return counted(served.stats, t0, refuse(path, 400, "InvalidJson", `request body nests deeper than ${MAX_JSON_DEPTH} levels`, "INVALID_JSON", cid))
        }
        try {
          parsed = parseJsonStrict(text)
        } catch (e) {
          const message = e instanceof StrictJsonError && e.reason !== "syntax" ? `request body is not accepted JSON: ${e.message}` : "request body is not valid JSON"
          return counted(served.stats, t0, refuse(path, 400, "InvalidJson", message, "INVALID_JSON", cid))
        }
      }
      if (inFlight >= maxInFlight && !shedExempt.has(path)) {
        return counted(served.stats, t0, errorResponse(503, OVERLOADED_FIELDS, "Overloaded", OVERLOADED_MESSAGE, "OVERLOADED", cid))
      }
      inFlight++
      const address = options.clientAddress?.(request)
      const req = new WebRequest(request, method as HttpMethod, path + url.search, headers, body, parsed, address)
      const map = new Map(baseMap)
      map.set(HttpServerRequest.HttpServerRequest.key, req)
      map.set(HttpRouter.RouteContext.key, { [HttpRouter.RouteContextTypeId]: HttpRouter.RouteContextTypeId, params, route: served.route })
      map.set(HttpServerRequest.ParsedSearchParams.key, url.search === "" ? NO_SEARCH_PARAMS : HttpServerRequest.searchParamsFromURL(url))
      map.set(CorrelationId.key, cid)
      const fiber = Runtime.runFork(
        Runtime.make({ context: Context.unsafeMake<never>(map), runtimeFlags: runtime.runtimeFlags, fiberRefs: runtime.fiberRefs }),
        served.route.handler as Effect.Effect<unknown, unknown>
      )
      let aborted = false
      const done = (exit: Exit.Exit<unknown, unknown>): Response => {
        inFlight--
        const response = aborted ? new Response(null, { status: CLIENT_CLOSED }) : Exit.isSuccess(exit) ? toResponse(exit.value, cid) : failureResponse(cid, exit.cause)
        return counted(served.stats, t0, response)
      }
      const exit = fiber.unsafePoll()
      if (exit !== null) return done(exit)
      const signal = request.signal as AbortSignal | undefined
      const onAbort = () => {
        aborted = true
        runFork(fiber.interruptAsFork(fiber.id()))
      }
      signal?.addEventListener("abort", onAbort)
      return new Promise<Response>((resolve) =>
        fiber.addObserver((exit) => {
          signal?.removeEventListener("abort", onAbort)
          resolve(done(exit))
        })
      )
    }

    const preflight = (request: Request, origin: string, cid: string): Response => {
      const headers = baseHeaders(cid)
      headers.set("access-control-allow-origin", origin)
      headers.set("access-control-allow-methods", CORS_METHODS)
      headers.set("access-control-max-age", CORS_MAX_AGE)
      headers.set("vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
      const asked = request.headers.get("access-control-request-headers")
      if (asked !== null) headers.set("access-control-allow-headers", asked)
      return new Response(null, { status: 204, headers })
    }

    const withCors = (response: Response, origin: string): Response => {
      response.headers.set("access-control-allow-origin", origin)
      response.headers.set("access-control-expose-headers", "x-correlation-id, retry-after, www-authenticate")
      response.headers.set("vary", "Origin")
      return response
    }

    const serve = async (request: Request): Promise<Response> => {
      const t0 = performance.now()
      const cid = fromHeader(request.headers.get(HEADER) ?? undefined, entropy)
      const url = new URL(request.url)
      const method = request.method
      const path = url.pathname
      const host = request.headers.get("host") ?? url.host
      if (!guard.hostAllowed(host)) {
        return counted(unmatched, t0, errorResponse(421, undefined, "HostNotAllowed", "this server does not answer for the requested host", "HOST_NOT_ALLOWED", cid))
      }
      const origin = request.headers.get("origin")
      let corsOrigin: string | undefined = undefined
      if (origin !== null) {
        const verdict = guard.origin(origin, host)
        if (verdict === "refused") {
          return counted(unmatched, t0, errorResponse(403, undefined, "OriginNotAllowed", "cross-origin requests from this origin are not allowed", "ORIGIN_NOT_ALLOWED", cid))
        }
        if (method === "OPTIONS" && request.headers.get("access-control-request-method") !== null) return counted(unmatched, t0, preflight(request, origin, cid))
        if (verdict === "allowed") corsOrigin = origin
      }
      const cors = (response: Response): Response => (corsOrigin === undefined ? response : withCors(response, corsOrigin))
      const match = table.find(method, path)
      if (match === undefined) {
        return cors(counted(unmatched, t0, errorResponse(404, undefined, "RouteNotFound", `no route for ${method} ${path}`, "ROUTE_NOT_FOUND", cid)))
      }
      const served = match.route
      if (inFlight >= maxInFlight && !shedExempt.has(path)) {
        return cors(counted(served.stats, t0, errorResponse(503, OVERLOADED_FIELDS, "Overloaded", OVERLOADED_MESSAGE, "OVERLOADED", cid)))
      }
      if (!BODY_METHODS.has(method)) return cors(await dispatch(request, cid, served, match.params, url, EMPTY, t0))
      const read = await readBody(request, maxBody)
      switch (read._tag) {
        case "Body":
          return cors(await dispatch(request, cid, served, match.params, url, read.bytes, t0))
        case "TooLarge":
          return cors(counted(served.stats, t0, refuse(path, 413, "PayloadTooLarge", `request body exceeds ${maxBody} bytes`, "PAYLOAD_TOO_LARGE", cid)))
        case "Aborted":
          return counted(served.stats, t0, new Response(null, { status: 400, headers: baseHeaders(cid) }))
      }
    }
    return serve
  })

/** A fetch handler and the release of what it holds. */
export interface WebApp {
  readonly handler: Handler
  /** Stops what the handlers started (streamed runs) and releases the handler's layers. */
  readonly dispose: () => Promise<void>
}

/**
 * A fetch handler built on its first request from `build` (so a Worker builds it from its first request's
 * bindings, once per isolate). A build that fails answers 500 INTERNAL_ERROR, logged, and is tried again on the
 * next request.
 */
export const lazy = <E>(build: (request: Request) => Effect.Effect<Handler, E, Scope.Scope>): WebApp => {
  let scope: Scope.CloseableScope | undefined = undefined
  let ready: Promise<Handler> | undefined = undefined
  const start = (request: Request): Promise<Handler> => {
    const s = Effect.runSync(Scope.make())
    scope = s
    return Effect.runPromise(Effect.either(Scope.extend(build(request), s))).then((result) => {
      if (Either.isRight(result)) return result.right
      ready = undefined
      void Effect.runPromise(Effect.zipRight(Effect.logError("the web handler could not start", result.left), Scope.close(s, Exit.void)))
      throw result.left
    })
  }
  const handler: Handler = (request) =>
    (ready ??= start(request)).then(
      (serve) => serve(request),
      () => errorResponse(500, undefined, "InternalError", "internal server error", "INTERNAL_ERROR", fromHeader(request.headers.get(HEADER) ?? undefined))
    )
  const dispose = async (): Promise<void> => {
    const s = scope
    scope = undefined
    ready = undefined
    if (s !== undefined) await Effect.runPromise(Scope.close(s, Exit.void))
  }
  return { handler, dispose }
}
