/**
 * The hub's client library, generated from `HubApi`: registry, API keys, the agent-key challenge flow, mandate
 * revocation and the spending ledger (whose requests it signs with mesh-sig when given the pool mandate's grantee's
 * identity), plus a registry-backed `KeyResolver`. Failures carry the spec's codes;
 * REGISTRY_UNREACHABLE (the hub cannot be reached) and RATE_LIMITED are retried with backoff, honoring
 * `retryAfterSeconds`.
 *
 * Writes that need proof of possession are signed here, so callers only hand over the identity: registration is
 * signed by the key being registered, rotation by the current and the new key, update and deletion by the current
 * key, each for the origin of `hubUrl` (docs/hub.md, "Who may write what"). MCP servers and skills
 * registered without a DID get one generated here; the registry requires it.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { MeshIdentity } from "../core/Did.js"
import { didHash, extractPublicKey, verificationMethodId } from "../core/Did.js"
import { HubApi } from "./HubApi.js"
import { BadRequest, RegistryUnreachable } from "./HubError.js"
import { KeyNotFound, KeyResolver, type KeyResolverApi, KeyResolverUnavailable, type ResolvedKey } from "../core/KeyResolver.js"
import { Keys, type PrivateKeyInput } from "../core/Keys.js"
import { signRequest } from "../core/HttpSignature.js"
import { signMessage } from "../core/Proof.js"
import { deletionDocument, hubOrigin, registrationDocument, rotationDocument, updateDocument, WRITE_PROOF_PURPOSE } from "./RegistryWire.js"
import { toBase64, toHex, utf8 } from "../core/internal/bytes.js"
import { csprng, Entropy, type EntropyApi } from "../core/Entropy.js"
import * as HttpClientDefault from "../http/HttpClientDefault.js"

/** Client settings. */
export interface MeshClientOptions {
  /** The hub's base URL, e.g. `http://127.0.0.1:7700`. */
  readonly hubUrl: string
  /**
   * The hub's public URL (its `publicUrl`) when this client reaches it under another address, e.g. straight at the
   * listener behind a proxy. Write proofs name this hub's origin (default: the origin of `hubUrl`).
   */
  readonly publicHubUrl?: string
  /** The platform API's base URL when it runs apart from the hub (default: `hubUrl`). */
  readonly platformUrl?: string
  /** Default API key for calls that need one. */
  readonly apiKey?: string
  /** Retries of REGISTRY_UNREACHABLE and RATE_LIMITED (default 4), first delay (default 200 ms), cap (default 10 s). */
  readonly retry?: { readonly times?: number; readonly baseDelayMs?: number; readonly maxDelayMs?: number }
  /** How long resolved keys stay cached by `keyResolver` (default 30 s). */
  readonly keyCacheTtlMs?: number
  /**
   * Default identity for the spending ledger: its key signs each ledger request (mesh-sig), proving the caller acts
   * for that DID, the grantee of the pool's mandate. Not needed with an agent API key issued to that DID.
   */
  readonly identity?: MeshIdentity
}

/** How an agent update or deletion is authorized: the API key, and the identity whose current key signs the proof. */
export interface WriteAuth {
  readonly apiKey?: string
  /** The agent's identity (its current key). Default: the client's `identity` when it is that agent's. Only the admin credential may go without. */
  readonly identity?: MeshIdentity
}

/** How a ledger call proves it acts for the pool mandate's grantee: an API key bound to its DID, or its key's signature. */
export interface LedgerAuth {
  readonly apiKey?: string
  /** The grantee's identity; its private key signs the request. Default: the client's `identity`. */
  readonly identity?: MeshIdentity
}

/** Signs a request for `identity` (mesh-sig over method, absolute URL and body digest; fresh nonce, 60 s). */
export const signWith = (keys: Keys["Type"], identity: { readonly did: string; readonly privateKey: PrivateKeyInput }) => (req: HttpClientRequest.HttpClientRequest) =>
  Effect.gen(function* () {
    const url = Option.getOrUndefined(HttpClientRequest.toUrl(req))
    if (url === undefined) return yield* Effect.dieMessage(`cannot sign a request to ${req.url}`)
    const body = req.body._tag === "Uint8Array" ? req.body.body : new Uint8Array(0)
    const headers = yield* signRequest({ method: req.method, url: url.href, body }, { privateKey: identity.privateKey, keyId: verificationMethodId(identity.did) })
    return HttpClientRequest.setHeaders(req, headers)
  }).pipe(Effect.provideService(Keys, keys), Effect.orDie)

// The base URL is prepended inside transformClient, not by HttpApiClient's `baseUrl` (which runs last), so that a
// signer sees the absolute URL the request goes to.
const makeClient = (http: HttpClient.HttpClient, hubUrl: string, apiKey: string | undefined, sign?: (req: HttpClientRequest.HttpClientRequest) => Effect.Effect<HttpClientRequest.HttpClientRequest>) =>
  HttpApiClient.make(HubApi, {
    transformClient: (c) => {
      const based = HttpClient.mapRequest(c, HttpClientRequest.prependUrl(hubUrl))
      const keyed = apiKey === undefined ? based : HttpClient.mapRequest(based, HttpClientRequest.bearerToken(apiKey))
      return sign === undefined ? keyed : HttpClient.mapRequestEffect(keyed, sign)
    }
  }).pipe(Effect.provideService(HttpClient.HttpClient, http))

type Client = Effect.Effect.Success<ReturnType<typeof makeClient>>

const transport = (e: { readonly _tag: string; readonly message?: string }) =>
  e._tag === "RequestError" || e._tag === "ResponseError" || e._tag === "ParseError"
    ? new RegistryUnreachable({ code: "REGISTRY_UNREACHABLE", message: `hub unreachable or answered unexpectedly: ${e.message ?? e._tag}` })
    : e._tag === "HttpApiDecodeError"
      ? new BadRequest({ code: "INVALID_REQUEST", message: e.message ?? "the hub could not read the request" })
      : e

/** Maps transport failures to REGISTRY_UNREACHABLE and HttpApi's decode error to BadRequest, so every error has a `code`. */
type Mapped<E> =
  | Exclude<E, { readonly _tag: "RequestError" | "ResponseError" | "ParseError" | "HttpApiDecodeError" }>
  | RegistryUnreachable
  | BadRequest

// OVERLOADED is a request shed before its handler ran (docs/protocol.md §12), so repeating it cannot act twice.
const isRetryable = (e: unknown): e is { readonly code: "REGISTRY_UNREACHABLE" | "RATE_LIMITED" | "OVERLOADED"; readonly retryAfterSeconds?: number } =>
  typeof e === "object" && e !== null && "code" in e && (e.code === "REGISTRY_UNREACHABLE" || e.code === "RATE_LIMITED" || e.code === "OVERLOADED")

/** A fresh DID for an MCP server, skill or A2A agent: `did:mesh:<prefix>.<slug of the name>-<8 random hex>`, under `namespace.` when given. */
export const generatedDid = (prefix: "mcp" | "skill" | "a2a", name: string, namespace?: string, entropy: EntropyApi = csprng): string => {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "x"
  return `${namespace === undefined ? "did:mesh:" : `${namespace}.`}${prefix}.${slug}-${toHex(entropy.bytes(4))}`
}

/** Builds the client API over an `HttpClient`. */
export const make = (options: MeshClientOptions) =>
  Effect.gen(function* () {
    const http = yield* HttpClient.HttpClient
    const keys = yield* Keys
    const entropy = yield* Entropy
    const times = options.retry?.times ?? 4
    const base = options.retry?.baseDelayMs ?? 200
    const cap = options.retry?.maxDelayMs ?? 10_000
    const clients = new Map<string, Client>()
    // Signing clients are cached per identity object, weakly, so the client never keeps a private key alive.
    const signing = new WeakMap<MeshIdentity, Map<string, Client>>()
    const clientFor = (apiKey: string | undefined, url: string, signer?: MeshIdentity) =>
      Effect.suspend(() => {
        const id = `${url} ${apiKey ?? ""}`
        let cache = clients
        if (signer !== undefined) {
          cache = signing.get(signer) ?? new Map()
          signing.set(signer, cache)
        }
        const hit = cache.get(id)
        if (hit !== undefined) return Effect.succeed(hit)
        return Effect.tap(makeClient(http, url, apiKey, signer === undefined ? undefined : signWith(keys, signer)), (c) => Effect.sync(() => cache.set(id, c)))
      })

    /**
     * One call. Retried: a request that never reached the hub (RequestError), REGISTRY_UNREACHABLE, and RATE_LIMITED or
     * OVERLOADED (after `retryAfterSeconds`); not retried: an unreadable answer, since the hub may already have acted on it.
     * Transport failures then surface as REGISTRY_UNREACHABLE.
     */
    const call = <A, E>(apiKey: string | undefined, f: (c: Client) => Effect.Effect<A, E>, url = options.hubUrl, signer?: MeshIdentity): Effect.Effect<A, Mapped<E>> => {
      // A retry goes through the signer again, so it carries a fresh nonce.
      const once = Effect.flatMap(clientFor(apiKey, url, signer), f)
      const attempt = (n: number): Effect.Effect<A, Mapped<E>> =>
        Effect.catchAll(once, (e): Effect.Effect<A, Mapped<E>> => {
          const tag = (e as { readonly _tag?: unknown })._tag
          const limited = isRetryable(e) && (e.code === "RATE_LIMITED" || e.code === "OVERLOADED")
          // A typed REGISTRY_UNREACHABLE answer (a platform that could not reach its registry) did nothing: retry it too.
          if (!(tag === "RequestError" || isRetryable(e)) || n >= times) return Effect.fail(transport(e as never) as Mapped<E>)
          const wait = limited && e.retryAfterSeconds !== undefined ? e.retryAfterSeconds * 1000 : Math.min(cap, base * 2 ** n)
          return Effect.zipRight(Effect.sleep(Duration.millis(wait)), attempt(n + 1))
        })
      return attempt(0)
    }
    const key = (apiKey: string | undefined) => apiKey ?? options.apiKey
    // The hub applies a write proof once (docs/hub.md, "Who may write what") and Ed25519 signs deterministically, so
    // two identical writes need different `created` values: milliseconds, and never the same one twice from this
    // client (a write made in the same millisecond as the last is stamped a millisecond later).
    let lastCreatedMs = 0
    const nextCreated = Effect.map(Clock.currentTimeMillis, (now) => {
      lastCreatedMs = Math.max(now, lastCreatedMs + 1)
      return new Date(lastCreatedMs).toISOString()
    })
    /** A write proof (docs/hub.md) by the identity's `#key-1`; a key we hold always signs, so failure is a defect. */
    const prove = <T extends Record<string, unknown>>(document: T, identity: MeshIdentity) =>
      Effect.flatMap(nextCreated, (created) =>
        Effect.orDie(signMessage(document, identity.privateKey, verificationMethodId(identity.did), { proofPurpose: WRITE_PROOF_PURPOSE, created }).pipe(Effect.provideService(Keys, keys)))
      )
    const ledgerCall = <A, E>(auth: LedgerAuth, f: (c: Client) => Effect.Effect<A, E>) =>
      call(key(auth.apiKey), f, options.hubUrl, auth.identity ?? options.identity)
    const platformUrl = options.platformUrl ?? options.hubUrl
    // Write proofs name the hub they are for (its origin), so they cannot be replayed on another hub.
    const hub = hubOrigin(options.publicHubUrl ?? options.hubUrl) ?? options.publicHubUrl ?? options.hubUrl
    const signerFor = (h: string, auth: WriteAuth) =>
      auth.identity ?? (options.identity !== undefined && didHash(options.identity.did) === h ? options.identity : undefined)

    const api = {
      /** A pinned manifest by its CID. */
      manifest: (cid: string) => call(undefined, (c) => c.registry.getManifest({ path: { cid } })),
      /** Pins a manifest and returns its CID. */
      pinManifest: (manifest: unknown, apiKey?: string) => call(key(apiKey), (c) => c.registry.pinManifest({ payload: manifest })),
      /**
       * Pins the manifest, then registers the identity's DID and key at the endpoint, with a proof by that key. Without
       * `endpointUrl` the DID is registered as a caller only: its key resolves, nothing calls it.
       */
      registerAgent: (input: { readonly manifest: unknown; readonly endpointUrl?: string; readonly identity: MeshIdentity; readonly apiKey?: string }) =>
        Effect.gen(function* () {
          const { cid } = yield* call(key(input.apiKey), (c) => c.registry.pinManifest({ payload: input.manifest }))
          const fields = {
            did: input.identity.did,
            manifestCID: cid,
            publicKeyB64: input.identity.publicKey,
            ...(input.endpointUrl === undefined ? {} : { endpointUrl: input.endpointUrl })
          }
          const { proof } = yield* prove(registrationDocument({ ...fields, hub }), input.identity)
          return yield* call(key(input.apiKey), (c) => c.registry.registerAgent({ payload: { ...fields, proof } }))
        }),
      resolveAgent: (didHash: string) => call(undefined, (c) => c.registry.resolveAgent({ path: { didHash } })),
      /** A page of agents; `live` keeps only the live (true) or only the stale (false) ones. */
      listAgents: (input: { readonly limit?: number; readonly cursor?: string; readonly live?: boolean } = {}) =>
        call(undefined, (c) =>
          c.registry.listAgents({
            urlParams: {
              ...(input.limit === undefined ? {} : { limit: input.limit }),
              ...(input.cursor === undefined ? {} : { cursor: input.cursor }),
              ...(input.live === undefined ? {} : { live: input.live })
            }
          })
        ),
      /** Marks the agent live now (the API key that registered it, or the admin). */
      heartbeat: (h: string, apiKey?: string) => call(key(apiKey), (c) => c.registry.heartbeat({ path: { didHash: h } })),
      /** Changes the endpoint or manifest, signed by the agent's current key (`WriteAuth`) for the key version the registry holds now. */
      updateAgent: (h: string, patch: { readonly endpointUrl?: string; readonly manifestCID?: string }, auth: WriteAuth = {}) =>
        Effect.gen(function* () {
          const signer = signerFor(h, auth)
          let proof: object | undefined
          if (signer !== undefined) {
            const current = yield* call(undefined, (c) => c.registry.resolveAgent({ path: { didHash: h } }))
            proof = (yield* prove(updateDocument({ hub, did: current.did, keyVersion: current.keyVersion, ...patch }), signer)).proof
          }
          return yield* call(key(auth.apiKey), (c) => c.registry.updateAgent({ path: { didHash: h }, payload: { ...patch, ...(proof === undefined ? {} : { proof }) } }))
        }),
      /**
       * Rotates the DID of `newIdentity` to its key: signed by `identity` (the current key) and by the new key, for the
       * key version the registry holds now. Without `identity` only the admin credential is accepted (a lost key).
       */
      rotateAgentKey: (input: { readonly newIdentity: MeshIdentity; readonly identity?: MeshIdentity; readonly apiKey?: string }) =>
        Effect.gen(function* () {
          const path = { didHash: didHash(input.newIdentity.did) }
          const current = yield* call(undefined, (c) => c.registry.resolveAgent({ path }))
          const document = rotationDocument({ hub, did: current.did, keyVersion: current.keyVersion, publicKeyB64: input.newIdentity.publicKey })
          const newKeyProof = (yield* prove(document, input.newIdentity)).proof
          const proof = input.identity === undefined ? undefined : (yield* prove(document, input.identity)).proof
          return yield* call(key(input.apiKey), (c) =>
            c.registry.rotateAgentKey({ path, payload: { publicKeyB64: input.newIdentity.publicKey, newKeyProof, ...(proof === undefined ? {} : { proof }) } })
          )
        }),
      /** Deletes the agent (a tombstone stays), signed by its current key (`WriteAuth`). */
      deleteAgent: (h: string, auth: WriteAuth = {}) =>
        Effect.gen(function* () {
          const signer = signerFor(h, auth)
          let proof: object | undefined
          if (signer !== undefined) {
            const current = yield* call(undefined, (c) => c.registry.resolveAgent({ path: { didHash: h } }))
            proof = (yield* prove(deletionDocument({ hub, did: current.did, keyVersion: current.keyVersion }), signer)).proof
          }
          return yield* call(key(auth.apiKey), (c) => c.registry.deleteAgent({ path: { didHash: h }, payload: proof === undefined ? {} : { proof } }))
        }),
      /** Registers an MCP server; without `did`, one is generated (`did:mesh:mcp.<name>-<8 hex>`). */
      registerMcp: (input: { readonly name: string; readonly endpointUrl: string; readonly tools: ReadonlyArray<string | { readonly name: string; readonly inputSchema?: unknown }>; readonly did?: string; readonly apiKey?: string }) =>
        call(key(input.apiKey), (c) =>
          c.registry.registerMcp({ payload: { name: input.name, endpointUrl: input.endpointUrl, tools: input.tools, did: input.did ?? generatedDid("mcp", input.name, undefined, entropy) } })
        ),
      resolveMcp: (didHash: string) => call(undefined, (c) => c.registry.resolveMcp({ path: { didHash } })),
      /**
       * Registers an A2A agent from its card URL (the hub fetches the card and keeps it); without `did`, one is
       * generated (`did:mesh:a2a.<name>-<8 hex>`, the name taken from the URL's host).
       */
      registerA2a: (input: { readonly cardUrl: string; readonly did?: string; readonly apiKey?: string }) =>
        call(key(input.apiKey), (c) =>
          c.registry.registerA2a({ payload: { cardUrl: input.cardUrl, did: input.did ?? generatedDid("a2a", URL.canParse(input.cardUrl) ? new URL(input.cardUrl).hostname : "agent", undefined, entropy) } })
        ),
      /** An A2A agent's record, with the card the hub last fetched. */
      resolveA2a: (didHash: string) => call(undefined, (c) => c.registry.resolveA2a({ path: { didHash } })),
      /** Has the hub fetch the A2A agent's card again. */
      refreshA2a: (didHash: string, apiKey?: string) => call(key(apiKey), (c) => c.registry.refreshA2a({ path: { didHash } })),
      /** Registers a skill; without `did`, one is generated (`did:mesh:skill.<name>-<8 hex>`). */
      registerSkill: (input: { readonly name: string; readonly skillType?: "rag" | "web-search" | "memory" | "code" | "data" | "custom"; readonly did?: string; readonly apiKey?: string }) =>
        call(key(input.apiKey), (c) =>
          c.registry.registerSkill({
            payload: { name: input.name, ...(input.skillType === undefined ? {} : { skillType: input.skillType }), did: input.did ?? generatedDid("skill", input.name, undefined, entropy) }
          })
        ),
      resolveSkill: (didHash: string) => call(undefined, (c) => c.registry.resolveSkill({ path: { didHash } })),
      /** Searches the registry; `live` keeps only live (true) or only stale (false) agents. */
      search: (q: string, limit?: number, live?: boolean) =>
        call(undefined, (c) => c.registry.search({ urlParams: { q, ...(limit === undefined ? {} : { limit }), ...(live === undefined ? {} : { live }) } })),
      resolveDid: (did: string) => call(undefined, (c) => c.registry.resolveDid({ path: { did } })),
      /** Creates an API key (admin credential needed). */
      createApiKey: (input: { readonly owner: string; readonly label?: string; readonly apiKey?: string }) =>
        call(key(input.apiKey), (c) => c.keys.createKey({ payload: { owner: input.owner, ...(input.label === undefined ? {} : { label: input.label }) } })),
      revokeApiKey: (id: string, apiKey?: string) => call(key(apiKey), (c) => c.keys.revokeKey({ path: { id } })),
      /** The challenge flow: ask for a challenge bound to the identity, sign it, receive an API key. */
      requestAgentKey: (identity: MeshIdentity) =>
        Effect.gen(function* () {
          const ch = yield* call(undefined, (c) => c.platform.challenge({ payload: { did: identity.did, publicKeyB64: identity.publicKey } }), platformUrl)
          const signature = yield* keys.sign(identity.privateKey, utf8(ch.challenge))
          return yield* call(undefined, (c) => c.platform.agentKey({ payload: { challengeId: ch.challengeId, did: identity.did, signature: toBase64(signature) } }), platformUrl)
        }),
      status: call(undefined, (c) => c.platform.status(), platformUrl),
      /** Revokes a mandate the identity granted (a signed request); verification through the hub then fails it. */
      revokeMandate: (input: { readonly jti: string; readonly identity: MeshIdentity }) =>
        Effect.flatMap(
          Effect.orDie(signMessage({ type: "MandateRevocation", jti: input.jti, grantor: input.identity.did }, input.identity.privateKey, verificationMethodId(input.identity.did)).pipe(Effect.provideService(Keys, keys))),
          (signed) => call(undefined, (c) => c.registry.revokeMandate({ payload: signed }))
        ),
      isMandateRevoked: (jti: string, grantor: string) =>
        Effect.map(call(undefined, (c) => c.registry.mandateRevoked({ path: { jti }, urlParams: { grantor } })), (r) => r.revoked),
      /** Opens the pool of a parent mandate; the caller must prove it is the mandate's grantee (`LedgerAuth`). */
      openPool: (mandate: string, auth: LedgerAuth = {}) => ledgerCall(auth, (c) => c.spending.openPool({ payload: { mandate } })),
      /** The pools whose mandate was granted to the caller (`LedgerAuth`), oldest first. */
      listPools: (auth: LedgerAuth = {}) => Effect.map(ledgerCall(auth, (c) => c.spending.listPools()), (r) => r.items),
      /** Reads a pool (its mandate's grantee only). */
      getPool: (poolId: string, auth: LedgerAuth = {}) => ledgerCall(auth, (c) => c.spending.getPool({ path: { poolId } })),
      /** Allocates a child mandate from a pool (its mandate's grantee only). */
      allocate: (input: { readonly poolId: string; readonly childMandate: string; readonly idempotencyKey: string } & LedgerAuth) =>
        ledgerCall(input, (c) =>
          c.spending.allocate({ path: { poolId: input.poolId }, payload: { childMandate: input.childMandate, idempotencyKey: input.idempotencyKey } })
        ),
      /** Releases an allocation (the pool mandate's grantee only), with the agent's commit token for the work, if any. */
      release: (input: { readonly allocationId: string; readonly usedUsd: number | string; readonly commitToken?: string } & LedgerAuth) =>
        ledgerCall(input, (c) =>
          c.spending.release({
            path: { allocationId: input.allocationId },
            payload: { usedUsd: input.usedUsd, ...(input.commitToken === undefined ? {} : { commitToken: input.commitToken }) }
          })
        ),
      /** A pool with every allocation made from it, used amounts and commit tokens (its mandate's grantee only). */
      listAllocations: (poolId: string, auth: LedgerAuth = {}) => ledgerCall(auth, (c) => c.spending.listAllocations({ path: { poolId } }))
    }

    const ttl = options.keyCacheTtlMs ?? 30_000
    const cache = new Map<string, { readonly key: ResolvedKey; readonly until: number }>()
    // The clock of the client's construction, read directly: a cached key is answered without a fiber (a server
    // resolving a signed request's key keeps it on the calling stack, RunSync.ts).
    const clock = yield* Effect.clock
    /** A `KeyResolver` over the hub's did:mesh resolver, caching keys for `keyCacheTtlMs`; revocations are not cached. */
    const keyResolver: KeyResolverApi = {
      resolve: (did) =>
        Effect.suspend(() => {
          const now = clock.unsafeCurrentTimeMillis()
          const hit = cache.get(did)
          if (hit !== undefined && hit.until > now) return Effect.succeed(hit.key)
          return api.resolveDid(did).pipe(
            Effect.mapError((e) =>
              e.code === "NOT_FOUND" || e.code === "INVALID_DID"
                ? new KeyNotFound({ code: "KEY_NOT_FOUND", message: e.message, did })
                : new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: e.message, did })
            ),
            Effect.flatMap((r) => resolvedFromDocument(did, r.document, r.keyVersion)),
            Effect.tap((k) => Effect.sync(() => cache.set(did, { key: k, until: now + ttl })))
          )
        }),
      // A revocation list we cannot read must not let a revoked mandate through.
      isMandateRevoked: (jti, issuer) => Effect.orElseSucceed(api.isMandateRevoked(jti, issuer), () => true)
    }
    return { ...api, keyResolver }
  })

const resolvedFromDocument = (did: string, document: unknown, keyVersion: number) =>
  Effect.map(
    // The key of the DID that was asked for (not of whatever document came back); a revoked key stays KeyRevoked.
    // A refused key (INVALID_PUBLIC_KEY) is no usable key: nothing signed under it may verify.
    Effect.catchTags(extractPublicKey(document, verificationMethodId(did)), {
      MalformedDidDocument: (e) => Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: e.message, did })),
      MalformedKey: (e) => Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `${e.code}: ${e.message}`, did }))
    }),
    (publicKey): ResolvedKey => ({ publicKey, keyVersion })
  )

/** The operations of the client. */
export type MeshClientApi = Effect.Effect.Success<ReturnType<typeof make>>

/** The `MeshClient` service. */
export class MeshClient extends Context.Tag("agent-mesh/MeshClient")<MeshClient, MeshClientApi>() {}

/** The client on the `HttpClient` in context, else the platform's fetch (`HttpClientDefault`); needs `Keys`. */
export const layer = (options: MeshClientOptions): Layer.Layer<MeshClient, never, Keys> =>
  Layer.effect(MeshClient, make(options)).pipe(Layer.provide(HttpClientDefault.layer))

/** A `KeyResolver` backed by the hub (cached), so mandates and envelopes verify against the registry. */
export const layerKeyResolver = (options: MeshClientOptions): Layer.Layer<KeyResolver, never, Keys> =>
  Layer.effect(KeyResolver, Effect.map(make(options), (c) => c.keyResolver)).pipe(Layer.provide(HttpClientDefault.layer))
