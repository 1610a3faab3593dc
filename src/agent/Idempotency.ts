/**
 * `Idempotency-Key` on `/v1/run` (docs/agent.md §3, docs/protocol.md §14): the same authenticated caller sending the
 * same key gets the stored reply, and the handler runs once. This is what makes a saga's retry after a crash safe.
 *
 * The work of a keyed run belongs to the server, not to the connection: it runs in a fiber of the server's scope, so
 * a caller that goes away (a hub killed mid-step) does not cancel it, and its reply is stored for the retry. Requests
 * with the same key in this process wait for the one running; the store decides between processes and restarts.
 * Only finished replies (200, 202) are stored; a run that fails lets its key go, so a retry does the work again.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import type { Caller } from "./AgentApi.js"
import { AgentBadRequest, AgentConflict, AgentRateLimited, AgentUnavailable } from "./AgentError.js"
import { Identity } from "./Identity.js"
import { canonicalJson } from "../core/Canonical.js"
import { DEFAULT_QUOTA, type IdempotencyQuota, IdempotencyStore, type StoredReply } from "../core/IdempotencyStore.js"
import { Entropy } from "../core/Entropy.js"

/** How long a stored reply is kept by default: 24 hours. */
export const DEFAULT_TTL_MS = 24 * 60 * 60 * 1000

/** What an idempotency key may be: 1 to 200 visible ASCII characters. */
export const KEY_PATTERN = /^[\x21-\x7e]{1,200}$/

/** The idempotency settings (the field of the same name in `AgentServerOptions`). */
export interface Options {
  /** How long a reply is kept for retries; default 24 hours. */
  readonly idempotencyTtlMs?: number
  /**
   * What one caller may hold at once: live keys and bytes of stored replies; a new key beyond is 429
   * `IDEMPOTENCY_QUOTA_EXCEEDED` with `Retry-After`. Default 1,000 keys and 8 MiB.
   */
  readonly idempotencyQuota?: IdempotencyQuota
}

/** A reply, and whether it came from the store. */
export interface Answered {
  readonly reply: StoredReply
  readonly replayed: boolean
}

/** Runs keyed work once per caller and key. */
export interface IdempotencyApi {
  /**
   * Answers `request` under `key`: from the store when this caller sent the key before with the same request, else
   * by running `work` once and storing its reply. Refuses a key from an unauthenticated caller or on a streamed
   * request (400), the key with another request (409 `IDEMPOTENCY_KEY_REUSED`), and a key another server holds
   * for this request right now (409 `IDEMPOTENCY_KEY_IN_PROGRESS`).
   */
  readonly once: <E>(
    caller: Caller,
    key: string,
    request: { readonly body: unknown; readonly streaming: boolean },
    work: Effect.Effect<StoredReply, E>
  ) => Effect.Effect<Answered, E | AgentBadRequest | AgentConflict | AgentUnavailable | AgentRateLimited>
}

/** The idempotent runs of one agent server. */
export class Idempotency extends Context.Tag("agent-mesh/agent/Idempotency")<Idempotency, IdempotencyApi>() {}

const badRequest = (message: string) => new AgentBadRequest({ code: "INVALID_REQUEST", message })
const unavailable = (e: { readonly message: string }) => new AgentUnavailable({ code: "STORE_UNAVAILABLE", message: e.message })
const reused = () =>
  new AgentConflict({ code: "IDEMPOTENCY_KEY_REUSED", message: "this Idempotency-Key was sent with another request; use a new key for a new request" })

/** The digest that tells two requests apart: SHA-256 of the body's JCS form. */
const fingerprintOf = (body: unknown): Either.Either<string, AgentBadRequest> =>
  Either.map(
    Either.mapLeft(canonicalJson(body), (e) => badRequest(e.message)),
    (text) => crypto.createHash("sha256").update(text).digest("base64url")
  )

/** Idempotency over the store and identity in context; keyed work runs in this layer's scope. */
export const make = (options: Options) =>
  Effect.gen(function* () {
    const store = yield* IdempotencyStore
    const { did } = yield* Identity
    const scope = yield* Effect.scope
    const ttl = options.idempotencyTtlMs ?? DEFAULT_TTL_MS
    const quota = options.idempotencyQuota ?? DEFAULT_QUOTA
    // One id per running server: a pending entry under another holder was left by a server that stopped.
    const holder = (yield* Entropy).uuid()
    // Keyed work running in this process, by (scope, key): later requests wait for it, then read the store.
    const running = new Map<string, Deferred.Deferred<void>>()

    const once: IdempotencyApi["once"] = <E>(caller: Caller, key: string, request: { readonly body: unknown; readonly streaming: boolean }, work: Effect.Effect<StoredReply, E>) =>
      Effect.gen(function* () {
        if (caller.auth === "none") return yield* Effect.fail(badRequest("Idempotency-Key needs an authenticated caller, and this agent takes anyone's calls (auth none): start it with --auth mesh-sig (auth: \"mesh-sig\" in code) to take saga steps and keyed calls"))
        if (!KEY_PATTERN.test(key)) return yield* Effect.fail(badRequest("Idempotency-Key must be 1 to 200 visible ASCII characters"))
        if (request.streaming) return yield* Effect.fail(badRequest("Idempotency-Key is for plain runs; a stream continues with Last-Event-ID"))
        const fingerprint = yield* fingerprintOf(request.body)
        const keyScope = JSON.stringify([did, caller.principal])
        const id = JSON.stringify([keyScope, key])
        for (let busy = running.get(id); busy !== undefined; busy = running.get(id)) yield* Deferred.await(busy)
        // Marked before the store is asked (no yield in between), so a second request here waits rather than race.
        const done = Deferred.unsafeMake<void>(FiberId.none)
        running.set(id, done)
        const settle = Effect.suspend(() => {
          running.delete(id)
          return Deferred.succeed(done, undefined)
        })
        const stored = (exit: Exit.Exit<StoredReply, E>) =>
          (Exit.isSuccess(exit) ? store.complete(keyScope, key, holder, exit.value) : store.release(keyScope, key, holder)).pipe(
            Effect.catchAll((e) => Effect.logError(`idempotency key ${key}: the store failed after the run`, e))
          )
        // Claiming and starting the work is not interrupted half way, so the mark above is always settled.
        const started = yield* Effect.uninterruptible(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const claim = yield* Effect.mapError(store.claim({ scope: keyScope, key, fingerprint, holder, expiresAt: now + ttl, quota }), (e) =>
              e._tag === "IdempotencyQuotaExceeded"
                ? new AgentRateLimited({ code: "IDEMPOTENCY_QUOTA_EXCEEDED", message: e.message, retryAfterSeconds: Math.max(1, Math.ceil(e.retryAfterMs / 1000)) })
                : unavailable(e)
            )
            if (claim._tag !== "Claimed") return Either.left(claim)
            // Forked into the server's scope, not the request's: the caller leaving does not cancel the work.
            return Either.right(yield* Effect.interruptible(work).pipe(Effect.onExit(stored), Effect.ensuring(settle), Effect.forkIn(scope)))
          }).pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) && Either.isRight(exit.value) ? Effect.void : settle)))
        )
        if (Either.isRight(started)) return { reply: yield* Fiber.join(started.right), replayed: false }
        const claim = started.left
        if (claim.fingerprint !== fingerprint) return yield* Effect.fail(reused())
        if (claim._tag === "Completed") return { reply: claim.reply, replayed: true }
        return yield* Effect.fail(
          new AgentConflict({ code: "IDEMPOTENCY_KEY_IN_PROGRESS", message: "a run with this Idempotency-Key is in progress; retry later" })
        )
      })

    return { once } satisfies IdempotencyApi
  })

/** `Idempotency` with these settings. */
export const layer = (options: Options): Layer.Layer<Idempotency, never, IdempotencyStore | Identity> => Layer.scoped(Idempotency, make(options))
