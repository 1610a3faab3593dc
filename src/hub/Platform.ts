/**
 * The platform API's rules: status, and the agent-key challenge exchange. An agent asks for a challenge bound to
 * its DID and public key (valid 5 minutes, single use), signs the exact challenge string (UTF-8) with that key, and
 * receives an API key. The platform reaches the registry through `RegistryGateway`: in process (`mesh hub`) or over
 * HTTP when it runs apart, failing with REGISTRY_UNREACHABLE when it cannot.
 *
 * Payloads are read here rather than by a schema, so every refusal carries the spec's platform code: an empty body
 * is INVALID_JSON, a missing DID INVALID_DID, a weak or missing key INVALID_PUBLIC_KEY. Keys are compared as bytes
 * (padded or not), and the registered key is checked again when the challenge is answered, since it may have been
 * rotated in between.
 *
 * Its failures are named after what happened (`EmptyBody`, `InvalidChallenge`, `RegistryNotReached`, and the
 * registry's `InvalidDid`, `InvalidSignature`, …), each with the spec's code; `HubHttp` chooses the status.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { decodePublicKeyMultibase, normalizeDid } from "../core/Did.js"
import { Keys } from "../core/Keys.js"
import * as MeshClient from "./MeshClient.js"
import * as RateLimiter from "./RateLimiter.js"
import { InvalidDid, InvalidPublicKey, InvalidSignature, LimitReached, Registry, RegistryUnavailable } from "./Registry.js"
import { RegistryStore, type ChallengeRow } from "../sql/RegistryStore.js"
import { VERSION } from "../core/Version.js"
import { equalBytes, fromBase64, toBase64, toBase64Url, utf8 } from "../core/internal/bytes.js"
import { Entropy } from "../core/Entropy.js"
import { acceptablePublicKeyB64, decodePublicKeyB64 } from "../core/internal/ed25519.js"

/** The request body is empty (`INVALID_JSON`): the platform reads its payloads itself, and an empty one is no JSON. */
export class EmptyBody extends Schema.TaggedError<EmptyBody>()("EmptyBody", { code: Schema.Literal("INVALID_JSON"), message: Schema.String }) {}

/** The challenge is unknown, used, expired, issued to another DID, or its key is no longer the DID's (`CHALLENGE_INVALID`). */
export class InvalidChallenge extends Schema.TaggedError<InvalidChallenge>()("InvalidChallenge", { code: Schema.Literal("CHALLENGE_INVALID"), message: Schema.String }) {}

/** The platform runs apart from the registry and could not reach it, or the registry refused it (`REGISTRY_UNREACHABLE`). */
export class RegistryNotReached extends Schema.TaggedError<RegistryNotReached>()("RegistryNotReached", { code: Schema.Literal("REGISTRY_UNREACHABLE"), message: Schema.String }) {}

/** Every way a platform operation fails; the registry's own errors keep their names. */
export type PlatformError = EmptyBody | InvalidChallenge | RegistryNotReached | InvalidDid | InvalidPublicKey | InvalidSignature | LimitReached | RegistryUnavailable

/** How long a challenge may be answered. */
export const CHALLENGE_TTL_MS = 5 * 60_000

/** Where the platform finds the registry. */
export interface RegistryGatewayApi {
  readonly mode: "local" | "remote"
  readonly ping: Effect.Effect<boolean>
  /** Mints an API key owned by the agent's DID. */
  readonly issueAgentKey: (did: string) => Effect.Effect<{ readonly apiKey: string; readonly keyId: string }, RegistryNotReached | RegistryUnavailable>
  /** The publicKeyB64 the registry holds for a DID, if the DID is registered. */
  readonly registeredKey: (did: string) => Effect.Effect<Option.Option<string>, RegistryNotReached | RegistryUnavailable>
  /** Keeps a challenge until it is answered or expires. */
  readonly saveChallenge: (row: ChallengeRow) => Effect.Effect<void, RegistryNotReached | RegistryUnavailable>
  /** Takes an unused, unexpired challenge, marking it used. */
  readonly takeChallenge: (id: string, now: number) => Effect.Effect<Option.Option<ChallengeRow>, RegistryNotReached | RegistryUnavailable>
}

/** The `RegistryGateway` service. */
export class RegistryGateway extends Context.Tag("agent-mesh/RegistryGateway")<RegistryGateway, RegistryGatewayApi>() {}

/** The registry in the same process: challenges in its database, so several hub processes share them. */
export const layerLocalGateway: Layer.Layer<RegistryGateway, never, Registry | RegistryStore> = Layer.effect(
  RegistryGateway,
  Effect.gen(function* () {
    const registry = yield* Registry
    const store = yield* RegistryStore
    return {
      mode: "local",
      ping: registry.ping,
      issueAgentKey: (did) => Effect.map(registry.createApiKey(did, "agent", "challenge exchange"), (k) => ({ apiKey: k.apiKey, keyId: k.id })),
      registeredKey: (did) =>
        registry.resolveDid(did).pipe(
          Effect.map((r) => Option.some(toBase64(r.publicKey))),
          Effect.catchTags({ DidNotRegistered: () => Effect.succeedNone, InvalidDid: () => Effect.succeedNone })
        ),
      saveChallenge: (row) => Effect.mapError(store.insertChallenge(row), RegistryUnavailable.of),
      takeChallenge: (id, now) => Effect.mapError(store.consumeChallenge(id, now), RegistryUnavailable.of)
    }
  })
)

/** Rate limits of the platform's challenge endpoints, per client address. */
export interface PlatformOptions {
  readonly rateLimit?: RateLimiter.RateLimitOptions
}

/** Default: bursts of 20, 60 a minute per address. */
export const DEFAULT_RATE_LIMIT: RateLimiter.RateLimitOptions = { capacity: 20, perMinute: 60 }

/** The operations of the platform. */
export interface PlatformApi {
  readonly status: Effect.Effect<{ readonly status: "ok" | "degraded"; readonly version: string; readonly registry: { readonly reachable: boolean; readonly mode: "local" | "remote" } }>
  /** `input` is the request body as parsed (undefined when empty): `{ did, publicKeyB64 }`. */
  readonly challenge: (
    clientIp: string,
    input: unknown
  ) => Effect.Effect<{ readonly challengeId: string; readonly challenge: string; readonly expiresAt: string }, EmptyBody | InvalidDid | InvalidPublicKey | LimitReached | RegistryNotReached | RegistryUnavailable>
  /** `input` is the request body as parsed (undefined when empty): `{ challengeId, did, signature }`. */
  readonly agentKey: (
    clientIp: string,
    input: unknown
  ) => Effect.Effect<{ readonly apiKey: string; readonly keyId: string; readonly did: string }, EmptyBody | InvalidDid | InvalidChallenge | InvalidSignature | LimitReached | RegistryNotReached | RegistryUnavailable>
}

/** The `Platform` service. */
export class Platform extends Context.Tag("agent-mesh/Platform")<Platform, PlatformApi>() {}

/** The bytes of an acceptable key (32 bytes, canonical, not small-order), padded or not; undefined otherwise. */

/** A member of a parsed body, when the body is an object. */
const member = (body: unknown, name: string): unknown =>
  typeof body === "object" && body !== null && !Array.isArray(body) && Object.hasOwn(body, name) ? (body as Record<string, unknown>)[name] : undefined

const emptyBody = () => new EmptyBody({ code: "INVALID_JSON", message: "the request body is empty; send a JSON object" })
const invalidDid = (given: unknown) =>
  new InvalidDid({ code: "INVALID_DID", message: given === undefined ? "did is missing" : `${JSON.stringify(given)} is not a did:mesh DID` })

/** The exact text an agent signs: one field a line, so nothing in it can be read two ways. */
export const challengeText = (did: string, publicKeyB64: string, nonce: string, expiresAtIso: string): string =>
  `agent-mesh agent-key challenge v1\ndid: ${did}\npublicKey: ${publicKeyB64}\nnonce: ${nonce}\nexpires: ${expiresAtIso}`

/** Builds the platform over a gateway. */
export const make = (options: PlatformOptions = {}): Effect.Effect<PlatformApi, never, RegistryGateway | Keys> =>
  Effect.gen(function* () {
    const gateway = yield* RegistryGateway
    const keys = yield* Keys
    const limiter = yield* RateLimiter.limiter("platform", options.rateLimit ?? DEFAULT_RATE_LIMIT)
    const limit = (ip: string) =>
      Effect.mapError(limiter.take(ip), (e) => LimitReached.of("too many requests", e.retryAfterSeconds))
    const challengeInvalid = (message: string) => new InvalidChallenge({ code: "CHALLENGE_INVALID", message })
    /** True when the DID is unregistered or registered with exactly these key bytes. */
    const matchesRegistered = (did: string, publicKey: Uint8Array) =>
      Effect.map(gateway.registeredKey(did), (registered) =>
        Option.match(registered, { onNone: () => true, onSome: (b64) => equalBytes(decodePublicKeyB64(b64) ?? new Uint8Array(), publicKey) })
      )

    return {
      status: Effect.map(gateway.ping, (reachable) => ({ status: reachable ? ("ok" as const) : ("degraded" as const), version: VERSION, registry: { reachable, mode: gateway.mode } })),
      challenge: (ip, input) =>
        Effect.gen(function* () {
          yield* limit(ip)
          if (input === undefined) return yield* Effect.fail(emptyBody())
          const did = normalizeDid(member(input, "did"))
          if (did === undefined) return yield* Effect.fail(invalidDid(member(input, "did")))
          const publicKey = acceptablePublicKeyB64(member(input, "publicKeyB64"))
          if (publicKey === undefined) {
            return yield* Effect.fail(new InvalidPublicKey({ code: "INVALID_PUBLIC_KEY", message: "publicKeyB64 must be standard base64 of a raw 32-byte Ed25519 key, canonical and not of small order" }))
          }
          // A registered DID gets keys only for the key the registry holds: anyone could otherwise mint keys in its name.
          if (!(yield* matchesRegistered(did, publicKey))) {
            return yield* Effect.fail(new InvalidPublicKey({ code: "INVALID_PUBLIC_KEY", message: `${did} is registered with another key` }))
          }
          const now = yield* Clock.currentTimeMillis
          const expiresAt = now + CHALLENGE_TTL_MS
          const entropy = yield* Entropy
          const id = `ch_${toBase64Url(entropy.bytes(16))}`
          const publicKeyB64 = toBase64(publicKey)
          const challenge = challengeText(did, publicKeyB64, toBase64Url(entropy.bytes(32)), new Date(expiresAt).toISOString())
          yield* gateway.saveChallenge({ id, did, public_key_b64: publicKeyB64, challenge, expires_at: expiresAt, used_at: null })
          return { challengeId: id, challenge, expiresAt: new Date(expiresAt).toISOString() }
        }),
      agentKey: (ip, input) =>
        Effect.gen(function* () {
          yield* limit(ip)
          if (input === undefined) return yield* Effect.fail(emptyBody())
          const did = normalizeDid(member(input, "did"))
          if (did === undefined) return yield* Effect.fail(invalidDid(member(input, "did")))
          const challengeId = member(input, "challengeId")
          if (typeof challengeId !== "string") return yield* Effect.fail(challengeInvalid("challengeId is missing"))
          const signatureText = member(input, "signature")
          const now = yield* Clock.currentTimeMillis
          // Taking the challenge marks it used whatever follows: a wrong answer burns it, so it cannot be guessed at.
          const row = yield* gateway.takeChallenge(challengeId, now)
          if (Option.isNone(row)) return yield* Effect.fail(challengeInvalid("unknown, used or expired challenge"))
          if (row.value.did !== did) return yield* Effect.fail(challengeInvalid("the challenge was issued to another DID"))
          let signature: Uint8Array
          try {
            if (typeof signatureText !== "string") throw new TypeError("missing")
            signature = fromBase64(signatureText)
          } catch {
            return yield* Effect.fail(new InvalidSignature({ code: "SIGNATURE_INVALID", message: "signature is missing or not base64" }))
          }
          const publicKey = acceptablePublicKeyB64(row.value.public_key_b64)
          const ok = publicKey !== undefined && (yield* Effect.orElseSucceed(keys.verify(publicKey, utf8(row.value.challenge), signature), () => false))
          if (!ok) return yield* Effect.fail(new InvalidSignature({ code: "SIGNATURE_INVALID", message: "signature over the challenge does not verify under the bound key" }))
          // The DID may have been registered, or its key rotated, since the challenge was issued: the key it was bound
          // to must still be the DID's key now.
          if (!(yield* matchesRegistered(did, publicKey))) {
            return yield* Effect.fail(challengeInvalid(`the key of ${did} changed after the challenge was issued; request a fresh one`))
          }
          const issued = yield* gateway.issueAgentKey(did)
          return { ...issued, did }
        })
    }
  })

/** How often expired and used challenges are deleted, and how many per statement. */
export interface ChallengePurgeOptions {
  /** Time between purges (default 60 s). */
  readonly intervalMs?: number
  /** Rows deleted per statement (default 1000); a purge repeats the statement until a batch comes back short. */
  readonly batch?: number
}

/** Default purge: every minute, 1000 rows a statement. */
export const DEFAULT_CHALLENGE_PURGE = { intervalMs: 60_000, batch: 1000 } as const

/**
 * One purge: deletes challenges that are expired or already used, a batch per statement so the database is never
 * held for long, until a batch comes back short (at most 100 batches a run). Returns the rows deleted.
 */
export const purgeChallenges = (batch: number = DEFAULT_CHALLENGE_PURGE.batch): Effect.Effect<number, never, RegistryStore> =>
  Effect.gen(function* () {
    const store = yield* RegistryStore
    const now = yield* Clock.currentTimeMillis
    let total = 0
    for (let i = 0; i < 100; i++) {
      const n = yield* store.purgeChallenges(now, batch)
      total += n
      if (n < batch) break
    }
    return total
  }).pipe(
    // A failed purge is retried at the next interval; it must not stop the schedule.
    Effect.catchAll((e) => Effect.as(Effect.logWarning("challenge purge failed", e.message), 0))
  )

/**
 * Deletes spent challenges on a schedule while the layer lives: without it every challenge ever issued stays in the
 * database (a challenge is only useful for `CHALLENGE_TTL_MS`).
 */
export const layerChallengePurge = (options: ChallengePurgeOptions = {}): Layer.Layer<never, never, RegistryStore> =>
  Layer.scopedDiscard(
    Effect.forkScoped(
      Effect.repeat(purgeChallenges(options.batch ?? DEFAULT_CHALLENGE_PURGE.batch), Schedule.spaced(options.intervalMs ?? DEFAULT_CHALLENGE_PURGE.intervalMs)).pipe(
        Effect.delay(options.intervalMs ?? DEFAULT_CHALLENGE_PURGE.intervalMs)
      )
    )
  )

/** The platform layer. */
export const layer = (options: PlatformOptions = {}): Layer.Layer<Platform, never, RegistryGateway | Keys> => Layer.effect(Platform, make(options))


/** The raw key of a resolved DID document, as publicKeyB64. */
const registeredKeyOf = (document: unknown): string | undefined => {
  const vm = (document as { verificationMethod?: ReadonlyArray<{ publicKeyMultibase?: string }> } | undefined)?.verificationMethod?.[0]
  const key = vm?.publicKeyMultibase === undefined ? undefined : decodePublicKeyMultibase(vm.publicKeyMultibase)
  return key === undefined ? undefined : toBase64(key)
}

/** Challenges kept in this process only (a platform apart from the registry), bounded and swept when full. */
const memoryChallenges = (max = 10_000) => {
  const rows = new Map<string, ChallengeRow>()
  return {
    save: (row: ChallengeRow, now: number) => {
      if (rows.size >= max) for (const [id, r] of rows) if (r.expires_at <= now || r.used_at !== null) rows.delete(id)
      if (rows.size >= max) rows.delete(rows.keys().next().value as string)
      rows.set(row.id, row)
    },
    take: (id: string, now: number): Option.Option<ChallengeRow> => {
      const row = rows.get(id)
      rows.delete(id)
      return row !== undefined && row.used_at === null && row.expires_at > now ? Option.some(row) : Option.none()
    }
  }
}

/** What a platform apart from the registry needs to reach it. */
export interface RemoteRegistryOptions {
  /** The registry hub's URL. */
  readonly registryUrl: string
  /** An admin credential of that hub, used to mint agents' API keys. */
  readonly apiKey: string
}

/**
 * The registry over HTTP, for a platform running as its own process. Failures to reach it are
 * REGISTRY_UNREACHABLE (502); challenges live in this process.
 */
export const layerRemoteGateway = (options: RemoteRegistryOptions): Layer.Layer<RegistryGateway, never, Keys> =>
  Layer.effect(
    RegistryGateway,
    Effect.gen(function* () {
      const client = yield* MeshClient.make({ hubUrl: options.registryUrl, apiKey: options.apiKey, retry: { times: 1, baseDelayMs: 100 } })
      const challenges = memoryChallenges()
      const unreachable = (message: string) => new RegistryNotReached({ code: "REGISTRY_UNREACHABLE", message })
      return {
        mode: "remote" as const,
        ping: Effect.match(client.status, { onFailure: () => false, onSuccess: () => true }),
        issueAgentKey: (did: string) =>
          client.createApiKey({ owner: did, label: "challenge exchange" }).pipe(
            Effect.map((k) => ({ apiKey: k.apiKey, keyId: k.id })),
            Effect.catchAll((e) =>
              Effect.fail(e._tag === "RegistryUnreachable" || e._tag === "Unavailable" ? unreachable(e.message) : unreachable(`registry refused to mint a key: ${e.message}`))
            )
          ),
        registeredKey: (did: string) =>
          client.resolveDid(did).pipe(
            Effect.map((r) => Option.fromNullable(registeredKeyOf(r.document))),
            Effect.catchAll((e) => (e._tag === "NotFound" || e._tag === "Unprocessable" ? Effect.succeedNone : Effect.fail(unreachable(e.message))))
          ),
        saveChallenge: (row: ChallengeRow) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => challenges.save(row, now))),
        takeChallenge: (id: string, now: number) => Effect.sync(() => challenges.take(id, now))
      }
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
