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
