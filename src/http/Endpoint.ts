/**
 * One HttpApi endpoint compiled at start for the lean server (docs/architecture.md §6): what HttpApiBuilder's route
 * effect does per request (decode the path, payload, headers and url params; run the group and endpoint middleware;
 * call the handler; encode the success), with every schema compiled once and run synchronously where it can be
 * (`ParseResult` parsers answer an `Either` unless a schema is asynchronous), and the success written as JSON text
 * without building an `HttpServerResponse` first.
 *
 * It keeps HttpApiBuilder's semantics, which the agreement tests compare route by route
 * (test/http/CompiledAgreement.test.ts): decoding in the same order, the first failure winning; middleware run
 * before decoding, in the same nesting; a `ParseError` of decoding, of the handler or of encoding answered as
 * `HttpApiDecodeError`; a success encoded through the union of the endpoint's success schemas, so the member (and
 * status) chosen is the one HttpApiBuilder would choose.
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import type * as AST from "effect/SchemaAST"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as RunSync from "./RunSync.js"
import type { HandlerItem } from "./ApiGroup.js"
import type { LeanRequest } from "./LeanRequest.js"

type AnyEffect = Effect.Effect<unknown, unknown, unknown>
type Params = Readonly<Record<string, string | undefined>>
type SearchParams = Readonly<Record<string, string | Array<string>>>

/** A success ready for the wire: JSON text with its status and type, or a response HttpApi would have built. */
export type Written =
  | { readonly _tag: "Json"; readonly status: number; readonly contentType: string; readonly body: string }
  | { readonly _tag: "Response"; readonly response: HttpServerResponse.HttpServerResponse }

/** An endpoint compiled once. */
export interface CompiledEndpoint {
  /**
   * The effect answering one request, whose services (the request, route context, search params) are also in the
   * fiber's context. Often an `Exit` already (decoding failed, or the handler answered `Effect.succeed`).
   */
  readonly program: (request: LeanRequest, params: Params, search: SearchParams) => AnyEffect
  /** Whether `program`'s failures still need `ParseError` turned into `HttpApiDecodeError` (no middleware ran). */
  readonly refailParseErrors: boolean
  /** Services the endpoint's constant middleware provides, added to its context once. */
  readonly provided: ReadonlyMap<string, unknown>
  /** The handler's success for the wire: written, or a failure (an encoding `ParseError`, as `HttpApiDecodeError`). */
  readonly encode: (value: unknown) => Either.Either<Written, Cause.Cause<unknown>> | Effect.Effect<Written, unknown>
}

// A success as its schema encoded it, before it is written: what HttpApiBuilder turns into a response.
class Encoded {
  constructor(readonly status: number, readonly encoding: HttpApiSchema.Encoding, readonly empty: boolean, readonly data: unknown, readonly ast: AST.AST) {}
}

const encodedSchema = Schema.declare((u): u is Encoded => u instanceof Encoded)

const decodeForbidden = (_: unknown, __: AST.ParseOptions, ast: AST.Transformation) => ParseResult.fail(new ParseResult.Forbidden(ast, _, "Encode only schema"))

/** The union HttpApiBuilder encodes a success through, each member ending in an `Encoded` instead of a response. */
const successSchema = (schema: Schema.Schema.Any): Schema.Schema<unknown, Encoded> => {
  const members = new Set<Schema.Schema.Any>()
  HttpApiSchema.deunionize(members, schema)
  return Schema.Union(
    ...Array.from(members, (member) => {
      const status = HttpApiSchema.getStatusSuccessAST(member.ast)
      const empty = HttpApiSchema.isVoid(member.ast)
      const encoding = HttpApiSchema.getEncoding(member.ast)
      return Schema.transformOrFail(encodedSchema, member as Schema.Schema<unknown, unknown>, {
        decode: decodeForbidden,
        encode: (data, _, ast) => ParseResult.succeed(new Encoded(status, encoding, empty, data, ast))
      })
    })
  ) as never
}

const toResponse = (e: Encoded): HttpServerResponse.HttpServerResponse => {
  if (e.empty) return HttpServerResponse.empty({ status: e.status })
  const options = { status: e.status, contentType: e.encoding.contentType }
  switch (e.encoding.kind) {
    case "Text":
      return HttpServerResponse.text(e.data as string, options)
    case "Uint8Array":
      return HttpServerResponse.uint8Array(e.data as Uint8Array, options)
    case "UrlParams":
      return HttpServerResponse.urlParams(e.data as UrlParams.Input, options)
    case "Json":
      return HttpServerResponse.unsafeJson(e.data, options)
  }
}

/** `HttpApiDecodeError.refailParseError`, run now (it is synchronous): the failure HttpApiBuilder answers with. */
const refail = (error: ParseResult.ParseError): Cause.Cause<unknown> => {
  const exit = Effect.runSyncExit(HttpApiDecodeError.refailParseError(error))
  return exit._tag === "Failure" ? exit.cause : Cause.die(new Error("refailParseError succeeded"))
}

/** A failure cause with `ParseError` answered as HttpApiBuilder answers it (its route catches them); others as they are. */
export const refailCause = (cause: Cause.Cause<unknown>): Cause.Cause<unknown> => {
  const failure = Cause.failureOrCause(cause)
  return failure._tag === "Left" && ParseResult.isParseError(failure.left) ? refail(failure.left) : cause
}

// HttpApiBuilder's own url-parameter normalisation (internal there): a key expected to be an array gets one.
const isSingleStringType = (ast: AST.AST, key?: PropertyKey): boolean => {
  switch (ast._tag) {
    case "StringKeyword":
    case "Literal":
    case "TemplateLiteral":
    case "Enums":
      return true
    case "TypeLiteral": {
      if (key !== undefined) {
        const ps = ast.propertySignatures.find((p) => p.name === key)
        return ps !== undefined
          ? isSingleStringType(ps.type, key)
          : ast.indexSignatures.some((is) => Schema.is(Schema.make(is.parameter))(key) && isSingleStringType(is.type))
      }
      return false
    }
    case "Union":
      return ast.types.some((type) => isSingleStringType(type, key))
    case "Suspend":
      return isSingleStringType(ast.f(), key)
    case "Refinement":
    case "Transformation":
      return isSingleStringType(ast.from, key)
  }
  return false
}

const normalizeUrlParams = (params: SearchParams, ast: AST.AST): SearchParams => {
  const out: Record<string, string | Array<string>> = {}
  for (const key in params) {
    const value = params[key]!
    out[key] = Array.isArray(value) || isSingleStringType(ast, key) ? value : [value]
  }
  return out
}

const hasBody = (method: string): boolean => method !== "GET" && method !== "HEAD" && method !== "OPTIONS"

/** HttpApiBuilder's `requestPayload` over a body already read (multipart endpoints are not compiled). */
const payloadOf = (request: LeanRequest, search: SearchParams): unknown => {
  if (!hasBody(request.method)) return search
  const type = request.headers["content-type"]
  const contentType = type ? type.toLowerCase().trim() : "application/json"
  if (contentType.includes("application/json")) return request.parsedJson
  if (contentType.includes("x-www-form-urlencoded")) return UrlParams.toRecord(UrlParams.fromInput(new URLSearchParams(request.body.toString("utf8"))))
  if (contentType.startsWith("text/")) return request.body.toString("utf8")
  return new Uint8Array(request.body)
}

type Parser = (u: unknown) => Effect.Effect<unknown, ParseResult.ParseIssue>

// A decoding step: which field of the handler's request it fills, from what, with which compiled parser.
interface Step {
  readonly key: string
  readonly input: (request: LeanRequest, params: Params, search: SearchParams) => unknown
  readonly parse: Parser
}

const toParseError = (issue: ParseResult.ParseIssue) => ParseResult.parseError(issue)

/** The effect as the `Either` it is when a parser ran synchronously (an `Either` is an `Effect`), else undefined. */
const syncResult = <A, E>(effect: Effect.Effect<A, E>): Either.Either<A, E> | undefined =>
  Either.isEither(effect) ? (effect as unknown as Either.Either<A, E>) : undefined

/** Runs the steps from `i` on: an Either while every parser answers one, an Effect from the first that does not. */
const decodeFrom = (
  steps: ReadonlyArray<Step>,
  i: number,
  out: Record<string, unknown>,
  request: LeanRequest,
  params: Params,
  search: SearchParams
): Either.Either<Record<string, unknown>, ParseResult.ParseError> | Effect.Effect<Record<string, unknown>, ParseResult.ParseError> => {
  for (; i < steps.length; i++) {
    const step = steps[i]!
    const result = step.parse(step.input(request, params, search))
    const sync = syncResult(result)
    if (sync !== undefined) {
      if (Either.isLeft(sync)) return Either.left(toParseError(sync.left))
      out[step.key] = sync.right
      continue
    }
    const next = i + 1
    return Effect.flatMap(Effect.mapError(result, toParseError), (value) => {
      out[step.key] = value
      const rest = decodeFrom(steps, next, out, request, params, search)
      return rest
    })
  }
  return Either.right(out)
}

type MiddlewareEntry = { readonly tag: HttpApiMiddleware.TagClassAny; readonly effect: unknown }

// HttpApiBuilder's security middleware: each scheme decoded from the request, the first that succeeds wins.
const securityMiddleware = (entry: MiddlewareEntry): AnyEffect => {
  const tag = entry.tag as HttpApiMiddleware.TagClassSecurityAny
  const handlers = entry.effect as Record<string, (credential: unknown) => AnyEffect>
  let effect: AnyEffect | undefined = undefined
  for (const [key, security] of Object.entries(tag.security)) {
    const middleware = Effect.flatMap(HttpApiBuilder.securityDecode(security), handlers[key]!)
    effect = effect === undefined ? middleware : Effect.catchAll(effect, () => middleware)
  }
  return effect ?? Effect.void
}

// HttpApiBuilder's applyMiddleware: the first entry is the innermost; optional middleware lets failures through.
const applyMiddleware = (middleware: ReadonlyArray<MiddlewareEntry>, handler: AnyEffect): AnyEffect => {
  for (const entry of middleware) {
    const effect = HttpApiMiddleware.SecurityTypeId in entry.tag ? securityMiddleware(entry) : (entry.effect as AnyEffect)
    const provides = entry.tag.provides as Context.Tag<unknown, unknown> | undefined
    if (entry.tag.optional) {
      const previous = handler
      handler = Effect.matchEffect(effect, {
        onFailure: () => previous,
        onSuccess: provides !== undefined ? (value) => RunSync.provideService(previous, provides, value) : () => previous
      })
    } else {
      // As `Effect.provideServiceEffect`, in a form `RunSync` runs without a fiber.
      const inner = handler
      handler = provides !== undefined ? Effect.flatMap(effect, (value) => RunSync.provideService(inner, provides, value)) : Effect.zipRight(effect, handler)
    }
  }
  return handler
}

/** Whether the lean server compiles this endpoint; a multipart payload keeps HttpApiBuilder's route. */
export const compilable = (item: HandlerItem): boolean => {
  const payload = item.endpoint.payloadSchema
  if (payload._tag === "None" || item.withFullRequest) return true
  const members = new Set<Schema.Schema.Any>()
  HttpApiSchema.deunionize(members, payload.value as Schema.Schema.Any)
  for (const m of members) if (HttpApiSchema.getMultipart(m.ast) !== undefined || HttpApiSchema.getMultipartStream(m.ast) !== undefined) return false
  return true
}

/** Compiles `item` of a group built in `context`; `compilable(item)` must hold. */
export const compile = (item: HandlerItem, context: Context.Context<never>, groupMiddlewares: ReadonlySet<HttpApiMiddleware.TagClassAny>): CompiledEndpoint => {
  const endpoint = item.endpoint
  const steps: Array<Step> = []
  if (endpoint.pathSchema._tag === "Some") {
    steps.push({ key: "path", input: (_, params) => params, parse: ParseResult.decodeUnknown(endpoint.pathSchema.value as Schema.Schema<unknown, unknown>) })
  }
  if (endpoint.payloadSchema._tag === "Some" && !item.withFullRequest) {
    steps.push({ key: "payload", input: (request, _, search) => payloadOf(request, search), parse: ParseResult.decodeUnknown(endpoint.payloadSchema.value as Schema.Schema<unknown, unknown>) })
  }
  if (endpoint.headersSchema._tag === "Some") {
    steps.push({ key: "headers", input: (request) => request.headers, parse: ParseResult.decodeUnknown(endpoint.headersSchema.value as Schema.Schema<unknown, unknown>) })
  }
  if (endpoint.urlParamsSchema._tag === "Some") {
    const schema = endpoint.urlParamsSchema.value as Schema.Schema<unknown, unknown>
    steps.push({ key: "urlParams", input: (_, __, search) => normalizeUrlParams(search, schema.ast), parse: ParseResult.decodeUnknown(schema) })
  }
  const handler = item.handler
  const uninterruptible = item.uninterruptible
  const run = (request: LeanRequest, params: Params, search: SearchParams): AnyEffect => {
    const decoded = decodeFrom(steps, 0, { request }, request, params, search)
    if (Either.isEither(decoded)) {
      if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
      return uninterruptible ? Effect.uninterruptible(handler(decoded.right)) : handler(decoded.right)
    }
    const effect = Effect.flatMap(decoded, handler)
    return uninterruptible ? Effect.uninterruptible(effect) : effect
  }

  // Group middleware first, then the endpoint's, as HttpApiBuilder's middleware map orders them.
  const middleware: Array<MiddlewareEntry> = []
  const seen = new Set<string>()
  for (const tag of [...groupMiddlewares, ...endpoint.middlewares]) {
    if (seen.has(tag.key)) continue
    seen.add(tag.key)
    middleware.push({ tag, effect: Context.unsafeGet(context, tag as unknown as Context.Tag<unknown, unknown>) })
  }
  // Middleware whose effect is a success known at start (an agent's `auth: "none"` is `Effect.succeed(anonymous)`)
  // can neither fail nor observe the request: what it provides goes into the context once, and it is not run. Not
  // when another middleware provides the same service, whose nesting would then decide which value wins.
  const provided = new Map<string, unknown>()
  const providers = new Map<string, number>()
  for (const entry of middleware) {
    const tag = entry.tag.provides as Context.Tag<unknown, unknown> | undefined
    if (tag !== undefined) providers.set(tag.key, (providers.get(tag.key) ?? 0) + 1)
  }
  const dynamic = middleware.filter((entry) => {
    if (HttpApiMiddleware.SecurityTypeId in entry.tag || !Exit.isExit(entry.effect) || !Exit.isSuccess(entry.effect)) return true
    const tag = entry.tag.provides as Context.Tag<unknown, unknown> | undefined
    if (tag === undefined) return false
    if (providers.get(tag.key) !== 1) return true
    provided.set(tag.key, entry.effect.value)
    return false
  })
  let program: CompiledEndpoint["program"] = run
  if (dynamic.length > 0) {
    // With middleware the whole route is one effect, built once. It reads the request, route and search parameters
    // as services rather than from the fiber (as HttpApiBuilder's route does), so that a request whose middleware
    // needs no fiber runs without one.
    const inner = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.flatMap(HttpRouter.RouteContext, (route) =>
        Effect.flatMap(HttpServerRequest.ParsedSearchParams, (search) => run(request as LeanRequest, route.params, search))
      )
    ).pipe(Effect.catchIf(ParseResult.isParseError, HttpApiDecodeError.refailParseError))
    const whole = applyMiddleware(dynamic, inner)
    program = () => whole
  }

  const encodeSuccess = ParseResult.encodeUnknown(successSchema(endpoint.successSchema as Schema.Schema.Any))
  const written = (e: Encoded): Either.Either<Written, Cause.Cause<unknown>> => {
    if (e.empty || e.encoding.kind !== "Json") return Either.right({ _tag: "Response", response: toResponse(e) })
    let body: string | undefined
    try {
      body = JSON.stringify(e.data)
    } catch (error) {
      return Either.left(refail(ParseResult.parseError(new ParseResult.Type(e.ast, error, "Could not encode to JSON"))))
    }
    return Either.right({ _tag: "Json", status: e.status, contentType: e.encoding.contentType, body: body ?? "" })
  }
  const encode: CompiledEndpoint["encode"] = (value) => {
    if (HttpServerResponse.isServerResponse(value)) return Either.right({ _tag: "Response", response: value })
    const result = encodeSuccess(value) as Effect.Effect<Encoded, ParseResult.ParseIssue>
    const sync = syncResult(result)
    if (sync !== undefined) return Either.isLeft(sync) ? Either.left(refail(toParseError(sync.left))) : written(sync.right)
    return Effect.flatMap(Effect.catchAll(result, (issue) => Effect.failCause(refail(toParseError(issue)))), (e) => {
      const w = written(e)
      return Either.isLeft(w) ? Effect.failCause(w.left) : Effect.succeed(w.right)
    })
  }

  return { program, refailParseErrors: dynamic.length === 0, encode, provided }
}
