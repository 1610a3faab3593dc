/**
 * The handlers of a MeshServer, whatever serves them: signed envelopes in on `POST /v1/messages`, checked by
 * `validateEnvelope` against the sender's key and the `NonceStore`, passed through the middleware in order, handed to
 * `onMessage(envelope, respond, stream)`; what the handler sends back goes out as envelopes signed by the server.
 * `MeshServer` serves them on node:http, `MeshServerWeb` as a fetch handler; this module names no Node API.
 *
 * Floor: mesh (docs/architecture.md §3).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { replaysRefusedEnvelope } from "../core/MeshMetrics.js"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import { invalidDid, normalizeDid } from "../core/Did.js"
import {
  buildEnvelope,
  DEFAULT_CLOCK_TOLERANCE_MS,
  type Envelope,
  EnvelopeError,
  isEnvelope,
  MESH_RESPONSE,
  validateEnvelope,
  type ValidateOptions
} from "../core/Envelope.js"
import { KeyResolver } from "../core/KeyResolver.js"
import { Keys, type PrivateKey, type PrivateKeyInput } from "../core/Keys.js"
import {
  isMessageRefusal,
  MeshServerApi,
  MessageForbidden,
  MessageRateLimited,
  type MessageRefusal,
  MessageUnauthorized,
  MessageUnavailable,
  refusalOf
} from "./MeshServerApi.js"
import { makeMemory, NonceStore, type NonceStoreApi } from "../core/NonceStore.js"
import * as RateLimiter from "../hub/RateLimiter.js"
import * as Sse from "../core/Sse.js"
import { MESH_PROTOCOL_VERSION } from "../core/Version.js"
import { CorrelationId } from "../http/CorrelationId.js"
import { errorBody } from "../http/ErrorBody.js"
import type * as Serve from "../http/Serve.js"
import { lift } from "../core/internal/lift.js"

/** The type of an envelope sent by `stream(…)` unless another is given. */
export const MESH_STREAM_CHUNK = "MeshStreamChunk"

/** A reply body: a JSON object. */
export type ReplyBody = { readonly [key: string]: unknown }

/** Options of a reply. */
export interface ReplyOptions {
  /** The envelope type; `MeshResponse` for `respond`, `MeshStreamChunk` for `stream` by default. */
  readonly type?: string
}

/**
 * Sends one reply envelope (to the sender, with the request's `correlationId`), signed by the server. Returns at
 * once; the envelope is signed when it is sent. Calls after the handler finished are ignored.
 */
export type Respond = (body: ReplyBody, options?: ReplyOptions) => void

/** Sends one chunk envelope; over SSE each chunk is an event, otherwise see docs/mesh-server.md. */
export type StreamReply = (body: ReplyBody, options?: ReplyOptions) => void

/** The application: handles one authentic envelope. Its result (Effect, Promise or nothing) is awaited, its value ignored. */
export type MessageHandler<R = never> = (
  envelope: Envelope,
  respond: Respond,
  stream: StreamReply
) => Effect.Effect<unknown, unknown, R> | PromiseLike<unknown> | void

/** What a key lookup may give: raw 32-byte key, publicKeyB64, or nothing (unknown sender). */
export type ResolvedPublicKey = Uint8Array | string | null | undefined

/** DID → the sender's public key, synchronously, as a Promise or as an Effect. */
export type ResolvePublicKey = (did: string) => ResolvedPublicKey | PromiseLike<ResolvedPublicKey> | Effect.Effect<ResolvedPublicKey, unknown>

/** DID → trust level (a number; higher is more trusted; nothing means 0), synchronously, as a Promise or as an Effect. */
export type TrustLevelOf = (
  did: string
) => number | null | undefined | PromiseLike<number | null | undefined> | Effect.Effect<number | null | undefined, unknown>

/** What each middleware sees: the validated envelope and its sender. */
export interface MiddlewareContext {
  readonly envelope: Envelope
  /** The sender's DID (`envelope.from`); authenticated unless the server runs in dev mode. */
  readonly sender: string
  /** The server's own DID. */
  readonly server: string
  readonly devMode: boolean
  /** A DID's trust level by the server's `trustLevelOf` option (0 when it has none or knows no level). */
  readonly trustLevelOf: (did: string) => Effect.Effect<number>
}

/** Why a middleware refuses a message. */
export type MiddlewareRefused = MessageForbidden | MessageRateLimited | MessageUnavailable

/** A check run, in order, after validation and before the handler; the first refusal answers the request. */
export interface Middleware {
  readonly name: string
  readonly check: (context: MiddlewareContext) => Effect.Effect<void, MiddlewareRefused>
}

/** How to run a MeshServer. */
export interface MeshServerOptions<R = never> {
  /** The server's DID; envelopes must be addressed to it. */
  readonly agentDid: string
  /** Signs the replies (seed, PKCS#8, base64 of either, or a `PrivateKey`). */
  readonly privateKey: PrivateKeyInput
  /** Port to listen on; 0 (the default) picks a free one. */
  readonly port?: number
  /** Address to listen on; default 127.0.0.1. */
  readonly host?: string
  readonly onMessage: MessageHandler<R>
  /** The sender's key; without it, the `KeyResolver` in context is used. Not called in dev mode. */
  readonly resolvePublicKey?: ResolvePublicKey
  /** Skip signature verification (incoming only; replies are still signed). Development only: logged loudly at start. */
  readonly devMode?: boolean
  readonly middleware?: ReadonlyArray<Middleware>
  /** Trust levels for `rbacMiddleware` (and any middleware asking `trustLevelOf`). */
  readonly trustLevelOf?: TrustLevelOf
  /** Allowed clock skew in ms, both ways; default 30 000. */
  readonly clockToleranceMs?: number
  /**
   * Longest envelope lifetime accepted; default 300 s (the envelope builder's default lifetime). It also bounds how
   * long each nonce is held, so a longer one makes a full nonce store more likely.
   */
  readonly maxTtlSeconds?: number
  /** Largest request body; larger ones get 413 before parsing. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /** Serving guards and limits (Host/Origin, timeouts, connections, load shedding); docs/protocol.md, "HTTP serving rules". */
  readonly serving?: Serve.Guards
  /** Lifetime of reply envelopes; default 300 s. */
  readonly replyTtlSeconds?: number
}

/** A running MeshServer. */
export interface RunningMeshServer {
  readonly url: string
  readonly port: number
  /** The server's normalized DID. */
  readonly did: string
  /** Stops listening (also done when the scope closes). */
  readonly close: Effect.Effect<void>
}

/** The options do not describe a server that can run (e.g. no way to find senders' keys). */
export class MeshServerError extends Data.TaggedError("MeshServerError")<{ readonly message: string }> {}

/** A DID's trust level: anything but a finite number counts as 0. */
const trustLevel = (of: TrustLevelOf | undefined, did: string): Effect.Effect<number> =>
  of === undefined
    ? Effect.succeed(0)
    : Effect.map(
        // A lookup that fails is a fault of the server's configuration, not the sender's: 500, logged.
        Effect.orDie(lift(() => of(did))),
        (level) => (typeof level === "number" && Number.isFinite(level) ? level : 0)
      )

/**
 * Refuses senders whose trust level is below `requiredTrustLevel` (403 `TRUST_LEVEL_INSUFFICIENT`). Levels come from
 * `options.trustLevelOf`, else from the server's `trustLevelOf`; a sender with no level has 0.
 */
export const rbacMiddleware = (requiredTrustLevel: number, options: { readonly trustLevelOf?: TrustLevelOf } = {}): Middleware => ({
  name: "rbac",
  check: (ctx) =>
    Effect.flatMap(options.trustLevelOf === undefined ? ctx.trustLevelOf(ctx.sender) : trustLevel(options.trustLevelOf, ctx.sender), (level) =>
      level >= requiredTrustLevel
        ? Effect.void
        : Effect.fail(
            new MessageForbidden({
              code: "TRUST_LEVEL_INSUFFICIENT",
              message: `trust level ${level} of ${ctx.sender} is below the required ${requiredTrustLevel}`
            })
          )
    )
})

/**
 * At most `requestsPerMinute` messages a minute per sender (a token bucket holding `burst`, default
 * `requestsPerMinute`); beyond that 429 `RATE_LIMITED` with `retryAfterSeconds`. The buckets belong to this
 * middleware value: servers sharing it share the limit.
 */
export const rateLimitMiddleware = (
  requestsPerMinute: number,
  options: { readonly burst?: number; readonly maxKeys?: number } = {}
): Middleware => {
  const limiter = RateLimiter.make({
    capacity: options.burst ?? requestsPerMinute,
    perMinute: requestsPerMinute,
    ...(options.maxKeys === undefined ? {} : { maxKeys: options.maxKeys })
  })
  return {
    name: "rateLimit",
    check: (ctx) =>
      Effect.catchTag(limiter.take(ctx.sender), "RateLimitExceeded", (e) =>
        Effect.fail(
          new MessageRateLimited({
            code: "RATE_LIMITED",
            message: `${ctx.sender} sent more than ${requestsPerMinute} messages a minute`,
            retryAfterSeconds: e.retryAfterSeconds
          })
        )
      )
  }
}

const DEV_MODE_BANNER = (did: string) => {
  const rule = "#".repeat(80)
  const line = (text: string) => `##  ${text.padEnd(74)}##`
  return [
    rule,
    line("MeshServer DEV MODE: SIGNATURES ARE NOT VERIFIED"),
    line(`server ${did}`),
    line("Anyone who can reach this port can send messages as ANY DID."),
    line("Trust levels and rate limits are keyed on DIDs nobody proved."),
    line("NEVER run devMode in production."),
    rule
  ].join("\n")
}

const NO_KEY = new Uint8Array(0)

/** Default longest envelope lifetime a MeshServer accepts, in seconds. */
export const DEFAULT_MAX_TTL_SECONDS = 300
const ACCEPTED = HttpServerResponse.empty({ status: 202 })
const encoder = new TextEncoder()

interface Outgoing {
  readonly _tag: "Out"
  readonly type: string
  readonly body: ReplyBody
}
type Item = Outgoing | { readonly _tag: "Done" } | { readonly _tag: "Failed"; readonly cause: Cause.Cause<MessageRefusal> }
const DONE: Item = { _tag: "Done" }


/** Starts a MeshServer; it stops when the scope closes. */

interface ClosableSocket {
  readonly once: (event: "close", f: () => void) => void
  readonly off: (event: "close", f: () => void) => void
}

/** The node:http socket under a request, if it has one (read by shape, so this module imports no node:http). */
const socketOf = (source: unknown): ClosableSocket | undefined => {
  const socket = typeof source === "object" && source !== null && "socket" in source ? (source as { readonly socket: unknown }).socket : undefined
  return typeof socket === "object" && socket !== null && typeof (socket as Partial<ClosableSocket>).once === "function" ? (socket as ClosableSocket) : undefined
}

/** The server's DID and the handler layer of `MeshServerApi`, from its options. */
export const makeHandlers = <R = never>(
  options: MeshServerOptions<R>
) =>
  Effect.gen(function* () {
    const did = normalizeDid(options.agentDid)
    if (did === undefined) return yield* Effect.fail(invalidDid(options.agentDid))
    const keys = yield* Keys
    const privateKey: PrivateKey = yield* keys.importPrivateKey(options.privateKey)
    const devMode = options.devMode === true
    const nonceStore = Option.getOrElse(yield* Effect.serviceOption(NonceStore), () => makeMemory())
    const keyResolver = yield* Effect.serviceOption(KeyResolver)
    if (!devMode && options.resolvePublicKey === undefined && Option.isNone(keyResolver)) {
      return yield* Effect.fail(new MeshServerError({ message: "MeshServer needs resolvePublicKey (or a KeyResolver in context) unless devMode is set" }))
    }
    if (devMode) yield* Effect.logWarning(DEV_MODE_BANNER(did))

    const tolerance = options.clockToleranceMs ?? DEFAULT_CLOCK_TOLERANCE_MS
    const validateOptions: ValidateOptions = {
      clockToleranceMs: tolerance,
      maxTtlSeconds: options.maxTtlSeconds ?? DEFAULT_MAX_TTL_SECONDS,
      ...(devMode ? { skipSignature: true } : {})
    }
    const middleware = options.middleware ?? []
    const trustLevelOf = (d: string) => trustLevel(options.trustLevelOf, d)

    const resolveKey = (sender: string): Effect.Effect<Uint8Array | string | null, MessageUnavailable> => {
      const unavailable = (cause: unknown) =>
        Effect.zipRight(
          Effect.logWarning(`MeshServer: the key of ${sender} could not be resolved`, cause),
          Effect.fail(new MessageUnavailable({ code: "RESOLVER_UNAVAILABLE", message: `the key of ${sender} could not be resolved; retry later` }))
        )
      const resolve = options.resolvePublicKey
      if (resolve !== undefined) {
        return Effect.catchAll(
          Effect.map(lift(() => resolve(sender)), (k) => (typeof k === "string" || k instanceof Uint8Array ? k : null)),
          unavailable
        )
      }
      // Checked at start: without resolvePublicKey there is a KeyResolver.
      const resolver = Option.getOrThrow(keyResolver)
      return resolver.resolve(sender).pipe(
        Effect.map((k): Uint8Array | null => k.publicKey),
        Effect.catchTags({
          KeyNotFound: () => Effect.succeed(null),
          KeyRevoked: () => Effect.succeed(null),
          KeyResolverUnavailable: unavailable
        })
      )
    }

    // Shape, addressee and time window come before the key lookup, so misaddressed, stale or garbage traffic never
    // reaches the resolver (it may be a registry over the network). When this is false, validateEnvelope refuses
    // at one of those steps, before it would look at the key.
    const worthResolving = (payload: unknown): Effect.Effect<boolean> => {
      if (!isEnvelope(payload) || payload.to !== did) return Effect.succeed(false)
      const created = Date.parse(payload.createdAt)
      const expires = Date.parse(payload.expiresAt)
      return Effect.map(Clock.currentTimeMillis, (now) => created <= now + tolerance && expires > now - tolerance)
    }

    /**
     * Checks an envelope in every way but its nonce, which `validateEnvelope` hands to this probe instead of the
     * store: the nonce is recorded only after the middleware authorized the sender (`recordNonce`).
     */
    const authenticate = (payload: unknown): Effect.Effect<{ readonly envelope: Envelope; readonly retainUntilMs: number }, MessageRefusal, Keys> =>
      Effect.gen(function* () {
        let retainUntilMs = 0
        const probe: NonceStoreApi = { record: (_sender, _nonce, until) => Effect.sync(() => void (retainUntilMs = until)) }
        let key: Uint8Array | string = NO_KEY
        if (!devMode && (yield* worthResolving(payload))) {
          const sender = (payload as Envelope).from
          const resolved = yield* resolveKey(sender)
          if (resolved === null) {
            return yield* Effect.fail(new MessageUnauthorized({ code: "UNKNOWN_SENDER", message: `no public key is known for ${sender}` }))
          }
          key = resolved
        }
        const envelope = yield* Effect.mapError(validateEnvelope(payload, key, did, probe, validateOptions), refusalOf)
        return { envelope, retainUntilMs }
      })

    const recordNonce = (envelope: Envelope, retainUntilMs: number): Effect.Effect<void, MessageRefusal> =>
      nonceStore.record(envelope.from, envelope.nonce, retainUntilMs).pipe(
        Effect.catchTags({
          NonceReplayed: () => Effect.zipRight(Metric.increment(replaysRefusedEnvelope), Effect.fail(refusalOf(new EnvelopeError({ code: "REPLAYED", message: `nonce ${envelope.nonce} from ${envelope.from} was already used` })))),
          NonceQuotaExceeded: (e) =>
            Effect.fail(
              new MessageRateLimited({
                code: "NONCE_QUOTA_EXCEEDED",
                message: `${envelope.from} holds its quota of ${e.quota} live nonces; retry when earlier envelopes expire`,
                retryAfterSeconds: Math.max(1, Math.ceil(e.retryAfterMs / 1000))
              })
            ),
          NonceStoreFull: (e) => Effect.fail(refusalOf(new EnvelopeError({ code: "NONCE_STORE_FULL", message: `nonce store holds ${e.capacity} live nonces` }))),
          NonceStoreUnavailable: (e) => Effect.fail(refusalOf(new EnvelopeError({ code: "NONCE_STORE_UNAVAILABLE", message: e.message })))
        })
      )

    const sign = (request: Envelope, out: Outgoing): Effect.Effect<Envelope> =>
      typeof out.body !== "object" || out.body === null || Array.isArray(out.body)
        ? Effect.dieMessage(`MeshServer: a reply body must be a JSON object, got ${Array.isArray(out.body) ? "an array" : typeof out.body}`)
        : buildEnvelope({
            type: out.type,
            from: did,
            to: request.from,
            body: out.body,
            privateKey,
            correlationId: request.correlationId,
            ...(options.replyTtlSeconds === undefined ? {} : { ttlSeconds: options.replyTtlSeconds })
          }).pipe(Effect.provideService(Keys, keys), Effect.orDie)

    // The handler's own failures: a declared refusal goes out as such, anything else is a defect (500, logged).
    const runHandler = (envelope: Envelope, respond: Respond, stream: StreamReply): Effect.Effect<void, MessageRefusal, R> =>
      lift(() => options.onMessage(envelope, respond, stream)).pipe(
        Effect.catchAll((e) => (isMessageRefusal(e) ? Effect.fail(e) : Effect.die(e))),
        Effect.asVoid
      ) as Effect.Effect<void, MessageRefusal, R>

    const replyOnce = (envelope: Envelope): Effect.Effect<HttpServerResponse.HttpServerResponse, MessageRefusal, R> =>
      Effect.suspend(() => {
        let response: Outgoing | undefined
        let chunk: Outgoing | undefined
        let open = true
        const respond: Respond = (body, o) => {
          if (open) response = { _tag: "Out", type: o?.type ?? MESH_RESPONSE, body }
        }
        const stream: StreamReply = (body, o) => {
          if (open) chunk = { _tag: "Out", type: o?.type ?? MESH_STREAM_CHUNK, body }
        }
        return runHandler(envelope, respond, stream).pipe(
          Effect.ensuring(Effect.sync(() => (open = false))),
          Effect.flatMap(() => {
            // Only the envelope that goes out is signed.
            const out = response ?? chunk
            return out === undefined ? Effect.succeed(ACCEPTED) : Effect.map(sign(envelope, out), (reply) => HttpServerResponse.unsafeJson(reply))
          })
        )
      })

    const replyEvents = (
      envelope: Envelope,
      request: HttpServerRequest.HttpServerRequest
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, MessageRefusal, R | CorrelationId> =>
      Effect.gen(function* () {
        const cid = yield* CorrelationId
        const queue = yield* Queue.unbounded<Item>()
        let open = true
        const push = (kind: string): Respond => (body, o) => {
          if (open) queue.unsafeOffer({ _tag: "Out", type: o?.type ?? kind, body })
        }
        // The handler outlives this fiber (it keeps streaming after the response head is sent), so it runs as a
        // daemon that is interrupted when the stream ends or the client goes away.
        const fiber: Fiber.RuntimeFiber<void, never> = yield* runHandler(envelope, push(MESH_RESPONSE), push(MESH_STREAM_CHUNK)).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              open = false
              queue.unsafeOffer(Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause) ? DONE : { _tag: "Failed", cause: exit.cause })
            })
          ),
          Effect.ignore,
          Effect.forkDaemon
        )
        const first = yield* Queue.take(queue).pipe(Effect.onInterrupt(() => Effect.sync(() => fiber.unsafeInterruptAsFork(FiberId.none))))
        // Nothing sent yet: the status can still say what happened.
        if (first._tag === "Done") return ACCEPTED
        if (first._tag === "Failed") return yield* Effect.failCause(first.cause)

        // On node:http the client going away closes the socket; behind a fetch handler it cancels the body stream,
        // which ends this stream (and so the handler) by itself.
        const socket = socketOf(request.source)
        const onClose = () => fiber.unsafeInterruptAsFork(FiberId.none)
        socket?.once("close", onClose)

        let seq = 0
        const errorEvent = (cause: Cause.Cause<MessageRefusal>) => {
          const failure = Cause.failureOption(cause)
          const refusal = Option.isSome(failure) ? failure.value : undefined
          const data =
            refusal === undefined
              ? errorBody(undefined, "InternalError", "internal server error", "INTERNAL_ERROR", cid)
              : errorBody(
                  { message: refusal.message, ...("retryAfterSeconds" in refusal ? { retryAfterSeconds: refusal.retryAfterSeconds } : {}) },
                  refusal._tag,
                  refusal.message,
                  refusal.code,
                  cid
                )
          const log = refusal === undefined ? Effect.logError("message handler failed", cause).pipe(Effect.annotateLogs("correlationId", cid)) : Effect.void
          return Effect.as(log, { text: Sse.encodeEvent({ event: "error", data }), last: true })
        }
        const encode = (item: Outgoing | Extract<Item, { _tag: "Failed" }>): Effect.Effect<{ readonly text: string; readonly last: boolean }> =>
          item._tag === "Failed"
            ? errorEvent(item.cause)
            : sign(envelope, item).pipe(
                Effect.map((reply) => ({ text: Sse.encodeEvent({ id: String(++seq), data: JSON.stringify(reply) }), last: false })),
                Effect.catchAllCause(errorEvent)
              )
        const rest = Stream.repeatEffectOption(
          Effect.flatMap(Queue.take(queue), (item) => (item._tag === "Done" ? Effect.fail(Option.none()) : Effect.succeed(item)))
        )
        const body = Stream.concat(Stream.succeed(first), rest).pipe(
          Stream.mapEffect(encode),
          Stream.takeUntil((e) => e.last),
          Stream.map((e) => encoder.encode(e.text)),
          Stream.ensuring(
            Effect.sync(() => {
              socket?.off("close", onClose)
              fiber.unsafeInterruptAsFork(FiberId.none)
            })
          )
        )
        return HttpServerResponse.stream(body, { contentType: Sse.CONTENT_TYPE, headers: Sse.RESPONSE_HEADERS })
      })

    const receive = (payload: unknown): Effect.Effect<HttpServerResponse.HttpServerResponse, MessageRefusal, R | Keys | HttpServerRequest.HttpServerRequest | CorrelationId> =>
      Effect.gen(function* () {
        const { envelope, retainUntilMs } = yield* authenticate(payload)
        if (middleware.length > 0) {
          const context: MiddlewareContext = { envelope, sender: envelope.from, server: did, devMode, trustLevelOf }
          for (const m of middleware) yield* m.check(context)
        }
        // Only a sender the middleware let through holds room in the nonce store.
        yield* recordNonce(envelope, retainUntilMs)
        const request = yield* HttpServerRequest.HttpServerRequest
        return yield* Sse.isEventStream(request.headers["accept"]) ? replyEvents(envelope, request) : replyOnce(envelope)
      })

    const health = { status: "ok" as const, did, protocolVersion: MESH_PROTOCOL_VERSION }
    const handlers = HttpApiBuilder.group(MeshServerApi, "messages", (h) =>
      Effect.succeed(h.handle("send", ({ payload }) => receive(payload)).handle("health", () => Effect.succeed(health)))
    )
    return { did, handlers }
  })
