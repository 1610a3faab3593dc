/**
 * The HTTP contract of `MeshServer`, declared once: `POST /v1/messages` takes a signed envelope and answers with a
 * signed envelope (200), nothing (202) or, when asked with `Accept: text/event-stream`, a stream of signed envelopes;
 * `GET /health` says who answers. The server (`MeshServer`), `HttpApiClient` and the OpenAPI document come from it.
 * Statuses and codes are specified in docs/mesh-server.md.
 *
 * Floor: mesh (docs/architecture.md §3).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { Envelope, type EnvelopeError, JsonObject } from "../core/Envelope.js"
import { addServingErrors, wireErrors } from "../http/ErrorBody.js"
import { VERSION } from "../core/Version.js"

/** 400: the body is not an envelope, or claims a lifetime longer than the server accepts. */
export class MessageInvalid extends Schema.TaggedError<MessageInvalid>()(
  "MessageInvalid",
  { code: Schema.Literal("MALFORMED", "TTL_TOO_LONG"), message: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** 421: the envelope is addressed to another agent; it was sent to the wrong server. */
export class MessageMisdirected extends Schema.TaggedError<MessageMisdirected>()(
  "MessageMisdirected",
  { code: Schema.Literal("WRONG_RECIPIENT"), message: Schema.String },
  HttpApiSchema.annotations({ status: 421 })
) {}

/** 401: the sender is not known, or the envelope is not authentic, not current, or already used. */
export class MessageUnauthorized extends Schema.TaggedError<MessageUnauthorized>()(
  "MessageUnauthorized",
  { code: Schema.Literal("UNKNOWN_SENDER", "SIGNATURE_INVALID", "EXPIRED", "NOT_YET_VALID", "REPLAYED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

/** 403: the sender is authentic but a middleware (or the handler) refuses it. */
export class MessageForbidden extends Schema.TaggedError<MessageForbidden>()(
  "MessageForbidden",
  { code: Schema.Literal("TRUST_LEVEL_INSUFFICIENT", "FORBIDDEN"), message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

/**
 * 429: the sender sent too many messages (RATE_LIMITED), or holds its quota of live nonces (NONCE_QUOTA_EXCEEDED);
 * retry after `retryAfterSeconds` (also sent as `Retry-After`).
 */
export class MessageRateLimited extends Schema.TaggedError<MessageRateLimited>()(
  "MessageRateLimited",
  { code: Schema.Literal("RATE_LIMITED", "NONCE_QUOTA_EXCEEDED"), message: Schema.String, retryAfterSeconds: Schema.Number },
  HttpApiSchema.annotations({ status: 429 })
) {}

/** 503: the nonce store or the key resolver failed (or is full); the envelope may be fine, retry later. */
export class MessageUnavailable extends Schema.TaggedError<MessageUnavailable>()(
  "MessageUnavailable",
  { code: Schema.Literal("NONCE_STORE_FULL", "NONCE_STORE_UNAVAILABLE", "RESOLVER_UNAVAILABLE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** Every refusal `POST /v1/messages` declares. */
export const MessageRefusal = Schema.Union(MessageInvalid, MessageMisdirected, MessageUnauthorized, MessageForbidden, MessageRateLimited, MessageUnavailable)
/** Every refusal `POST /v1/messages` declares. */
export type MessageRefusal = typeof MessageRefusal.Type

/** True for one of the declared refusals (so a handler failing with one is answered with it, not with 500). */
export const isMessageRefusal: (u: unknown) => u is MessageRefusal = Schema.is(MessageRefusal)

/** The refusal answering an envelope that `validateEnvelope` turned down, by its code (docs/mesh-server.md). */
export const refusalOf = (e: EnvelopeError): MessageInvalid | MessageMisdirected | MessageUnauthorized | MessageRateLimited | MessageUnavailable => {
  switch (e.code) {
    case "MALFORMED":
    case "TTL_TOO_LONG":
      return new MessageInvalid({ code: e.code, message: e.message })
    case "WRONG_RECIPIENT":
      return new MessageMisdirected({ code: e.code, message: e.message })
    case "NOT_YET_VALID":
    case "EXPIRED":
    case "SIGNATURE_INVALID":
    case "REPLAYED":
      return new MessageUnauthorized({ code: e.code, message: e.message })
    case "NONCE_QUOTA_EXCEEDED":
      return new MessageRateLimited({ code: e.code, message: e.message, retryAfterSeconds: 1 })
    case "NONCE_STORE_FULL":
    case "NONCE_STORE_UNAVAILABLE":
      return new MessageUnavailable({ code: e.code, message: e.message })
  }
}

/** The envelope schema as the contract states it: `Envelope`, with its body described for JSON Schema (any object). */
export const EnvelopeSchema = Schema.Struct({ ...Envelope.fields, body: JsonObject.annotations({ jsonSchema: { type: "object" } }) })

/** What `GET /health` answers. */
export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  did: Schema.String,
  protocolVersion: Schema.String
})

/** The envelope endpoint and the health check. */
export class MessagesGroup extends HttpApiGroup.make("messages")
  .add(
    HttpApiEndpoint.post("send", "/v1/messages")
      // Unknown on purpose: `validateEnvelope` judges the shape, so a bad envelope is refused as MALFORMED with the
      // envelope codes, not as HttpApi's generic decode error.
      .setPayload(Schema.Unknown.annotations({ description: "A signed envelope (docs/protocol.md §5)." }))
      .addSuccess(EnvelopeSchema)
      .addSuccess(HttpApiSchema.Accepted)
      .addError(MessageInvalid)
      .addError(MessageMisdirected)
      .addError(MessageUnauthorized)
      .addError(MessageForbidden)
      .addError(MessageRateLimited)
      .addError(MessageUnavailable)
      .annotate(
        OpenApi.Description,
        "Delivers a signed envelope. 200: the signed reply envelope; 202: accepted, no reply. With `Accept: text/event-stream` " +
          "the replies come as server-sent events, one signed envelope (JSON) per `data:` line, until the handler finishes."
      )
  )
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Health)) {}

/** The whole MeshServer contract, with the serving layer's own errors so clients decode them too. */
export class MeshServerApi extends addServingErrors(
  HttpApi.make("meshServer")
    .add(MessagesGroup)
)
  .annotate(OpenApi.Version, VERSION)
  .annotate(OpenApi.Transform, wireErrors)
  .annotate(OpenApi.Title, "agent-mesh MeshServer")
  .annotate(OpenApi.Description, "Signed envelopes in, signed envelopes out. Errors are { _tag, error, code, correlationId }.") {}
