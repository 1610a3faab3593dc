/**
 * The request rules of the serving path that name no Node API, shared by the web handler (`WebHandler`): which error
 * classes an api may answer with and their statuses, the code of an error class without one, which routes take JSON,
 * the JSON depth bound and media types, and what of a failure may be logged. `Serve` applies the same rules on
 * node:http (docs/architecture.md §6).
 *
 * Floor: http (docs/architecture.md §3).
 */
import type * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Cause from "effect/Cause"
import type * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { CorrelationId } from "./CorrelationId.js"
import { INVALID_REQUEST } from "./ErrorBody.js"
import type { ServedMetrics } from "./Metrics.js"

/** What a handler layer of `Api` needs besides what the server provides. */
export type ApiContext<Api extends HttpApi.HttpApi.Any> = Api extends HttpApi.HttpApi<infer _Id, infer Groups, infer _E, infer R>
  ? R | HttpApiGroup.HttpApiGroup.ErrorContext<Groups>
  : never

/** What the server itself provides to the handler layer and to each request. */
export type Provided = HttpApiBuilder.Router | HttpApiBuilder.Middleware | CorrelationId | ServedMetrics

/** A route of HttpApiBuilder's router, whatever it needs. */
export type AnyRoute = HttpRouter.Route<unknown, unknown>

/** Largest request body accepted unless configured: 1 MiB. */
export const DEFAULT_MAX_BODY = 1024 * 1024
/** Handlers running at once before requests are shed with 503. */
export const DEFAULT_MAX_IN_FLIGHT = 256
/** Paths served even while shedding. */
export const DEFAULT_SHED_EXEMPT: ReadonlyArray<string> = ["/health"]
/** Methods whose request may carry a body. */
export const BODY_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** How one error class of an api is recognised, encoded and answered. */
export interface ErrorEncoder {
  readonly is: (u: unknown) => boolean
  readonly encode: (u: unknown) => Either.Either<unknown, unknown>
  readonly status: number
}

/** Every error class an api (its groups and endpoints) may answer with. */
export const collectErrors = (api: HttpApi.HttpApi.AnyWithProps): Array<ErrorEncoder> => {
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

/** A string field of an unknown value. */
export const field = (u: unknown, key: string): string | undefined => {
  if (typeof u !== "object" || u === null || !(key in u)) return undefined
  const v: unknown = (u as Record<string, unknown>)[key]
  return typeof v === "string" ? v : undefined
}

/** The code of an error class without a `code` field, derived from its tag (NotFound → NOT_FOUND). */
export const codeOfTag = (tag: string): string =>
  tag === "HttpApiDecodeError" ? INVALID_REQUEST : tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()

// A schema error's message quotes the offending value ("actual \"sk-…\""), which came from the request body and may
// be a secret; logs get the error's kind and the paths of its issues only.
const summarize = (u: unknown): string | undefined => {
  if (ParseResult.isParseError(u)) {
    const paths = ParseResult.ArrayFormatter.formatErrorSync(u).map((issue) => `${issue._tag} at [${issue.path.join(".")}]`)
    return `ParseError: ${paths.join(", ")}`
  }
  const tag = field(u, "_tag")
  if (tag === "HttpApiDecodeError" && typeof u === "object" && u !== null && "issues" in u && Array.isArray(u.issues)) {
    const issues = u.issues as ReadonlyArray<{ readonly _tag?: unknown; readonly path?: ReadonlyArray<unknown> }>
    return `HttpApiDecodeError: ${issues.map((i) => `${String(i._tag)} at [${(i.path ?? []).join(".")}]`).join(", ")}`
  }
  return undefined
}

/**
 * What to log of a failed request's cause without logging request data: typed failures by tag and code only (their
 * fields may echo the request), schema errors by issue paths, other defects in full (their stacks are the point).
 */
export const loggable = (cause: Cause.Cause<unknown>): Array<unknown> => {
  const out: Array<unknown> = []
  for (const e of Cause.failures(cause)) {
    const tag = field(e, "_tag")
    out.push(summarize(e) ?? `failure ${tag ?? typeof e}${field(e, "code") === undefined ? "" : ` (${field(e, "code")})`}`)
  }
  let defects: Cause.Cause<never> = Cause.empty
  for (const d of Cause.defects(cause)) {
    const summary = summarize(d)
    if (summary === undefined) defects = Cause.parallel(defects, Cause.die(d))
    else out.push(`defect ${summary}`)
  }
  if (!Cause.isEmpty(defects)) out.push(defects)
  return out
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

/** True for `application/json` and `application/*+json`, any case, with or without parameters (RFC 9110 §8.3.1). */
export const isJsonMediaType = (type: string): boolean => {
  if (type === "application/json") return true
  const semi = type.indexOf(";")
  const t = (semi < 0 ? type : type.slice(0, semi)).trim().toLowerCase()
  return t === "application/json" || (t.startsWith("application/") && t.endsWith("+json"))
}

/** Routes (`METHOD path`) whose payload is not JSON (text, bytes, url params, multipart): they skip the JSON checks. */
export const nonJsonRoutes = (api: HttpApi.HttpApi.AnyWithProps): Set<string> => {
  const out = new Set<string>()
  for (const group of Object.values(api.groups)) {
    for (const endpoint of Object.values(group.endpoints)) {
      if (endpoint.payloadSchema._tag === "None") continue
      const members = new Set<Schema.Schema.Any>()
      HttpApiSchema.deunionize(members, endpoint.payloadSchema.value as Schema.Schema.Any)
      for (const m of members) {
        if (HttpApiSchema.getMultipart(m.ast) !== undefined || HttpApiSchema.getMultipartStream(m.ast) !== undefined || HttpApiSchema.getEncoding(m.ast).kind !== "Json") {
          out.add(`${endpoint.method} ${endpoint.path}`)
        }
      }
    }
  }
  return out
}
