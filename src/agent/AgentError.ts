/**
 * The errors an agent server answers with, one class per HTTP status, each with the spec's `code` (docs/agent.md).
 * On the wire they become `{ _tag, error, code, correlationId }`; in a stream, the same object is an `error` event.
 * `AgentConfigError` is apart: it never reaches the wire, it stops a server from starting.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { HttpSignatureRefusalCode, HttpSignatureThrottledCode, HttpSignatureUnavailableCode } from "../core/HttpSignature.js"

/** 400: the request cannot be read. */
export class AgentBadRequest extends Schema.TaggedError<AgentBadRequest>()(
  "AgentBadRequest",
  { code: Schema.Literal("INVALID_REQUEST"), message: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** The codes of a refused credential or signature. */
export const UnauthorizedCode = Schema.Literal("AUTH_REQUIRED", "INVALID_TOKEN", ...HttpSignatureRefusalCode.literals)

/** 401: no credential, or one that does not hold (a replayed signature included). */
export class AgentUnauthorized extends Schema.TaggedError<AgentUnauthorized>()(
  "AgentUnauthorized",
  { code: UnauthorizedCode, message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

/** The codes of an authenticated caller refused something. */
export const ForbiddenCode = Schema.Literal(
  "CALLER_NOT_ALLOWED",
  "NOT_RUN_OWNER",
  "NOT_TASK_OWNER",
  "RUN_CANCELLED",
  "MANDATE_REQUIRED",
  "MANDATE_INVALID",
  "MANDATE_GRANTOR_MISMATCH",
  "CAPABILITY_NOT_PERMITTED",
  "REVERSIBILITY_VIOLATION",
  "ACTION_LIMIT_EXCEEDED",
  "COMPUTE_LIMIT_EXCEEDED",
  "DATA_ACCESS_VIOLATION",
  "SANDBOX_REQUIRED",
  "DELEGATION_DEPTH_EXCEEDED",
  "LIMIT_EXCEEDED",
  "MERCHANT_NOT_ALLOWED",
  "HUMAN_GATE_DENIED",
  "APPROVAL_MALFORMED",
  "APPROVAL_UNSIGNED",
  "APPROVAL_WRONG_SIGNER",
  "APPROVAL_INVALID",
  "APPROVAL_MISMATCH",
  "APPROVAL_EXPIRED"
)
/** The codes of an authenticated caller refused something. */
export type ForbiddenCode = typeof ForbiddenCode.Type

/** 403: the caller is not allowed, a task action was refused under its mandate, or an approval does not hold. */
export class AgentForbidden extends Schema.TaggedError<AgentForbidden>()(
  "AgentForbidden",
  { code: ForbiddenCode, message: Schema.String, reason: Schema.optional(Schema.String) },
  HttpApiSchema.annotations({ status: 403 })
) {}

/** 404: no paused task or retained run under that id. */
export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()(
  "AgentNotFound",
  { code: Schema.Literal("TASK_NOT_FOUND", "RUN_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/**
 * 409: the task was already resumed (or cancelled), or it expired with its mandate; an `Idempotency-Key` sent with
 * another request, or held by a run in progress elsewhere.
 */
export class AgentConflict extends Schema.TaggedError<AgentConflict>()(
  "AgentConflict",
  { code: Schema.Literal("TASK_ALREADY_RESUMED", "TASK_EXPIRED", "IDEMPOTENCY_KEY_REUSED", "IDEMPOTENCY_KEY_IN_PROGRESS", "BUDGET_EXHAUSTED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

/**
 * 429: this caller holds its quota (of live signature nonces, or of idempotency keys and stored replies); the others
 * are not affected. Retry after `retryAfterSeconds`.
 */
export class AgentRateLimited extends Schema.TaggedError<AgentRateLimited>()(
  "AgentRateLimited",
  { code: Schema.Literal(...HttpSignatureThrottledCode.literals, "IDEMPOTENCY_QUOTA_EXCEEDED"), message: Schema.String, retryAfterSeconds: Schema.Number },
  HttpApiSchema.annotations({ status: 429 })
) {}

/** 500: the handler failed; details stay in the server log. */
export class HandlerFailed extends Schema.TaggedError<HandlerFailed>()(
  "HandlerFailed",
  { code: Schema.Literal("HANDLER_FAILED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 500 })
) {}

/** 502: the language-model provider failed. */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()(
  "ProviderFailed",
  {
    code: Schema.Literal("PROVIDER_UNAVAILABLE", "PROVIDER_AUTH", "PROVIDER_RATE_LIMITED", "PROVIDER_REJECTED", "PROVIDER_BAD_RESPONSE"),
    message: Schema.String,
    /** When the provider said to come back (also sent as `Retry-After`). */
    retryAfterSeconds: Schema.optional(Schema.Number)
  },
  HttpApiSchema.annotations({ status: 502 })
) {}

/** 503: a store or the key resolver cannot answer; retry. */
export class AgentUnavailable extends Schema.TaggedError<AgentUnavailable>()(
  "AgentUnavailable",
  {
    code: Schema.Literal(...HttpSignatureUnavailableCode.literals, "STORE_UNAVAILABLE", "AGENT_BUSY"),
    message: Schema.String,
    /** When to come back (also sent as `Retry-After`). */
    retryAfterSeconds: Schema.optional(Schema.Number)
  },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** Every error a run or a resume can end with. */
export type RunError = AgentForbidden | AgentNotFound | AgentConflict | HandlerFailed | ProviderFailed | AgentUnavailable | AgentBadRequest

/** The options do not describe a server that can run. */
export class AgentConfigError extends Schema.TaggedError<AgentConfigError>()("AgentConfigError", {
  /** INVALID_CONFIG, or DATABASE_IN_USE: another live agent holds the database file. */
  code: Schema.Literal("INVALID_CONFIG", "DATABASE_IN_USE"),
  message: Schema.String
}) {}
