/**
 * The one error shape on the wire, `{ _tag, error, code, correlationId }` (ARCHITECTURE.md §4), and the errors the
 * serving layer itself raises before or around a handler.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"

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

/** The server is at its limit of requests in flight; come back after `retryAfterSeconds` (also `Retry-After`). */
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
): string => JSON.stringify({ ...fields, _tag: tag, error, code, correlationId })
