/**
 * The one error shape on the wire, `{ _tag, error, code, correlationId }` (docs/architecture.md §4), and the errors the
 * serving layer itself raises before or around a handler.
 *
 * An error class declares only its own fields; the serving layer adds `error`, `correlationId` and (for classes
 * without one, such as HttpApi's decode error) `code`, and its own refusals carry nothing else. `wireErrors` writes
 * the same into an OpenAPI document, so that a client generated from it accepts the bodies it will receive.
 *
 * Floor: http (docs/architecture.md §3).
 */
import type * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import type * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { isRecord } from "../core/internal/record.js"

/** The fields every error body has; an error's own encoded fields sit beside them. */
export interface ErrorBody {
  readonly _tag: string
  readonly error: string
  readonly code: string
  readonly correlationId: string
  readonly [key: string]: unknown
}

/** The request body is not valid JSON. */
export class InvalidJson extends Schema.TaggedError<InvalidJson>()(
  "InvalidJson",
  { code: Schema.Literal("INVALID_JSON"), message: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** No endpoint matches the method and path. */
export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()(
  "RouteNotFound",
  { code: Schema.Literal("ROUTE_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** The request body exceeds the server's limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { code: Schema.Literal("PAYLOAD_TOO_LARGE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 413 })
) {}

/** A request body whose media type is not JSON was sent to a JSON endpoint. */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  { code: Schema.Literal("UNSUPPORTED_MEDIA_TYPE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 415 })
) {}

/** The server is overloaded (event loop lagging, or requests in flight at the cap); come back after `retryAfterSeconds` (also `Retry-After`). */
export class Overloaded extends Schema.TaggedError<Overloaded>()(
  "Overloaded",
  { code: Schema.Literal("OVERLOADED"), message: Schema.String, retryAfterSeconds: Schema.Number },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** The `Host` header names a host this server does not answer for (DNS rebinding guard). */
export class HostNotAllowed extends Schema.TaggedError<HostNotAllowed>()(
  "HostNotAllowed",
  { code: Schema.Literal("HOST_NOT_ALLOWED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 421 })
) {}

/** A cross-origin request (or preflight) from an origin the server does not allow. */
export class OriginNotAllowed extends Schema.TaggedError<OriginNotAllowed>()(
  "OriginNotAllowed",
  { code: Schema.Literal("ORIGIN_NOT_ALLOWED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

/** A defect in a handler; details stay in the server log. */
export class InternalError extends Schema.TaggedError<InternalError>()(
  "InternalError",
  { code: Schema.Literal("INTERNAL_ERROR"), message: Schema.String },
  HttpApiSchema.annotations({ status: 500 })
) {}

/** The `code` of a request that failed the endpoint's schemas (HttpApi's own `HttpApiDecodeError`). */
export const INVALID_REQUEST = "INVALID_REQUEST"

/** Serializes an error body; `fields` are the error's encoded fields, the four wire fields win over them. */
export const errorBody = (
  fields: object | undefined,
  tag: string,
  error: string,
  code: string,
  correlationId: string
): string => JSON.stringify(errorObject(fields, tag, error, code, correlationId))

/** The error body as an object, for a caller that serializes it with more (an SSE `error` event). */
export const errorObject = (
  fields: object | undefined,
  tag: string,
  error: string,
  code: string,
  correlationId: string
): ErrorBody => ({ ...fields, _tag: tag, error, code, correlationId })

type JsonObject = Record<string, unknown>

const isObject = (u: unknown): u is JsonObject => isRecord(u)

const REF_PREFIX = "#/components/schemas/"

// Adds the serving layer's fields to one error object schema; the error's own fields and strictness stay as declared.
const addWireFields = (schema: JsonObject): void => {
  const properties = isObject(schema.properties) ? schema.properties : (schema.properties = {})
  const required = Array.isArray(schema.required) ? (schema.required as Array<unknown>) : (schema.required = [])
  const tag = isObject(properties._tag) && Array.isArray(properties._tag.enum) ? properties._tag.enum : []
  const wire: JsonObject = {
    error: { type: "string", description: "A human-readable message; match on `code`, never on this text." },
    correlationId: { type: "string", description: "The request's `X-Correlation-Id`, also sent as that header." }
  }
  // HttpApi's own decode error has no `code` field; the serving layer sends INVALID_REQUEST for it.
  if (!("code" in properties)) {
    wire.code = tag.length === 1 && tag[0] === "HttpApiDecodeError" ? { type: "string", enum: [INVALID_REQUEST] } : { type: "string" }
  }
  for (const [name, property] of Object.entries(wire)) {
    properties[name] = property
    if (!required.includes(name)) required.push(name)
  }
  // The refusals the serving layer writes itself (bad JSON, no route, too large, a defect) carry only the four wire
  // fields, so a class's `message` is not promised; `error` always carries the text.
  const message = required.indexOf("message")
  if (message >= 0) required.splice(message, 1)
}

/**
 * An `OpenApi.Transform` for an api served by `Serve`: every error response schema (status ≥ 400) gets the fields
 * the wire adds (`error`, `correlationId`, and `code` where the class has none). Follows `$ref`s into
 * `components.schemas` and the branches of `anyOf`/`oneOf`; each component is patched once.
 */
export const wireErrors = (spec: Record<string, unknown>): Record<string, unknown> => {
  const doc = structuredClone(spec) as unknown as OpenApi.OpenAPISpec
  const components: JsonObject = { ...doc.components.schemas }
  const patched = new Set<JsonObject>()
  const visit = (schema: unknown): void => {
    if (!isObject(schema)) return
    if (typeof schema.$ref === "string" && schema.$ref.startsWith(REF_PREFIX)) return visit(components[schema.$ref.slice(REF_PREFIX.length)])
    for (const key of ["anyOf", "oneOf"]) {
      const branches = schema[key]
      if (Array.isArray(branches)) branches.forEach(visit)
    }
    if (schema.type === "object" && !patched.has(schema)) {
      patched.add(schema)
      addWireFields(schema)
    }
  }
  for (const item of Object.values(doc.paths)) {
    for (const operation of Object.values(item)) {
      if (!isObject(operation) || !isObject(operation.responses)) continue
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400 || !isObject(response) || !isObject(response.content)) continue
        for (const media of Object.values(response.content)) if (isObject(media)) visit(media.schema)
      }
    }
  }
  return doc as unknown as Record<string, unknown>
}

/**
 * Declares the serving layer's own errors on an api, so that its typed client decodes them and its OpenAPI document
 * lists them: every surface served through `Serve` can answer with any of these.
 */
export const addServingErrors = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(api: HttpApi.HttpApi<Id, Groups, E, R>) =>
  api
    .addError(InvalidJson)
    .addError(PayloadTooLarge)
    .addError(RouteNotFound)
    .addError(UnsupportedMediaType)
    .addError(Overloaded)
    .addError(HostNotAllowed)
    .addError(OriginNotAllowed)
    .addError(InternalError)
