/**
 * The errors the hub answers with, one class per HTTP status, each with the spec's `code`. On the wire they become
 * `{ _tag, error, code, correlationId }` (the serving layer adds `error` and `correlationId`).
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"

/** 400: the request cannot be read (missing or mistyped field, bad query). */
export class BadRequest extends Schema.TaggedError<BadRequest>()(
  "BadRequest",
  { code: Schema.Literal("INVALID_JSON", "MISSING_FIELD", "INVALID_REQUEST"), message: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** 401: no, an unknown, a revoked or a malformed credential; a challenge answer or a request signature that does not hold. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { code: Schema.Literal("INVALID_API_KEY", "CHALLENGE_INVALID", "SIGNATURE_MISSING", "SIGNATURE_INVALID", "SIGNATURE_EXPIRED", "REPLAYED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

/** 403: the credential is valid but does not own the record, or lacks the role. */
export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { code: Schema.Literal("NOT_OWNER", "ADMIN_REQUIRED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

/** 404: nothing under that id. */
export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  { code: Schema.Literal("NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** 409: the DID is taken, the budget cannot cover the allocation, or the thing was already done. */
export class Conflict extends Schema.TaggedError<Conflict>()(
  "Conflict",
  { code: Schema.Literal("DID_TAKEN", "BUDGET_EXHAUSTED", "ALREADY_REVOKED", "ALREADY_ALLOCATED", "IDEMPOTENCY_KEY_REUSED", "COMMIT_TOKEN_REUSED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** 422: well-formed but invalid content. */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()(
  "Unprocessable",
  {
    code: Schema.Literal(
      "INVALID_DID",
      "INVALID_PUBLIC_KEY",
      "INVALID_MANIFEST",
      "MANIFEST_NOT_PINNED",
      "INVALID_ENDPOINT",
      "INVALID_CARD",
      "CARD_UNREACHABLE",
      "INVALID_AMOUNT",
      "MANDATE_INVALID",
      "INVALID_COMMIT_TOKEN"
    ),
    message: Schema.String
  },
  HttpApiSchema.annotations({ status: 422 })
) {}

/**
 * 429: too many requests from this address or key (`RATE_LIMITED`), or a signer holding its quota of live nonces
 * (`NONCE_QUOTA_EXCEEDED`); retry after the given seconds (also sent as `Retry-After`).
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()(
  "RateLimited",
  { code: Schema.Literal("RATE_LIMITED", "NONCE_QUOTA_EXCEEDED"), message: Schema.String, retryAfterSeconds: Schema.Number },
  HttpApiSchema.annotations({ status: 429 })
) {}

/** 502: the platform runs apart from the registry and cannot reach it. */
export class RegistryUnreachable extends Schema.TaggedError<RegistryUnreachable>()(
  "RegistryUnreachable",
  { code: Schema.Literal("REGISTRY_UNREACHABLE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 502 })
) {}

/** 503: the hub's database failed; retry. */
export class Unavailable extends Schema.TaggedError<Unavailable>()(
  "Unavailable",
  { code: Schema.Literal("STORE_UNAVAILABLE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** Constructors for the errors more than one mapping builds (the hub's and the saga routes'). */
export const errors = {
  notFound: (message: string) => new NotFound({ code: "NOT_FOUND", message }),
  unavailable: (message: string) => new Unavailable({ code: "STORE_UNAVAILABLE", message })
}
