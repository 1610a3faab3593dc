/**
 * The client side of `MeshServer`: POST a signed envelope to an agent's `/v1/messages` and get back its signed reply
 * (or null when it accepted the message without one), or the stream of replies over server-sent events. Refusals
 * carry the server's `code`; with the server's public key, replies are checked with `validateEnvelope`.
 *
 * Floor: mesh (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { type Envelope, isEnvelope, validateEnvelope } from "../core/Envelope.js"
import { Keys } from "../core/Keys.js"
import { DEFAULT_MEMORY_CAPACITY, makeMemory, type NonceStoreApi } from "../core/NonceStore.js"
import * as Sse from "../core/Sse.js"
import { tryParseJsonStrict } from "../core/internal/json.js"
import { runWithKeys } from "../node/internal/promiseRuntime.js"
import { isRecord } from "../core/internal/record.js"
import * as HttpClientDefault from "../http/HttpClientDefault.js"

/**
 * A message that did not get through, or a reply that cannot be trusted. `code` is the server's code verbatim
 * (`SIGNATURE_INVALID`, `RATE_LIMITED`, …; servers may add codes) or one of the client's own: `TRANSPORT_ERROR`
 * (no answer: refused, reset, DNS), `INVALID_RESPONSE` (an answer that is not what the protocol says),
 * `REPLY_INVALID` (a reply failing verification; `reason` says why), `SSE_LIMIT_EXCEEDED` (an event or a stream
 * of replies larger than the client's `sse` limits), or `REPLY_TOO_LARGE` (an answer that is not an event stream,
 * a reply or a refusal, that declared or sent more than `maxReplyBytes`).
 */
export class MessageClientError extends Schema.TaggedError<MessageClientError>()("MessageClientError", {
  code: Schema.String,
  message: Schema.String,
  /** The HTTP status of a refusal. */
  status: Schema.optional(Schema.Number),
  /** When to try again (RATE_LIMITED). */
  retryAfterSeconds: Schema.optional(Schema.Number),
  /** For REPLY_INVALID: an `EnvelopeErrorCode`, `WRONG_SENDER` or `CORRELATION_MISMATCH`. */
  reason: Schema.optional(Schema.String),
  /** The correlation id the server answered with. */
  correlationId: Schema.optional(Schema.String)
}) {}

/** The client's own codes, beside the server's. */
export const TRANSPORT_ERROR = "TRANSPORT_ERROR"
/** The client's own codes, beside the server's. */
export const INVALID_RESPONSE = "INVALID_RESPONSE"
/** The client's own codes, beside the server's. */
export const REPLY_INVALID = "REPLY_INVALID"
/** The client's own codes, beside the server's. */
export const SSE_LIMIT_EXCEEDED = "SSE_LIMIT_EXCEEDED"
/** The client's own codes, beside the server's. */
export const REPLY_TOO_LARGE = "REPLY_TOO_LARGE"

/** Client settings. */
export interface MessageClientOptions {
  /** Remembers reply nonces when replies are verified; default a bounded memory store of the client's own (100 000, no per-server quota). */
  readonly nonceStore?: NonceStoreApi
  /** Allowed clock skew when verifying replies, in ms; default 30 000. */
  readonly clockToleranceMs?: number
  /** How large a stream of replies may be: default 1 MiB per event, 64 MiB per stream (`SSE_LIMIT_EXCEEDED` past it). */
  readonly sse?: Sse.SseLimits
  /** How large any other answer (a reply, a refusal) may be, in bytes; default 4 MiB (`REPLY_TOO_LARGE` past it). */
  readonly maxReplyBytes?: number
}

/** Per-call settings. */
export interface SendOptions {
  /** The server's public key (raw 32 bytes or publicKeyB64): when given, every reply is verified under it. */
  readonly serverPublicKey?: Uint8Array | string
}

/** The operations of a message client. */
export interface MessageClientApi {
  /** Sends `envelope` to `endpoint` (with or without `/v1/messages`): the signed reply, or null on 202/204. */
  readonly send: (endpoint: string, envelope: Envelope, options?: SendOptions) => Effect.Effect<Envelope | null, MessageClientError>
  /** Sends `envelope` asking for server-sent events: every reply envelope as it comes (a plain reply counts as one). */
  readonly stream: (endpoint: string, envelope: Envelope, options?: SendOptions) => Stream.Stream<Envelope, MessageClientError>
}

/** The `MessageClient` service. */
export class MessageClient extends Context.Tag("agent-mesh/MessageClient")<MessageClient, MessageClientApi>() {}

const PATH = "/v1/messages"
// The same alphabet the server accepts for X-Correlation-Id, so error bodies carry the envelope's id.
const SAFE_CID = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/** `endpoint` + `/v1/messages`, unless it already ends so. */
export const messagesUrl = (endpoint: string): string => {
  const base = endpoint.replace(/\/+$/, "")
  return base.endsWith(PATH) ? base : `${base}${PATH}`
}

const transportError = (url: string, e: { readonly message: string }) =>
  new MessageClientError({ code: TRANSPORT_ERROR, message: `${url}: ${e.message}` })
const invalidResponse = (message: string, status?: number) =>
  new MessageClientError({ code: INVALID_RESPONSE, message, ...(status === undefined ? {} : { status }) })

const str = (u: unknown, key: string): string | undefined => {
  const v = isRecord(u) ? u[key] : undefined
  return typeof v === "string" ? v : undefined
}

/** The error a refusal's body (`{ _tag, error, code, correlationId }`) describes. */
const refusalFrom = (status: number, body: unknown, retryAfterHeader: string | undefined): MessageClientError => {
  const retry = isRecord(body) ? body.retryAfterSeconds : undefined
  const retryAfter = typeof retry === "number" ? retry : retryAfterHeader !== undefined && /^\d+$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined
  const cid = str(body, "correlationId")
  return new MessageClientError({
    code: str(body, "code") ?? `HTTP_${status}`,
    message: str(body, "error") ?? `the server answered ${status}`,
    status,
    ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
    ...(cid === undefined ? {} : { correlationId: cid })
  })
}

/** Outside JSON, strictly (I-JSON: no duplicate names, no `__proto__`). */
const parseJson = (text: string): Option.Option<unknown> => {
  const parsed = tryParseJsonStrict(text)
  return parsed.ok ? Option.some(parsed.value) : Option.none()
}

/**
 * A client's store of reply nonces: bounded, with no per-sender quota, since it holds only replies this client asked
 * for from servers it chose, and one busy server must not make its own replies fail.
 */
const replyNonceStore = (): NonceStoreApi => makeMemory({ perSenderQuota: DEFAULT_MEMORY_CAPACITY })

/** Builds a client over the `HttpClient` in context. */
export const make = (options: MessageClientOptions = {}): Effect.Effect<MessageClientApi, never, HttpClient.HttpClient | Keys> =>
  Effect.gen(function* () {
    const http = yield* HttpClient.HttpClient
    const keys = yield* Keys
    const nonceStore = options.nonceStore ?? replyNonceStore()
    const sseLimits = options.sse
    const maxReply = options.maxReplyBytes ?? Sse.DEFAULT_MAX_REPLY_BYTES
    const validateOptions = options.clockToleranceMs === undefined ? {} : { clockToleranceMs: options.clockToleranceMs }

    const request = (url: string, envelope: Envelope, accept: string) =>
      HttpClientRequest.post(url).pipe(
        HttpClientRequest.bodyUnsafeJson(envelope),
        HttpClientRequest.setHeaders({
          accept,
          ...(typeof envelope.correlationId === "string" && SAFE_CID.test(envelope.correlationId) ? { "x-correlation-id": envelope.correlationId } : {})
        })
      )

    const execute = (url: string, req: HttpClientRequest.HttpClientRequest) =>
      Effect.mapError(http.execute(req), (e) => transportError(url, e))

    // Every answer that is not an event stream goes through the same bounded reader: without it a server could
    // step around the `sse` limits by answering a huge body under another type.
    const readText = (url: string, res: HttpClientResponse.HttpClientResponse): Effect.Effect<string, MessageClientError> =>
      Sse.readReply(
        Stream.catchAll(res.stream, (e) => (e.reason === "EmptyBody" ? Stream.empty : Stream.fail(e))),
        { maxBytes: maxReply, contentLength: res.headers["content-length"] }
      ).pipe(
        Effect.mapError((e) =>
          e._tag === "ReplyTooLarge"
            ? new MessageClientError({ code: REPLY_TOO_LARGE, message: `${url}: ${e.message}`, status: res.status })
            : transportError(url, e)
        )
      )

    const refusal = (url: string, res: HttpClientResponse.HttpClientResponse) =>
      Effect.flatMap(readText(url, res), (text) =>
        Effect.fail(refusalFrom(res.status, Option.getOrUndefined(parseJson(text)), res.headers["retry-after"]))
      )

    /** A reply as received: an envelope, and, with the server's key, an authentic one answering this request. */
    const checkReply = (request: Envelope, reply: unknown, options: SendOptions): Effect.Effect<Envelope, MessageClientError> => {
      if (!isEnvelope(reply)) return Effect.fail(invalidResponse("the reply is not an envelope"))
      const key = options.serverPublicKey
      if (key === undefined) return Effect.succeed(reply)
      const invalid = (reason: string, message: string) => new MessageClientError({ code: REPLY_INVALID, reason, message })
      return validateEnvelope(reply, key, request.from, nonceStore, validateOptions).pipe(
        Effect.provideService(Keys, keys),
        Effect.mapError((e) => invalid(e.code, `reply refused: ${e.message}`)),
        Effect.flatMap((env) =>
          env.from !== request.to
            ? Effect.fail(invalid("WRONG_SENDER", `reply from ${env.from}, not from ${request.to}`))
            : env.correlationId !== request.correlationId
              ? Effect.fail(invalid("CORRELATION_MISMATCH", `reply correlates ${env.correlationId}, not ${request.correlationId}`))
              : Effect.succeed(env)
        )
      )
    }

    const parseReply = (request: Envelope, text: string, options: SendOptions) =>
      Option.match(parseJson(text), {
        onNone: () => Effect.fail(invalidResponse("the reply is not JSON", 200)),
        onSome: (json) => checkReply(request, json, options)
      })

    const isEventStream = (res: HttpClientResponse.HttpClientResponse) => Sse.isEventStream(res.headers["content-type"])

    const send: MessageClientApi["send"] = (endpoint, envelope, options = {}) => {
      const url = messagesUrl(endpoint)
      return Effect.flatMap(execute(url, request(url, envelope, "application/json")), (res): Effect.Effect<Envelope | null, MessageClientError> => {
        if (res.status === 202 || res.status === 204) return Effect.succeed(null)
        if (res.status === 200) return Effect.flatMap(readText(url, res), (text) => parseReply(envelope, text, options))
        if (res.status >= 400) return refusal(url, res)
        return Effect.fail(invalidResponse(`unexpected status ${res.status}`, res.status))
      })
    }

    const stream: MessageClientApi["stream"] = (endpoint, envelope, options = {}) => {
      const url = messagesUrl(endpoint)
      return Stream.unwrap(
        Effect.map(execute(url, request(url, envelope, "text/event-stream, application/json")), (res): Stream.Stream<Envelope, MessageClientError> => {
          if (res.status === 202 || res.status === 204) return Stream.empty
          if (res.status >= 400) return Stream.fromEffect(refusal(url, res))
          if (res.status !== 200) return Stream.fail(invalidResponse(`unexpected status ${res.status}`, res.status))
          // A server may answer a single reply even when asked for events.
          if (!isEventStream(res)) return Stream.fromEffect(Effect.flatMap(readText(url, res), (text) => parseReply(envelope, text, options)))
          return Sse.parse(Stream.mapError(res.stream, (e) => transportError(url, e)), sseLimits).pipe(
            Stream.catchTag("SseLimitExceeded", (e) => Stream.fail(new MessageClientError({ code: SSE_LIMIT_EXCEEDED, message: `${url}: ${e.message}` }))),
            Stream.mapEffect((event): Effect.Effect<Envelope, MessageClientError> => {
              const json = parseJson(event.data)
              if (event.event === "error") {
                return Effect.fail(Option.isSome(json) ? refusalFrom(res.status, json.value, undefined) : invalidResponse(`error event: ${event.data}`))
              }
              return Option.isSome(json) ? checkReply(envelope, json.value, options) : Effect.fail(invalidResponse("an event's data is not JSON"))
            })
          )
        })
      )
    }

    return { send, stream }
  })

/** The client on the `HttpClient` in context, else `fetch` (`HttpClientDefault`). */
export const layer = (options: MessageClientOptions = {}): Layer.Layer<MessageClient, never, Keys> =>
  Layer.effect(MessageClient, make(options)).pipe(Layer.provide(HttpClientDefault.layer))

/** The client on the `HttpClient` in context. */
export const layerHttpClient = (options: MessageClientOptions = {}): Layer.Layer<MessageClient, never, HttpClient.HttpClient | Keys> =>
  Layer.effect(MessageClient, make(options))

/** Sends through the `MessageClient` in context. */
export const send = (endpoint: string, envelope: Envelope, options?: SendOptions): Effect.Effect<Envelope | null, MessageClientError, MessageClient> =>
  Effect.flatMap(MessageClient, (c) => c.send(endpoint, envelope, options))

/** Streams through the `MessageClient` in context. */
export const stream = (endpoint: string, envelope: Envelope, options?: SendOptions): Stream.Stream<Envelope, MessageClientError, MessageClient> =>
  Stream.unwrap(Effect.map(MessageClient, (c) => c.stream(endpoint, envelope, options)))

// One nonce store for every Promise call, so a replayed reply is caught across calls too.
let promiseNonceStore: NonceStoreApi | undefined
const promiseClient = Effect.suspend(() => make({ nonceStore: (promiseNonceStore ??= replyNonceStore()) })).pipe(Effect.provide(FetchHttpClient.layer))

/**
 * The Promise facade (fetch, node:crypto keys): `send` resolves with the reply or null, `stream` is an async
 * iterable of replies; both reject with `MessageClientError` (match on `code`).
 */
export const MessageClientPromise = {
  /** Sends an envelope; the signed reply, or null when the server accepted it without one. */
  send: (endpoint: string, envelope: Envelope, options?: SendOptions): Promise<Envelope | null> =>
    runWithKeys(Effect.flatMap(promiseClient, (c) => c.send(endpoint, envelope, options))),
  /** Sends an envelope asking for server-sent events; yields every reply as it arrives. */
  stream: (endpoint: string, envelope: Envelope, options?: SendOptions): AsyncIterable<Envelope> => ({
    [Symbol.asyncIterator]: () => {
      const iterable = runWithKeys(Stream.toAsyncIterableEffect(Stream.unwrap(Effect.map(promiseClient, (c) => c.stream(endpoint, envelope, options)))))
      let iterator: AsyncIterator<Envelope> | undefined
      const it = async () => (iterator ??= (await iterable)[Symbol.asyncIterator]())
      return {
        next: async () => (await it()).next(),
        return: async (value?: unknown) => {
          const i = await it()
          return i.return === undefined ? { done: true, value: value as Envelope } : i.return(value)
        }
      }
    }
  })
}
