/**
 * The hub's handlers: each endpoint of `HubApi` delegates to `Registry`, `Ledger` or `Platform`.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as ApiGroup from "../http/ApiGroup.js"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { ApiKeyAuth, Caller, HubApi, PlatformApi } from "./HubApi.js"
import { BadRequest, Conflict, errors, Forbidden, NotFound, RateLimited, RegistryUnreachable, Unauthorized, Unavailable, Unprocessable } from "./HubError.js"
import { HttpSignatureRefusalCode, verifyRequest } from "../core/HttpSignature.js"
import { LeanRequest, noteCaller } from "../http/LeanRequest.js"
import * as Metrics from "../http/Metrics.js"
import { KeyResolver } from "../core/KeyResolver.js"
import { Keys } from "../core/Keys.js"
import { type Actor, Ledger, type LedgerError } from "./Ledger.js"
import { NonceStore } from "../core/NonceStore.js"
import { PayloadTooLarge } from "../http/ErrorBody.js"
import { Platform, type PlatformError } from "./Platform.js"
import { type Caller as KeyCaller, hubOrigin, Registry, type RegistryError } from "./Registry.js"
import { clientKey } from "../core/internal/clientKey.js"
import { CardFetchPolicy, fetchCard } from "./A2aCardFetch.js"
import { LearnerStatsStore } from "./LearnerStatsStore.js"
import { WebLive } from "./WebPage.js"
import type { PersistenceError } from "../sql/SqlFailure.js"

// Every per-address limit (search, challenges, write quotas) counts an IPv6 client by its /64 (core/internal/clientKey.ts).
const clientKeyOf = (req: HttpServerRequest.HttpServerRequest): string => clientKey(Option.getOrElse(req.remoteAddress, () => "unknown"))
const clientIp = Effect.map(HttpServerRequest.HttpServerRequest, clientKeyOf)

/** Every failure of the registry, the ledger and the platform, named after what happened; `hubHttp` gives each its HTTP error. */
type DomainError = RegistryError | LedgerError | PlatformError

// One entry per failure (the `satisfies` refuses a missing or unknown one); the code and message carry over as they
// are and the class sets the spec's status.
const httpOf = {
  InvalidApiKey: ({ code, message }) => new Unauthorized({ code, message }),
  InvalidSignature: ({ code, message }) => new Unauthorized({ code, message }),
  InvalidChallenge: ({ code, message }) => new Unauthorized({ code, message }),
  AdminRequired: ({ code, message }) => new Forbidden({ code, message }),
  NotOwner: ({ code, message }) => new Forbidden({ code, message }),
  ApiKeyNotFound: ({ code, message }) => new NotFound({ code, message }),
  ManifestNotFound: ({ code, message }) => new NotFound({ code, message }),
  EntryNotFound: ({ code, message }) => new NotFound({ code, message }),
  DidNotRegistered: ({ code, message }) => new NotFound({ code, message }),
  ApiKeyAlreadyRevoked: ({ code, message }) => new Conflict({ code, message }),
  MandateAlreadyRevoked: ({ code, message }) => new Conflict({ code, message }),
  DidTaken: ({ code, message }) => new Conflict({ code, message }),
  InvalidManifest: ({ code, message }) => new Unprocessable({ code, message }),
  ManifestNotPinned: ({ code, message }) => new Unprocessable({ code, message }),
  InvalidEndpoint: ({ code, message }) => new Unprocessable({ code, message }),
  InvalidPublicKey: ({ code, message }) => new Unprocessable({ code, message }),
  InvalidDid: ({ code, message }) => new Unprocessable({ code, message }),
  LimitReached: ({ code, message, retryAfterSeconds }) => new RateLimited({ code, message, retryAfterSeconds }),
  RecordTooLarge: ({ code, message }) => new PayloadTooLarge({ code, message }),
  InvalidQuery: ({ code, message }) => new BadRequest({ code, message }),
  MalformedRevocation: ({ code, message }) => new BadRequest({ code, message }),
  InvalidCard: ({ code, message }) => new Unprocessable({ code, message }),
  EmptyBody: ({ code, message }) => new BadRequest({ code, message }),
  RegistryNotReached: ({ code, message }) => new RegistryUnreachable({ code, message }),
  RegistryUnavailable: ({ code, message }) => new Unavailable({ code, message }),
  PoolNotFound: ({ code, message }) => new NotFound({ code, message }),
  AllocationNotFound: ({ code, message }) => new NotFound({ code, message }),
  NotGrantee: ({ code, message }) => new Forbidden({ code, message }),
  MandateRefused: ({ code, message }) => new Unprocessable({ code, message }),
  InvalidAmount: ({ code, message }) => new Unprocessable({ code, message }),
  CommitTokenRefused: ({ code, message }) => (code === "COMMIT_TOKEN_REUSED" ? new Conflict({ code, message }) : new Unprocessable({ code, message })),
  InvalidIdempotencyKey: ({ code, message }) => new BadRequest({ code, message }),
  BudgetExhausted: ({ code, message }) => new Conflict({ code, message }),
  AlreadyAllocated: ({ code, message }) => new Conflict({ code, message }),
  IdempotencyKeyReused: ({ code, message }) => new Conflict({ code, message }),
  AlreadyReleased: ({ code, message }) => new Conflict({ code, message }),
  LedgerUnavailable: ({ code, message }) => new Unavailable({ code, message })
} satisfies { readonly [K in DomainError["_tag"]]: (e: Extract<DomainError, { readonly _tag: K }>) => unknown }

/** The HTTP error a registry, ledger or platform failure answers with, per failure (so each endpoint's declared errors still hold). */
type HubHttp<E extends DomainError> = ReturnType<(typeof httpOf)[E["_tag"]]>

/** A registry, ledger or platform failure as the hub's HTTP error: the spec's code carried over, the status chosen here. */
const hubHttp = <E extends DomainError>(e: E): HubHttp<E> => (httpOf[e._tag] as (e: E) => unknown)(e) as HubHttp<E>

/** Bearer API keys, checked against the registry. */
export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.map(Registry, (registry) =>
    ApiKeyAuth.of({
      bearer: (token) =>
        Effect.mapError(registry.authenticate(Redacted.value(token)), hubHttp).pipe(
          // A key issued to a DID names that DID as the caller in the access log.
          Effect.tap((caller) => (caller.owner.startsWith("did:") ? Effect.map(HttpServerRequest.HttpServerRequest, (req) => noteCaller(req, caller.owner)) : Effect.void))
        )
    }))
)

/** The `proof` member of a body read as any JSON (a deletion's), or undefined. */
const proofOf = (payload: unknown): unknown =>
  typeof payload === "object" && payload !== null && !Array.isArray(payload) ? (payload as { readonly proof?: unknown }).proof : undefined

/** The registry endpoints; writes learn this hub's origin (proofs name it) and the client's address (a quota key). */
export const RegistryLive = ApiGroup.group(HubApi, "registry", (handlers) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const publicUrl = Option.getOrUndefined(yield* Effect.serviceOption(HubPublicUrl))
    const publicOrigin = publicUrl === undefined ? undefined : hubOrigin(publicUrl)
    const policy = yield* CardFetchPolicy
    const cardFetch = { allowPrivateAddresses: policy.allowPrivateAddresses }
    const fetchCardAt = policy.fetch ?? fetchCard
    const write = Effect.flatMap(HttpServerRequest.HttpServerRequest, (req) =>
      Effect.map(Caller, (caller) => {
        // Proofs name the hub's origin: fixed when publicUrl is set, else the address the request arrived on.
        const local = publicOrigin === undefined ? baseUrl(req, undefined) : undefined
        return { caller, ctx: { hub: publicOrigin ?? (local === undefined ? undefined : hubOrigin(local)), client: clientKeyOf(req) } }
      })
    )
    return handlers
      .handle("pinManifest", ({ payload }) => Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.pinManifest(caller, payload, ctx), hubHttp)))
      .handle("getManifest", ({ path }) => Effect.mapError(registry.manifest(path.cid), hubHttp))
      .handle("registerAgent", ({ payload }) => Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.registerAgent(caller, payload, ctx), hubHttp)))
      .handle("listAgents", ({ urlParams }) => Effect.mapError(registry.listAgents(urlParams.limit ?? 50, urlParams.cursor, urlParams.live), hubHttp))
      .handle("resolveAgent", ({ path }) => Effect.mapError(registry.resolveAgent(path.didHash), hubHttp))
      .handle("heartbeat", ({ path }) => Effect.flatMap(Caller, (caller) => Effect.mapError(registry.heartbeat(caller, path.didHash), hubHttp)))
      .handle("updateAgent", ({ path, payload }) =>
        Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.updateAgent(caller, path.didHash, payload, ctx), hubHttp))
      )
      .handle("rotateAgentKey", ({ path, payload }) =>
        Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.rotateAgentKey(caller, path.didHash, payload, ctx), hubHttp))
      )
      .handle("deleteAgent", ({ path, payload }) =>
        Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.deleteAgent(caller, path.didHash, { proof: proofOf(payload) }, ctx), hubHttp))
      )
      .handle("registerMcp", ({ payload }) => Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.registerMcp(caller, payload, ctx), hubHttp)))
      .handle("listMcp", ({ urlParams }) => Effect.mapError(registry.listMcp(urlParams.limit ?? 50, urlParams.cursor), hubHttp))
      .handle("resolveMcp", ({ path }) => Effect.mapError(registry.resolveMcp(path.didHash), hubHttp))
      .handle("registerA2a", ({ payload }) =>
        Effect.flatMap(write, ({ caller, ctx }) =>
          Effect.mapError(Effect.flatMap(fetchCardAt(payload.cardUrl, cardFetch), (card) => registry.registerA2a(caller, { ...payload, card }, ctx)), hubHttp)
        )
      )
      .handle("resolveA2a", ({ path }) => Effect.mapError(registry.resolveA2a(path.didHash), hubHttp))
      .handle("refreshA2a", ({ path }) =>
        Effect.flatMap(write, ({ caller, ctx }) =>
          Effect.mapError(registry.refreshA2a(caller, path.didHash, (cardUrl) => fetchCardAt(cardUrl, cardFetch), ctx), hubHttp)
        )
      )
      .handle("registerSkill", ({ payload }) => Effect.flatMap(write, ({ caller, ctx }) => Effect.mapError(registry.registerSkill(caller, payload, ctx), hubHttp)))
      .handle("listSkills", ({ urlParams }) => Effect.mapError(registry.listSkills(urlParams.limit ?? 50, urlParams.cursor), hubHttp))
      .handle("resolveSkill", ({ path }) => Effect.mapError(registry.resolveSkill(path.didHash), hubHttp))
      .handle("search", ({ urlParams }) =>
        Effect.flatMap(clientIp, (ip) => Effect.map(Effect.mapError(registry.search(ip, urlParams.q, urlParams.limit ?? 50, urlParams.live), hubHttp), (items) => ({ items })))
      )
      .handle("resolveDid", ({ path }) =>
        Effect.map(Effect.mapError(registry.resolveDid(path.did), hubHttp), (r) => ({ did: r.document.id, keyVersion: r.keyVersion, document: r.document }))
      )
      .handle("revokeMandate", ({ payload }) => Effect.mapError(registry.revokeMandate(payload), hubHttp))
      .handle("mandateRevoked", ({ path, urlParams }) =>
        Effect.map(Effect.mapError(registry.isMandateRevoked(path.jti, urlParams.grantor), hubHttp), (revoked) => ({ jti: path.jti, grantor: urlParams.grantor, revoked }))
      )
  })
)

/** The API-key endpoints: the admin creates keys for anyone; a key's owner (or the admin) revokes it. */
export const KeysLive = ApiGroup.group(HubApi, "keys", (handlers) =>
  Effect.map(Registry, (registry) =>
    handlers
      .handle("createKey", ({ payload }) => Effect.flatMap(Caller, (caller) => Effect.mapError(registry.issueApiKey(caller, payload.owner, payload.label), hubHttp)))
      .handle("revokeKey", ({ path }) => Effect.flatMap(Caller, (caller) => Effect.mapError(registry.revokeApiKey(caller, path.id), hubHttp)))
  )
)

/**
 * The hub's public base URL (`https://hub.example`), the origin ledger requests are signed for. Without it, the
 * address the connection arrived on (`http://<local address>:<port>`) — never the `Host` header, which the sender
 * chooses, so a request signed for another server cannot be replayed here.
 */
export class HubPublicUrl extends Context.Tag("agent-mesh/hub/PublicUrl")<HubPublicUrl, string>() {}

// A refusal says the request does not hold (401); any other code says the hub could not decide (503, retry).
const refusals = new Set<string>(HttpSignatureRefusalCode.literals)

/** The base URL this request reached the hub at: `publicUrl`, else the listening address (never the Host header). */
const baseUrl = (req: HttpServerRequest.HttpServerRequest, publicUrl: string | undefined): string | undefined => {
  if (publicUrl !== undefined) return publicUrl.replace(/\/+$/, "")
  if (!(req instanceof LeanRequest)) return undefined
  const { localAddress, localPort } = req.source.socket
  return localAddress !== undefined && localPort !== undefined ? `http://${localAddress.includes(":") ? `[${localAddress}]` : localAddress}:${localPort}` : undefined
}

/** The URL a ledger request must have been signed for, or undefined when it cannot be rebuilt. */
const targetUri = (req: HttpServerRequest.HttpServerRequest, publicUrl: string | undefined): string | undefined => {
  const base = baseUrl(req, publicUrl)
  const target = `${base ?? ""}${req.url}`
  return base !== undefined && URL.canParse(target) ? new URL(target).href : undefined
}

/**
 * The DID a ledger request acts for. A request carrying `Signature-Input` is judged by its mesh-sig signature alone
 * (the signer's registered key, a fresh nonce, this hub's URL). Otherwise an agent API key acts for the DID it was
 * issued to only when it is also the key that registered that DID's record: the challenge exchange issues agent
 * keys for an unregistered DID to whoever holds any key, so an agent key alone proves nothing about the DID's
 * registered key. An admin or user key acts for nobody.
 */
const actorOf = (
  verify: (req: HttpServerRequest.HttpServerRequest) => Effect.Effect<string, Unauthorized | RateLimited | Unavailable>,
  actsFor: (caller: KeyCaller) => Effect.Effect<string | undefined, Unavailable>
): Effect.Effect<Actor, Unauthorized | RateLimited | Unavailable, Caller | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function* () {
    const req = yield* HttpServerRequest.HttpServerRequest
    if (req.headers["signature-input"] !== undefined || req.headers.signature !== undefined) return yield* verify(req)
    return yield* actsFor(yield* Caller)
  })

/**
 * Verifies a request's mesh-sig signature as this hub judges it: the signer's registered key, a fresh nonce, this
 * hub's URL. Answers the signer's DID; a request that does not hold is 401 (`SIGNATURE_MISSING` when it carries no
 * signature at all), a signer over its nonce quota 429, a store or resolver that cannot answer 503.
 */
export const makeVerifySigned = Effect.gen(function* () {
  const resolver = yield* KeyResolver
  const nonceStore = yield* NonceStore
  const keys = yield* Keys
  const publicUrl = Option.getOrUndefined(yield* Effect.serviceOption(HubPublicUrl))
  return (req: HttpServerRequest.HttpServerRequest): Effect.Effect<string, Unauthorized | RateLimited | Unavailable> =>
    Effect.gen(function* () {
      const url = targetUri(req, publicUrl)
      if (url === undefined) return yield* Effect.fail(new Unauthorized({ code: "SIGNATURE_INVALID", message: "the hub cannot rebuild the URL this request was signed for" }))
      // The body was read before the handler ran; failing to hand it over is a defect, not the caller's fault.
      const body = new Uint8Array(yield* Effect.orDie(req.arrayBuffer))
      const verified = yield* verifyRequest({ method: req.method, url, headers: req.headers, body }, { resolveKey: resolver.resolve, nonceStore }).pipe(
        Effect.provideService(Keys, keys),
        Effect.mapError(({ code, message, retryAfterSeconds }) =>
          code === "NONCE_QUOTA_EXCEEDED"
            ? new RateLimited({ code, message, retryAfterSeconds: retryAfterSeconds ?? 1 })
            : !refusals.has(code)
            ? errors.unavailable(`${code}: ${message}`)
            : new Unauthorized({
                code: code === "REPLAYED" || code === "SIGNATURE_MISSING"
                  ? code
                  : code === "SIGNATURE_EXPIRED" || code === "SIGNATURE_NOT_YET_VALID" ? "SIGNATURE_EXPIRED" : "SIGNATURE_INVALID",
                message: `${code}: ${message}`
              })
        )
      )
      noteCaller(req, verified.did)
      return verified.did
    })
})

/** The spending-ledger endpoints: each acts for the DID the request proved (see `actorOf`). */
export const SpendingLive = ApiGroup.group(HubApi, "spending", (handlers) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger
    const verify = yield* makeVerifySigned
    const registry = yield* Registry
    const actor = actorOf(verify, (caller) => Effect.mapError(registry.agentKeyActsFor(caller), hubHttp))
    return handlers
      .handle("openPool", ({ payload }) => Effect.flatMap(actor, (did) => Effect.mapError(ledger.openPool(did, payload.mandate), hubHttp)))
      .handle("listPools", () => Effect.flatMap(actor, (did) => Effect.map(Effect.mapError(ledger.pools(did), hubHttp), (items) => ({ items }))))
      .handle("getPool", ({ path }) => Effect.flatMap(actor, (did) => Effect.mapError(ledger.pool(did, path.poolId), hubHttp)))
      .handle("allocate", ({ path, payload }) =>
        Effect.flatMap(actor, (did) =>
          Effect.mapError(ledger.allocate(did, path.poolId, { childToken: payload.childMandate, idempotencyKey: payload.idempotencyKey }), hubHttp)
        )
      )
      .handle("release", ({ path, payload }) => Effect.flatMap(actor, (did) => Effect.mapError(ledger.release(did, path.allocationId, payload), hubHttp)))
      .handle("listAllocations", ({ path }) => Effect.flatMap(actor, (did) => Effect.mapError(ledger.allocations(did, path.poolId), hubHttp)))
  })
)



/** The platform endpoints. */
export const PlatformLive = ApiGroup.group(HubApi, "platform", (handlers) =>
  Effect.map(Platform, (platform) =>
    handlers
      .handle("status", () => platform.status)
      .handle("challenge", ({ payload }) => Effect.flatMap(clientIp, (ip) => Effect.mapError(platform.challenge(ip, payload), hubHttp)))
      .handle("agentKey", ({ payload }) => Effect.flatMap(clientIp, (ip) => Effect.mapError(platform.agentKey(ip, payload), hubHttp)))
  )
)


const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** A self-contained page listing every operation of the OpenAPI document (no external assets). */
export const docsPage = (doc: OpenApi.OpenAPISpec): string => {
  const rows = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item as Record<string, { summary?: string; description?: string; operationId?: string; responses?: Record<string, unknown> }>)
      .filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method))
      .map(([method, op]) =>
        `<tr><td class="m ${method}">${method.toUpperCase()}</td><td><code>${escapeHtml(path)}</code></td><td>${escapeHtml(op.operationId ?? "")}</td><td>${escapeHtml(Object.keys(op.responses ?? {}).join(" "))}</td></tr>`
      )
  )
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(doc.info.title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;color:#222}table{border-collapse:collapse}td,th{padding:.3rem .8rem;border-bottom:1px solid #ddd;text-align:left}
.m{font-weight:600}.get{color:#0a7}.post{color:#07c}.patch{color:#a60}.delete{color:#c33}code{font-size:13px}</style></head>
<body><h1>${escapeHtml(doc.info.title)} <small>${escapeHtml(doc.info.version)}</small></h1><p>${escapeHtml(doc.info.description ?? "")}</p>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a></p>
<table><thead><tr><th>method</th><th>path</th><th>operation</th><th>statuses</th></tr></thead><tbody>${rows.join("")}</tbody></table></body></html>`
}

// Building the document walks every schema of the contract (a good part of a hub's start-up): done on the first
// request for it, not before the hub listens.
const memo = <A>(make: () => A): (() => A) => {
  let value: { readonly a: A } | undefined = undefined
  return () => (value ??= { a: make() }).a
}

/** `/openapi.json` and `/docs`, both computed once from `HubApi`, when first asked for. */
export const DocsLive = ApiGroup.group(HubApi, "docs", (handlers) =>
  Effect.sync(() => {
    const doc = memo(() => OpenApi.fromApi(HubApi))
    const page = memo(() => docsPage(doc()))
    return handlers.handle("openapi", () => Effect.sync(doc)).handle("docs", () => Effect.sync(page))
  })
)

/** The same two for a platform-only process, computed from `PlatformApi`. */
const PlatformDocsLive = ApiGroup.group(PlatformApi, "docs", (handlers) =>
  Effect.sync(() => {
    const doc = memo(() => OpenApi.fromApi(PlatformApi))
    const page = memo(() => docsPage(doc()))
    return handlers.handle("openapi", () => Effect.sync(doc)).handle("docs", () => Effect.sync(page))
  })
)

/** The platform endpoints of a platform-only process, with its OpenAPI document. */
export const PlatformOnlyLive = Layer.merge(
  ApiGroup.group(PlatformApi, "platform", (handlers) =>
    Effect.map(Platform, (platform) =>
      handlers
        .handle("status", () => platform.status)
        .handle("challenge", ({ payload }) => Effect.flatMap(clientIp, (ip) => Effect.mapError(platform.challenge(ip, payload), hubHttp)))
        .handle("agentKey", ({ payload }) => Effect.flatMap(clientIp, (ip) => Effect.mapError(platform.agentKey(ip, payload), hubHttp)))
    )
  ),
  PlatformDocsLive
)

const HEALTHY = { status: "ok" } as const

const READY = { status: "ready" } as const

/** `/health`: a constant answer, so it costs the least any request can; `/ready`: the database answers; `/metrics`. */
export const HealthLive = ApiGroup.group(HubApi, "health", (handlers) =>
  Effect.map(Registry, (registry) =>
    handlers
      .handle("health", () => Effect.succeed(HEALTHY))
      .handle("ready", () =>
        Effect.flatMap(registry.ping, (up) => (up ? Effect.succeed(READY) : Effect.fail(new Unavailable({ code: "STORE_UNAVAILABLE", message: "the database does not answer" }))))
      )
      .handle("metrics", () => Metrics.served)
  ))

/** The learner statistics: read by anyone, published under the caller's key (its owner is the publisher). */
export const LearnerLive = ApiGroup.group(HubApi, "learner", (handlers) =>
  Effect.map(LearnerStatsStore, (store) => {
    const unavailable = (e: PersistenceError) => new Unavailable({ code: "STORE_UNAVAILABLE", message: `learner statistics: ${e.message}` })
    return handlers
      .handle("learnerStats", () => Effect.mapBoth(store.aggregate, { onFailure: unavailable, onSuccess: (stats) => ({ stats }) }))
      .handle("publishLearnerStats", ({ payload }) =>
        Effect.flatMap(Caller, (caller) =>
          Effect.mapBoth(store.publish(caller.owner, payload.stats), { onFailure: unavailable, onSuccess: (accepted) => ({ accepted }) })))
  }))

/** The hub's groups but its documents, for assemblies that serve a larger contract with a document of their own (`SagaHub`). */
export const GroupsLive = Layer.mergeAll(HealthLive, RegistryLive, KeysLive, SpendingLive, LearnerLive, PlatformLive, WebLive)

/** Every group of the hub, needing the services behind them. */
export const HandlersLive = Layer.mergeAll(GroupsLive, DocsLive).pipe(Layer.provide(ApiKeyAuthLive))
