/**
 * Who is calling, in one of three modes: none (everyone is `anonymous`), bearer (a token among the configured ones,
 * or accepted by `verifyBearer`; the principal is a digest of it, never the token), mesh-sig (an HTTP message
 * signature by a DID whose key resolves). Under mesh-sig the URL a caller must have signed is this agent's own,
 * never one the request names in its Host header, so a request signed for another agent cannot be replayed here; and
 * a caller is checked against `allowedCallers` before its nonce is recorded, so callers that are not allowed hold no
 * room in the nonce store.
 *
 * Every mandate a caller presents to this agent (the task mandate of a run, a model-budget mandate in its context)
 * is bound to its presenter by one check, `presentedByGrantor`, so the kinds cannot drift apart: under mesh-sig the
 * leaf's grantor must be the calling DID, or a token seen once could be replayed by anyone to make this agent act or
 * spend on its grantor's authority.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as crypto from "node:crypto"
import { AgentAuth, type AuthMode, type Caller } from "./AgentApi.js"
import { AgentForbidden, AgentRateLimited, AgentUnauthorized, AgentUnavailable } from "./AgentError.js"
import { Identity } from "./Identity.js"
import { normalizeDid } from "../core/Did.js"
import { decodeUnverified } from "../core/Mandate.js"
import type { MandateCacheApi } from "../core/MandateCache.js"
import { type CallerNotAllowed, checkRequestAt, type HttpSignatureError, HttpSignatureRefusalCode, HttpSignatureThrottledCode, recordNonce } from "../core/HttpSignature.js"
import { KeyResolver } from "../core/KeyResolver.js"
import { Keys } from "../core/Keys.js"
import { NonceStore } from "../core/NonceStore.js"
import { lift } from "../core/internal/lift.js"
import { lastUrlParser } from "../core/internal/url.js"
import { LeanRequest } from "../http/LeanRequest.js"
import { noteCaller } from "../http/LeanRequest.js"

/** The auth settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly auth?: AuthMode
  readonly bearerTokens?: ReadonlyArray<string>
  readonly verifyBearer?: (token: string) => boolean | Promise<boolean>
  readonly allowedCallers?: ReadonlyArray<string>
  /** Allowed clock skew for signatures; default 30 s. */
  readonly clockToleranceMs?: number
}

type AuthError = AgentUnauthorized | AgentForbidden | AgentRateLimited | AgentUnavailable
type Authenticate = Effect.Effect<Caller, AuthError, HttpServerRequest.HttpServerRequest>

const ANONYMOUS: Caller = { auth: "none", principal: "anonymous" }

/**
 * Refuses (403 MANDATE_GRANTOR_MISMATCH) a mandate whose leaf grantor (`iss`) is not the mesh-sig caller presenting
 * it. Under bearer and none the caller has no DID to compare, so the token is a bearer credential (docs/agent.md §4).
 * A token that does not decode passes here: its verifier refuses it on first use, with the code of its kind.
 */
export const presentedByGrantor = (token: string, caller: Caller, cache?: MandateCacheApi): Effect.Effect<void, AgentForbidden> => {
  if (caller.did === undefined) return Effect.void
  const decoded = decodeUnverified(token, cache)
  if (Either.isLeft(decoded)) return Effect.void
  const grantor = normalizeDid(decoded.right.grantor) ?? decoded.right.grantor
  return grantor === caller.did
    ? Effect.void
    : Effect.fail(new AgentForbidden({ code: "MANDATE_GRANTOR_MISMATCH", message: `the mandate was granted by ${grantor}, not by the caller ${caller.did}` }))
}

const isRefusal = Schema.is(HttpSignatureRefusalCode)
const isThrottled = Schema.is(HttpSignatureThrottledCode)

/** A refused signature as the agent answers it: 401, 429 over the nonce quota, 503 when it cannot decide. */
const signatureError = ({ code, message, retryAfterSeconds }: HttpSignatureError): AgentUnauthorized | AgentRateLimited | AgentUnavailable =>
  isRefusal(code)
    ? new AgentUnauthorized({ code, message })
    : isThrottled(code)
      ? new AgentRateLimited({ code, message, retryAfterSeconds: retryAfterSeconds ?? 1 })
      : new AgentUnavailable({ code, message })

const sha256 = (s: string): Buffer => crypto.createHash("sha256").update(s).digest()

const bodyOf = (req: HttpServerRequest.HttpServerRequest): Effect.Effect<Uint8Array> =>
  req instanceof LeanRequest ? Effect.succeed(req.body) : Effect.orDie(Effect.map(req.arrayBuffer, (b) => new Uint8Array(b)))

/** Bearer: a configured token (compared in constant time against all of them), else `verifyBearer`. */
const bearer = (options: Options): Authenticate => {
  const tokenDigests = (options.bearerTokens ?? []).map(sha256)
  const accepted = (token: string, digest: Buffer): Effect.Effect<boolean> => {
    // Compare against every token, so the time taken says nothing about which one (or whether any) matched.
    let ok = false
    for (const d of tokenDigests) ok = crypto.timingSafeEqual(d, digest) || ok
    if (ok || options.verifyBearer === undefined) return Effect.succeed(ok)
    const verify = options.verifyBearer
    return lift(() => verify(token)).pipe(
      Effect.map((v) => v === true),
      Effect.tapError((e) => Effect.logWarning("verifyBearer threw; refusing the token", e)),
      Effect.orElseSucceed(() => false)
    )
  }
  return Effect.gen(function* () {
    const req = yield* HttpServerRequest.HttpServerRequest
    const header = req.headers["authorization"]
    const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
    if (m === null) return yield* Effect.fail(new AgentUnauthorized({ code: "AUTH_REQUIRED", message: "send Authorization: Bearer <token>" }))
    const digest = sha256(m[1]!)
    if (!(yield* accepted(m[1]!, digest))) return yield* Effect.fail(new AgentUnauthorized({ code: "INVALID_TOKEN", message: "the bearer token is not accepted" }))
    return { auth: "bearer", principal: `bearer:${digest.toString("hex").slice(0, 16)}` }
  })
}

/** Mesh-sig: a signature over this agent's own URL by a resolvable DID, allowed, with a fresh nonce. */
const meshSig = (options: Options) =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const resolver = yield* KeyResolver
    const nonceStore = yield* NonceStore
    const identity = yield* Identity
    const allowed = options.allowedCallers === undefined ? undefined : new Set(options.allowedCallers.map((d) => normalizeDid(d) ?? d))
    // Built once: the options of every check, and the agent's URL once it is known (it is published once).
    const checkOptions = {
      resolveKey: resolver.resolve,
      clockToleranceMs: options.clockToleranceMs ?? 30_000,
      // The allow-list is asked before the key is resolved: a request naming a stranger costs no lookup.
      isAllowed: (did: string) => allowed === undefined || allowed.has(did)
    }
    let base: string | undefined
    const baseUrl = Effect.suspend(() =>
      base !== undefined ? Effect.succeed(base) : Effect.map(identity.url, (u) => (base = u.replace(/\/+$/, "")))
    )
    // The target URI of the last request: every request to one endpoint rebuilds the same one, parsed once.
    const parseTarget = lastUrlParser()
    const hrefOf = (target: string): string | undefined => parseTarget(target)?.href
    const refusal = (e: HttpSignatureError | CallerNotAllowed) =>
      e._tag === "CallerNotAllowed" ? new AgentForbidden({ code: "CALLER_NOT_ALLOWED", message: e.message }) : signatureError(e)
    // The clock of the layer's build: read directly, so that a signed request needs no fiber for its time.
    const clock = yield* Effect.clock
    // Made of steps that need no fiber (RunSync.ts) while the resolver and the nonce store answer at once.
    const authenticate: Authenticate = Effect.flatMap(HttpServerRequest.HttpServerRequest, (req) =>
      Effect.flatMap(baseUrl, (base) => {
        const url = hrefOf(`${base}${req.url}`)
        if (url === undefined) return Effect.fail(new AgentUnauthorized({ code: "SIGNATURE_MALFORMED", message: "the request's target URI cannot be rebuilt (Host header)" }))
        return Effect.flatMap(bodyOf(req), (body) => {
          const now = clock.unsafeCurrentTimeMillis()
          return Effect.flatMap(Effect.mapError(checkRequestAt(keys, { method: req.method, url, headers: req.headers, body }, checkOptions, now), refusal), (checked) =>
            Effect.map(Effect.mapError(recordNonce(checked, nonceStore, now), signatureError), (): Caller => {
              noteCaller(req, checked.did)
              return { auth: "mesh-sig", did: checked.did, principal: checked.did }
            })
          )
        })
      })
    )
    return authenticate
  })

/** A quoted-string (RFC 9110 §5.6.4) holding `s`: quotes and backslashes escaped, control characters dropped. */
const quoted = (s: string): string => `"${[...s].filter((c) => c >= " " && c !== "\x7f").join("").replace(/["\\]/g, "\\$&")}"`

/**
 * The headers of a 401 under this auth mode (RFC 9110 §11.6.1: a 401 carries a `WWW-Authenticate` challenge): under
 * bearer the RFC 6750 §3 challenge (with `error="invalid_token"` for a token that was sent and refused); under
 * mesh-sig a `Signature` challenge naming the profile and the components a signature covers, with the RFC 9421 §5.1
 * `Accept-Signature` that asks for the same (docs/protocol.md §10). None under none, which answers no 401.
 */
export const challengeOf = (auth: AuthMode, realm: string): (code: string) => Readonly<Record<string, string>> => {
  const r = `realm=${quoted(realm)}`
  if (auth === "bearer") {
    const missing = { "www-authenticate": `Bearer ${r}` }
    const invalid = { "www-authenticate": `Bearer ${r}, error="invalid_token", error_description="the bearer token is not accepted"` }
    return (code) => (code === "INVALID_TOKEN" ? invalid : missing)
  }
  if (auth === "mesh-sig") {
    const headers = {
      "www-authenticate": `Signature ${r}, tag="mesh-sig", alg="ed25519", components="@method @target-uri content-digest"`,
      "accept-signature": `sig1=("@method" "@target-uri" "content-digest");alg="ed25519";tag="mesh-sig"`
    }
    return () => headers
  }
  return () => ({})
}

/** The `AgentAuth` middleware for these settings, over the keys, resolver, nonce store and identity in context. */
export const layer = (options: Options): Layer.Layer<AgentAuth, never, Keys | KeyResolver | NonceStore | Identity> => {
  const auth = options.auth ?? "none"
  return auth === "none"
    ? Layer.succeed(AgentAuth, Effect.succeed(ANONYMOUS))
    : auth === "bearer"
      ? Layer.succeed(AgentAuth, bearer(options))
      : Layer.effect(AgentAuth, meshSig(options))
}
