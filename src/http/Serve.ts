/**
 * Serves an `HttpApi` on node:http through a lean path (docs/architecture.md §6): the handler layer is built once, its
 * routes are taken from HttpApiBuilder's router (so decoding, handlers, group/endpoint middleware and success
 * encoding are HttpApi's own), and each request runs as one fiber on a prebuilt runtime with the body already read
 * natively. No per-request layer, scope, span or web `Request`. Errors go out as `{ _tag, error, code,
 * correlationId }` with the status annotated on the error schema.
 *
 * The serving layer's own errors (`InvalidJson`, `RouteNotFound`, `PayloadTooLarge`, `InternalError` from
 * ErrorBody.ts) go out in the same shape whether or not the api declares them; add them with `api.addError(…)` so
 * that `HttpApiClient` decodes them as typed errors and `OpenApi.fromApi` lists them.
 *
 * Not supported on this path: `HttpApiMiddleware` attached to the whole api (attach it to the groups; `listener`
 * dies at start otherwise), global HttpApp middleware added with `HttpApiBuilder.middleware*` (ignored), multipart
 * bodies, websocket upgrades. Handlers get no per-request `Scope`.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type * as Net from "node:net"
import { CorrelationId, fromHeader, HEADER } from "./CorrelationId.js"
import { errorBody, INVALID_REQUEST } from "./ErrorBody.js"
import { LeanRequest } from "./LeanRequest.js"
import { readBody } from "./ReadBody.js"
import { RouteTable } from "./RouteTable.js"
import { writeResponse } from "./WriteResponse.js"

/** Serving options. */
export interface Options {
  readonly port?: number
  readonly host?: string
  /** Largest accepted request body; larger ones get 413 before anything is parsed. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /**
   * Host names (`name` or `name:port`) accepted in the `Host` header besides the loopback names when listening on
   * loopback, and the listening address; `"*"` accepts any. Guards loopback servers against DNS rebinding.
   */
  readonly allowedHosts?: ReadonlyArray<string>
  /** Origins (`scheme://host[:port]`) whose cross-origin requests are served; others are refused. Default none. */
  readonly allowedOrigins?: ReadonlyArray<string>
}

/** A running server. */
export interface Server {
  readonly port: number
  readonly url: string
  readonly close: Effect.Effect<void>
}

/** A node:http request listener. */
export type Listener = (req: Http.IncomingMessage, res: Http.ServerResponse) => void

/** The server could not listen. */
export class ServeError extends Data.TaggedError("ServeError")<{ readonly message: string; readonly cause?: unknown }> {}

/** The layer implementing every group of `Api`, as `HttpApiBuilder.group` layers merged. */
export type HandlersLayer<Api extends HttpApi.HttpApi.Any, E, R> = Api extends HttpApi.HttpApi<infer Id, infer Groups, infer _E, infer _R>
  ? Layer.Layer<HttpApiGroup.HttpApiGroup.ToService<Id, Groups>, E, R>
  : never

type ApiContext<Api extends HttpApi.HttpApi.Any> = Api extends HttpApi.HttpApi<infer _Id, infer Groups, infer _E, infer R>
  ? R | HttpApiGroup.HttpApiGroup.ErrorContext<Groups>
  : never

// What the server itself provides to the handler layer and to each request.
type Provided = HttpApiBuilder.Router | HttpApiBuilder.Middleware | CorrelationId

type AnyRoute = HttpRouter.Route<unknown, unknown>

interface ErrorEncoder {
  readonly is: (u: unknown) => boolean
  readonly encode: (u: unknown) => Either.Either<unknown, unknown>
  readonly status: number
}

const DEFAULT_MAX_BODY = 1024 * 1024
const EMPTY_BODY = Buffer.alloc(0)
const NO_SEARCH_PARAMS: Readonly<Record<string, string | Array<string>>> = Object.freeze({})
const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"])

const collectErrors = (api: HttpApi.HttpApi.AnyWithProps): Array<ErrorEncoder> => {
  const schemas = new Set<Schema.Schema.Any>()
  HttpApiSchema.deunionize(schemas, api.errorSchema)
  for (const group of Object.values(api.groups)) {
    for (const endpoint of Object.values(group.endpoints)) HttpApiSchema.deunionize(schemas, endpoint.errorSchema)
    HttpApiSchema.deunionize(schemas, group.errorSchema)
  }
  return Array.from(schemas, (schema) => ({
    is: Schema.is(schema),
    encode: Schema.encodeUnknownEither(schema as Schema.Schema<unknown, unknown>),
    status: HttpApiSchema.getStatusErrorAST(schema.ast)
  }))
}

const field = (u: unknown, key: string): string | undefined => {
  if (typeof u !== "object" || u === null || !(key in u)) return undefined
  const v: unknown = (u as Record<string, unknown>)[key]
  return typeof v === "string" ? v : undefined
}

// An error class without a `code` field still needs one on the wire: derive it from the tag (NotFound → NOT_FOUND).
const codeOfTag = (tag: string): string =>
  tag === "HttpApiDecodeError" ? INVALID_REQUEST : tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()

const sendError = (
  res: Http.ServerResponse,
  status: number,
  fields: object | undefined,
  tag: string,
  message: string,
  code: string,
  cid: string
): void => {
  if (res.headersSent || res.destroyed) return
  const body = errorBody(fields, tag, message, code, cid)
  const headers: Http.OutgoingHttpHeaders = { "content-type": "application/json", "content-length": Buffer.byteLength(body), [HEADER]: cid }
  // An error that says when to come back (RATE_LIMITED) says it in the standard header too.
  const retryAfter = fields !== undefined && "retryAfterSeconds" in fields ? (fields as { retryAfterSeconds: unknown }).retryAfterSeconds : undefined
  if (typeof retryAfter === "number" && Number.isFinite(retryAfter)) headers["retry-after"] = String(Math.max(0, Math.ceil(retryAfter)))
  res.writeHead(status, headers)
  res.end(body)
}

/** Deepest nesting of arrays and objects a JSON body may have; deeper bodies would exhaust the stack downstream. */
export const MAX_JSON_DEPTH = 256

/** True when the JSON text nests deeper than `max` (a linear scan that skips strings). */
export const nestsDeeperThan = (text: string, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \\ */) i++
      else if (c === 34 /* " */) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) return true
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--
  }
  return false
}

/**
 * Builds the handler layer in the current scope and returns the node:http listener serving `api`. Use it to
 * mount the API on a server you own, or in tests.
 */
export const listener = <Api extends HttpApi.HttpApi.Any, E, R>(
  api: Api,
  handlers: HandlersLayer<Api, E, R>,
  options: Pick<Options, "maxBodyBytes"> = {}
): Effect.Effect<Listener, E, Scope.Scope | Exclude<R | ApiContext<Api>, Provided>> =>
  Effect.gen(function* () {
    const apiProps = api as unknown as HttpApi.HttpApi.AnyWithProps
    if (apiProps.middlewares.size > 0) {
      return yield* Effect.dieMessage("Serve: api-level middleware is not supported; attach it to the groups")
    }
    const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY
    // HttpApiBuilder.group registers each handler as a route on HttpApiBuilder.Router; building the layers here
    // gives exactly the routes the stock server would run, with the handlers' context already captured.
    const built: Layer.Layer<HttpApi.Api | HttpApiBuilder.Router, E, Exclude<R | ApiContext<Api>, Provided>> = HttpApiBuilder.api(
      apiProps
    ).pipe(
      Layer.provide(handlers as Layer.Layer<never, E, R>),
      Layer.provideMerge(Layer.merge(HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer))
    ) as never
    const context = yield* Layer.build(built)
    const router = yield* Effect.provide(HttpApiBuilder.Router.router, context)
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const baseMap: ReadonlyMap<string, unknown> = runtime.context.unsafeMap

    const table = new RouteTable<AnyRoute>()
    for (const route of router.routes) {
      table.add(route.method, typeof route.path === "string" ? route.path : String(route.path), route as AnyRoute)
    }
    const errors = collectErrors(apiProps)

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
          return sendError(res, enc.status, fields, tag, message, field(encoded.right, "code") ?? codeOfTag(tag), cid)
        }
      } else if (Cause.isInterruptedOnly(cause)) {
        return void res.destroy()
      }
      runFork(Effect.logError("request failed", cause).pipe(Effect.annotateLogs("correlationId", cid)))
      sendError(res, 500, undefined, "InternalError", "internal server error", "INTERNAL_ERROR", cid)
    }

    const dispatch = (
      req: Http.IncomingMessage,
      res: Http.ServerResponse,
      cid: string,
      route: AnyRoute,
      params: Readonly<Record<string, string | undefined>>,
      url: string,
      query: number,
      body: Buffer
    ): void => {
      let parsed: unknown = undefined
      if (body.length > 0) {
        const type = req.headers["content-type"]
        if (type === undefined || type.includes("json")) {
          const text = body.toString("utf8")
          if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
            return sendError(res, 400, undefined, "InvalidJson", `request body nests deeper than ${MAX_JSON_DEPTH} levels`, "INVALID_JSON", cid)
          }
          try {
            parsed = JSON.parse(text)
          } catch {
            return sendError(res, 400, undefined, "InvalidJson", "request body is not valid JSON", "INVALID_JSON", cid)
          }
        }
      }
      const request = new LeanRequest(req, url, body, parsed)
      const map = new Map(baseMap)
      map.set(HttpServerRequest.HttpServerRequest.key, request)
      map.set(HttpRouter.RouteContext.key, { [HttpRouter.RouteContextTypeId]: HttpRouter.RouteContextTypeId, params, route })
      map.set(HttpServerRequest.ParsedSearchParams.key, query < 0 ? NO_SEARCH_PARAMS : HttpServerRequest.searchParamsFromURL(new URL(url, "http://l")))
      map.set(CorrelationId.key, cid)
      // A runtime per request (a plain object) seeds the fiber's context directly; `Effect.provide` would add a
      // FiberRef `locally` around the whole handler for the same result.
      const fiber = Runtime.runFork(
        Runtime.make({ context: Context.unsafeMake<never>(map), runtimeFlags: runtime.runtimeFlags, fiberRefs: runtime.fiberRefs }),
        route.handler as Effect.Effect<unknown, unknown>
      )
      const done = (exit: Exit.Exit<unknown, unknown>): void => {
        if (Exit.isSuccess(exit)) return writeResponse(res, cid, exit.value, runFork, (cause) => respondFailure(res, cid, cause))
        respondFailure(res, cid, exit.cause)
      }
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

    return (req: Http.IncomingMessage, res: Http.ServerResponse): void => {
      const cid = fromHeader(req.headers[HEADER])
      const url = req.url ?? "/"
      const query = url.indexOf("?")
      const path = query < 0 ? url : url.slice(0, query)
      const method = req.method ?? "GET"
      const match = table.find(method, path)
      if (match === undefined) {
        req.resume()
        return sendError(res, 404, undefined, "RouteNotFound", `no route for ${method} ${path}`, "ROUTE_NOT_FOUND", cid)
      }
      if (!BODY_METHODS.has(method)) return dispatch(req, res, cid, match.route, match.params, url, query, EMPTY_BODY)
      readBody(req, maxBody, (result) => {
        switch (result._tag) {
          case "Body":
            return dispatch(req, res, cid, match.route, match.params, url, query, result.bytes)
          case "TooLarge":
            res.setHeader("connection", "close")
            return sendError(res, 413, undefined, "PayloadTooLarge", `request body exceeds ${maxBody} bytes`, "PAYLOAD_TOO_LARGE", cid)
          case "Aborted":
            return void res.destroy()
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
    const handle = yield* listener(api, handlers, options)
    const server = Http.createServer({ keepAlive: true }, handle)
    const close = Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
      server.closeAllConnections()
    })
    const address = yield* Effect.acquireRelease(
      Effect.async<Net.AddressInfo, ServeError>((resume) => {
        const onError = (cause: unknown) => resume(Effect.fail(new ServeError({ message: `cannot listen: ${String(cause)}`, cause })))
        server.once("error", onError)
        server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
          server.off("error", onError)
          resume(Effect.succeed(server.address() as Net.AddressInfo))
        })
      }),
      () => (server.listening ? close : Effect.void)
    )
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address
    return { port: address.port, url: `http://${host}:${address.port}`, close: Effect.suspend(() => (server.listening ? close : Effect.void)) }
  })

/** `make` as a layer: the server runs while the layer is alive. */
export const layer = <Api extends HttpApi.HttpApi.Any, E, R>(
  api: Api,
  handlers: HandlersLayer<Api, E, R>,
  options: Options = {}
): Layer.Layer<never, E | ServeError, Exclude<R | ApiContext<Api>, Provided>> =>
  Layer.scopedDiscard(make(api, handlers, options))
