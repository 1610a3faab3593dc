/**
 * The hub's registry rules over `RegistryStore`: API keys (random 256-bit, stored as SHA-256, compared in constant
 * time), content-addressed manifests (CIDv1), agents, MCP servers and skills by didHash, the did:mesh resolver and
 * mandate revocation signed by the grantor.
 *
 * Who may write what (docs/hub.md, "Who may write what"): registering an agent needs a proof by the key being
 * registered, rotating needs proofs by the current and the new key, and updating or deleting a proof by the current
 * key, because a bearer key alone (anyone can get one from the challenge exchange) must not be enough to claim, change
 * or take over a DID. Every proof names the hub it is meant for, so it cannot be replayed on another hub, and an
 * applied proof is refused by every hub on the database for the rest of its freshness window. A key issued to a DID (`agent` kind) registers
 * only that DID, and MCP servers and skills only under it (`<did>.<name>`) once it registered that DID's agent. Writes are counted per API key, per DID of agent keys and per client address in fixed
 * windows kept in the database (shared by the hubs on it); a deleted agent leaves a tombstone so its key version never restarts at 1 and nothing else takes its DID.
 *
 * The registry fails with errors named after what happened (`DidTaken`, `NotOwner`, `InvalidSignature`, …), each
 * carrying the spec's `code`; it knows no HTTP (`HubHttp` chooses the status). Callers reach it as a `Caller` built
 * from the key row once, in `authenticate`, so the store's row never leaves this module.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { CID } from "multiformats/cid"
import * as Digest from "multiformats/hashes/digest"
import { canonicalBytes } from "../core/Canonical.js"
import { type DidDocument, didHash, makeDidDocument, normalizeDid, verificationMethodId } from "../core/Did.js"
import { Keys, type KeysApi } from "../core/Keys.js"
import { verifyMessage } from "../core/Proof.js"
import * as RateLimiter from "./RateLimiter.js"
import { type ApiKeyRow, type EntryKind, type EntryRow, RegistryStore, type RegistryStoreApi } from "../sql/RegistryStore.js"
import { PersistenceError, summarize } from "../sql/SqlFailure.js"
import { MESH_PROTOCOL_VERSION } from "../core/Version.js"
import { equalBytes, toBase64, toBase64Url, toHex, utf8 } from "../core/internal/bytes.js"
import { Entropy } from "../core/Entropy.js"
import { acceptablePublicKeyB64, canonicalPublicKeyB64, decodePublicKeyB64 } from "../core/internal/ed25519.js"
import { Lru } from "../core/internal/lru.js"
import { tryParseJsonStrict } from "../core/internal/json.js"
import { cardSigners, verifyCardSigner } from "../core/A2aCardSignature.js"
import {
  A2aRecord,
  AgentRecord,
  deletionDocument,
  Heartbeat,
  hubOrigin,
  McpRecord,
  McpTool,
  registrationDocument,
  rotationDocument,
  SearchHit,
  SkillRecord,
  SkillType,
  updateDocument,
  WRITE_PROOF_PURPOSE
} from "./RegistryWire.js"

export {
  A2aRecord,
  AgentRecord,
  deletionDocument,
  Heartbeat,
  hubOrigin,
  McpRecord,
  McpTool,
  registrationDocument,
  rotationDocument,
  SearchHit,
  SkillRecord,
  SkillType,
  updateDocument,
  WRITE_PROOF_PURPOSE
} from "./RegistryWire.js"

/** After this long without a registration, update or heartbeat an agent counts as stale (docs/hub.md, "Liveness"). */
export const DEFAULT_STALE_AFTER_MS = 90_000
/** How often `mesh agent --register` sends a heartbeat: a third of the stale interval, so two may be lost. */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 30_000

/**
 * Size limits of search and of registration. Search reads an index of bounded fields (migration 0010) and pages are
 * bounded, so no query's cost grows with what was registered; registration refuses records over these sizes with
 * 413 `PAYLOAD_TOO_LARGE`, so no record can make reading or indexing it expensive (docs/hub.md, "Limits").
 */
export interface RegistryLimitsConfig {
  /** Longest search query `q`, in characters (UTF-16 code units); longer is 400 `INVALID_REQUEST`. */
  readonly maxQueryLength: number
  /** Most whitespace-separated terms in `q`; more is 400 `INVALID_REQUEST`. */
  readonly maxQueryTerms: number
  /** Most hits in one search answer (`limit` is clamped to it). */
  readonly maxSearchResults: number
  /** Per-address token bucket of `GET /v1/search`; over it, 429 `RATE_LIMITED` with `Retry-After`. */
  readonly searchRateLimit: RateLimiter.RateLimitOptions
  /** Largest manifest, in bytes of its JCS form. */
  readonly maxManifestBytes: number
  /** Most tools of one MCP server. */
  readonly maxTools: number
  /** Largest single tool (`{ name, inputSchema }` as JSON), in bytes. */
  readonly maxToolBytes: number
  /** Largest tool list of one MCP server (as JSON), in bytes. */
  readonly maxToolListBytes: number
  /** Longest tool name, in characters. */
  readonly maxToolNameLength: number
  /** Longest MCP server or skill name, in characters. */
  readonly maxNameLength: number
}

/** The defaults of `RegistryLimitsConfig`. */
export const DEFAULT_LIMITS: RegistryLimitsConfig = {
  maxQueryLength: 256,
  maxQueryTerms: 16,
  maxSearchResults: 100,
  searchRateLimit: { capacity: 30, perMinute: 120 },
  maxManifestBytes: 64 * 1024,
  maxTools: 256,
  maxToolBytes: 4 * 1024,
  maxToolListBytes: 64 * 1024,
  maxToolNameLength: 128,
  maxNameLength: 256
}

/**
 * The trigram index matches a term only from three characters on (a shorter term would match nothing), so shorter
 * terms are dropped and a query with none left is refused rather than silently empty.
 */
export const MIN_TERM_LENGTH = 3

/** A missing, unknown, revoked or malformed API key (`INVALID_API_KEY`). */
export class InvalidApiKey extends Schema.TaggedError<InvalidApiKey>()("InvalidApiKey", { code: Schema.Literal("INVALID_API_KEY"), message: Schema.String }) {}

/** The operation needs the admin credential (`ADMIN_REQUIRED`). */
export class AdminRequired extends Schema.TaggedError<AdminRequired>()("AdminRequired", { code: Schema.Literal("ADMIN_REQUIRED"), message: Schema.String }) {}

/** The API key did not register the record, or is bound to another DID (`NOT_OWNER`). */
export class NotOwner extends Schema.TaggedError<NotOwner>()("NotOwner", { code: Schema.Literal("NOT_OWNER"), message: Schema.String }) {}

/** No API key under that id (`NOT_FOUND`). */
export class ApiKeyNotFound extends Schema.TaggedError<ApiKeyNotFound>()("ApiKeyNotFound", { code: Schema.Literal("NOT_FOUND"), message: Schema.String }) {}

/** No manifest pinned under that CID (`NOT_FOUND`). */
export class ManifestNotFound extends Schema.TaggedError<ManifestNotFound>()("ManifestNotFound", { code: Schema.Literal("NOT_FOUND"), message: Schema.String }) {}

/** No agent, MCP server or skill (`kind`) under that didHash (`NOT_FOUND`). */
export class EntryNotFound extends Schema.TaggedError<EntryNotFound>()("EntryNotFound", {
  code: Schema.Literal("NOT_FOUND"),
  message: Schema.String,
  kind: Schema.Literal("agent", "mcp", "skill", "a2a")
}) {}

/** The DID has no key registered here (`NOT_FOUND`). */
export class DidNotRegistered extends Schema.TaggedError<DidNotRegistered>()("DidNotRegistered", { code: Schema.Literal("NOT_FOUND"), message: Schema.String }) {}

/** The API key was already revoked (`ALREADY_REVOKED`). */
export class ApiKeyAlreadyRevoked extends Schema.TaggedError<ApiKeyAlreadyRevoked>()("ApiKeyAlreadyRevoked", { code: Schema.Literal("ALREADY_REVOKED"), message: Schema.String }) {}

/** The grantor already revoked that mandate (`ALREADY_REVOKED`). */
export class MandateAlreadyRevoked extends Schema.TaggedError<MandateAlreadyRevoked>()("MandateAlreadyRevoked", { code: Schema.Literal("ALREADY_REVOKED"), message: Schema.String }) {}

/** The DID is registered already, or was deleted and may come back only under its last key (`DID_TAKEN`). */
export class DidTaken extends Schema.TaggedError<DidTaken>()("DidTaken", { code: Schema.Literal("DID_TAKEN"), message: Schema.String }) {}

/** A manifest (or an MCP server's or skill's name) the registry cannot take (`INVALID_MANIFEST`). */
export class InvalidManifest extends Schema.TaggedError<InvalidManifest>()("InvalidManifest", { code: Schema.Literal("INVALID_MANIFEST"), message: Schema.String }) {}

/** The manifest CID named is not pinned here (`MANIFEST_NOT_PINNED`). */
export class ManifestNotPinned extends Schema.TaggedError<ManifestNotPinned>()("ManifestNotPinned", { code: Schema.Literal("MANIFEST_NOT_PINNED"), message: Schema.String }) {}

/** The endpoint is not an http(s) URL (`INVALID_ENDPOINT`). */
export class InvalidEndpoint extends Schema.TaggedError<InvalidEndpoint>()("InvalidEndpoint", { code: Schema.Literal("INVALID_ENDPOINT"), message: Schema.String }) {}

/** The public key is not an acceptable raw Ed25519 key, or not the one the DID is registered with (`INVALID_PUBLIC_KEY`). */
export class InvalidPublicKey extends Schema.TaggedError<InvalidPublicKey>()("InvalidPublicKey", { code: Schema.Literal("INVALID_PUBLIC_KEY"), message: Schema.String }) {}

/** The DID is missing or not a did:mesh DID (`INVALID_DID`). */
export class InvalidDid extends Schema.TaggedError<InvalidDid>()("InvalidDid", { code: Schema.Literal("INVALID_DID"), message: Schema.String }) {}

/** A proof or signature is missing, does not verify, is stale, was used already, or names no hub (`SIGNATURE_INVALID`). */
export class InvalidSignature extends Schema.TaggedError<InvalidSignature>()("InvalidSignature", { code: Schema.Literal("SIGNATURE_INVALID"), message: Schema.String }) {}

/** A rate limit or write quota is spent; retry after `retryAfterSeconds` (`RATE_LIMITED`). */
export class LimitReached extends Schema.TaggedError<LimitReached>()("LimitReached", {
  code: Schema.Literal("RATE_LIMITED"),
  message: Schema.String,
  retryAfterSeconds: Schema.Number
}) {
  /** `what` ran out; the message says when to retry, as every limit and quota of the hub words it. */
  static of(what: string, retryAfterSeconds: number): LimitReached {
    return new LimitReached({ code: "RATE_LIMITED", message: `${what}; retry in ${retryAfterSeconds} s`, retryAfterSeconds })
  }
}

/** An A2A agent card the hub could not fetch, or not read as a card (`CARD_UNREACHABLE`, `INVALID_CARD`). */
export class InvalidCard extends Schema.TaggedError<InvalidCard>()("InvalidCard", { code: Schema.Literal("CARD_UNREACHABLE", "INVALID_CARD"), message: Schema.String }) {}

/** A record over the registry's size limits (`PAYLOAD_TOO_LARGE`). */
export class RecordTooLarge extends Schema.TaggedError<RecordTooLarge>()("RecordTooLarge", { code: Schema.Literal("PAYLOAD_TOO_LARGE"), message: Schema.String }) {}

/** A search query that is too long, has too many terms or no usable one (`INVALID_REQUEST`). */
export class InvalidQuery extends Schema.TaggedError<InvalidQuery>()("InvalidQuery", { code: Schema.Literal("INVALID_REQUEST"), message: Schema.String }) {}

/** A revocation request without the fields of `RevocationRequest` (`MISSING_FIELD`). */
export class MalformedRevocation extends Schema.TaggedError<MalformedRevocation>()("MalformedRevocation", { code: Schema.Literal("MISSING_FIELD"), message: Schema.String }) {}

/** The registry's database failed (`cause` is the classified `PersistenceError`); retry (`STORE_UNAVAILABLE`). */
export class RegistryUnavailable extends Schema.TaggedError<RegistryUnavailable>()("RegistryUnavailable", {
  code: Schema.Literal("STORE_UNAVAILABLE"),
  message: Schema.String,
  cause: Schema.optional(Schema.instanceOf(PersistenceError))
}) {
  /** The registry's answer to a failed store: the classified failure summarized, and kept as the cause. */
  static of(cause: PersistenceError): RegistryUnavailable {
    return new RegistryUnavailable({ code: "STORE_UNAVAILABLE", message: summarize(cause), cause })
  }
}

/** Every way a registry operation fails. */
export type RegistryError =
  | InvalidApiKey
  | AdminRequired
  | NotOwner
  | ApiKeyNotFound
  | ManifestNotFound
  | EntryNotFound
  | DidNotRegistered
  | ApiKeyAlreadyRevoked
  | MandateAlreadyRevoked
  | DidTaken
  | InvalidManifest
  | ManifestNotPinned
  | InvalidEndpoint
  | InvalidPublicKey
  | InvalidDid
  | InvalidSignature
  | LimitReached
  | RecordTooLarge
  | InvalidQuery
  | MalformedRevocation
  | InvalidCard
  | RegistryUnavailable

/**
 * Who a request's API key speaks for, as the registry's rules read it: the key's id (records remember which key
 * registered them), its owner (the DID of an agent key) and its kind (the admin may do what owners may).
 */
export interface Caller {
  readonly keyId: string
  readonly owner: string
  readonly kind: ApiKeyRow["kind"]
}

/** The caller an API key row authenticates as; the one place a stored key becomes a caller. */
export const callerOf = (row: ApiKeyRow): Caller => ({ keyId: row.id, owner: row.owner, kind: row.kind })

/** What the did:mesh resolver answers. */
export interface ResolvedDid {
  readonly document: DidDocument
  readonly keyVersion: number
  readonly publicKey: Uint8Array
}

/** A newly made API key: the secret is shown this once and never stored. */
export interface CreatedApiKey {
  readonly id: string
  readonly apiKey: string
  readonly owner: string
  readonly kind: ApiKeyRow["kind"]
  readonly label: string | null
}

type Store = PersistenceError

/** The operations of the registry. */
export interface RegistryApi {
  /** The caller a bearer secret authenticates as; `InvalidApiKey` for a missing, unknown, revoked or malformed key. */
  readonly authenticate: (secret: string | undefined) => Effect.Effect<Caller, InvalidApiKey | RegistryUnavailable>
  /** Makes a key with no caller to answer to (the admin credential, the platform's challenge exchange). */
  readonly createApiKey: (owner: string, kind: ApiKeyRow["kind"], label?: string) => Effect.Effect<CreatedApiKey, RegistryUnavailable>
  /** Makes a key at a caller's request: only the admin may; a key for a DID is an agent key, any other a user key. */
  readonly issueApiKey: (caller: Caller, owner: string, label?: string) => Effect.Effect<CreatedApiKey, AdminRequired | RegistryUnavailable>
  /** Revokes a key: the admin may revoke any, others only keys they own. */
  readonly revokeApiKey: (caller: Caller, id: string) => Effect.Effect<void, ApiKeyNotFound | NotOwner | ApiKeyAlreadyRevoked | RegistryUnavailable>
  /**
   * Creates the admin credential on a database's first start only; its secret is returned that once. Later starts
   * answer none, even when every admin key has since been revoked.
   */
  readonly ensureAdmin: Effect.Effect<Option.Option<CreatedApiKey>, RegistryUnavailable>
  /** Creates a new admin credential unconditionally (the explicit recovery path, `Hub.start({ newAdminKey: true })`). */
  readonly issueAdminKey: Effect.Effect<CreatedApiKey, RegistryUnavailable>
  readonly pinManifest: (
    caller: Caller,
    manifest: unknown,
    ctx: WriteContext
  ) => Effect.Effect<{ readonly cid: string }, InvalidManifest | RecordTooLarge | LimitReached | RegistryUnavailable>
  readonly manifest: (cid: string) => Effect.Effect<unknown, ManifestNotFound | RegistryUnavailable>
  readonly registerAgent: (
    caller: Caller,
    input: { readonly did: string; readonly manifestCID: string; readonly publicKeyB64: string; readonly endpointUrl?: string | undefined; readonly proof: unknown },
    ctx: WriteContext
  ) => Effect.Effect<
    AgentRecord,
    InvalidDid | InvalidPublicKey | InvalidEndpoint | ManifestNotPinned | DidTaken | InvalidSignature | NotOwner | LimitReached | RegistryUnavailable
  >
  readonly resolveAgent: (didHash: string) => Effect.Effect<AgentRecord, EntryNotFound | RegistryUnavailable>
  /** Agents in didHash order; `live` keeps only the live (true) or only the stale (false) ones. */
  readonly listAgents: (
    limit: number,
    cursor?: string,
    live?: boolean
  ) => Effect.Effect<{ readonly items: ReadonlyArray<AgentRecord>; readonly nextCursor: string | null }, RegistryUnavailable>
  /** Records that the agent is alive now; the key that registered it (or the admin) only. */
  readonly heartbeat: (caller: Caller, didHash: string) => Effect.Effect<Heartbeat, EntryNotFound | NotOwner | RegistryUnavailable>
  /** Update: `proof` by the current key over `updateDocument` (the admin may omit it). */
  readonly updateAgent: (
    caller: Caller,
    didHash: string,
    patch: { readonly endpointUrl?: string | undefined; readonly manifestCID?: string | undefined; readonly proof?: unknown },
    ctx: WriteContext
  ) => Effect.Effect<AgentRecord, EntryNotFound | NotOwner | InvalidEndpoint | ManifestNotPinned | InvalidSignature | RegistryUnavailable>
  /** Rotation: `proof` by the current key (the admin may omit it), `newKeyProof` by the new key, both over `rotationDocument`. */
  readonly rotateAgentKey: (
    caller: Caller,
    didHash: string,
    input: { readonly publicKeyB64: string; readonly proof?: unknown; readonly newKeyProof: unknown },
    ctx: WriteContext
  ) => Effect.Effect<AgentRecord, EntryNotFound | NotOwner | InvalidPublicKey | InvalidSignature | RegistryUnavailable>
  /** Deletion: `proof` by the current key over `deletionDocument` (the admin may omit it). */
  readonly deleteAgent: (
    caller: Caller,
    didHash: string,
    input: { readonly proof?: unknown },
    ctx: WriteContext
  ) => Effect.Effect<void, EntryNotFound | NotOwner | InvalidSignature | RegistryUnavailable>
  readonly registerMcp: (
    caller: Caller,
    input: { readonly name: string; readonly endpointUrl: string; readonly tools: ReadonlyArray<typeof McpTool.Type>; readonly did: string },
    ctx: WriteContext
  ) => Effect.Effect<McpRecord, InvalidManifest | InvalidEndpoint | InvalidDid | RecordTooLarge | DidTaken | NotOwner | LimitReached | RegistryUnavailable>
  readonly resolveMcp: (didHash: string) => Effect.Effect<McpRecord, EntryNotFound | RegistryUnavailable>
  /** Registers an A2A agent under `did` from its card (fetched by the caller of this from `cardUrl`). */
  readonly registerA2a: (
    caller: Caller,
    input: { readonly did: string; readonly cardUrl: string; readonly card: unknown },
    ctx: WriteContext
  ) => Effect.Effect<A2aRecord, InvalidCard | InvalidEndpoint | InvalidDid | RecordTooLarge | DidTaken | NotOwner | LimitReached | RegistryUnavailable>
  readonly resolveA2a: (didHash: string) => Effect.Effect<A2aRecord, EntryNotFound | RegistryUnavailable>
  /**
   * Replaces the stored card of an A2A agent with one fetched again (`fetch`, run once the caller is known to own the
   * entry); counted against the caller's write quota. Only the key that registered it, or the admin, refreshes it
   * (`NOT_OWNER`, nothing fetched), and a card signed by other DIDs than the stored one is kept only when its
   * signature verifies under the key the hub holds for each new signer (`INVALID_CARD` otherwise).
   */
  readonly refreshA2a: (
    caller: Caller,
    didHash: string,
    fetch: (cardUrl: string) => Effect.Effect<unknown, InvalidCard>,
    ctx: WriteContext
  ) => Effect.Effect<A2aRecord, InvalidCard | EntryNotFound | NotOwner | RecordTooLarge | LimitReached | RegistryUnavailable>
  readonly listMcp: (limit: number, cursor?: string) => Effect.Effect<{ readonly items: ReadonlyArray<McpRecord>; readonly nextCursor: string | null }, RegistryUnavailable>
  readonly registerSkill: (
    caller: Caller,
    input: { readonly name: string; readonly skillType?: typeof SkillType.Type | undefined; readonly did: string },
    ctx: WriteContext
  ) => Effect.Effect<SkillRecord, InvalidManifest | InvalidDid | RecordTooLarge | DidTaken | NotOwner | LimitReached | RegistryUnavailable>
  readonly resolveSkill: (didHash: string) => Effect.Effect<SkillRecord, EntryNotFound | RegistryUnavailable>
  readonly listSkills: (limit: number, cursor?: string) => Effect.Effect<{ readonly items: ReadonlyArray<SkillRecord>; readonly nextCursor: string | null }, RegistryUnavailable>
  /** Entries matching every term of `q` (see `RegistryLimitsConfig`); `client` keys the rate limit (its address). */
  /** Search; `live` keeps only live (true) or only stale (false) agents, and then only agents. */
  readonly search: (
    client: string,
    q: string,
    limit: number,
    live?: boolean
  ) => Effect.Effect<ReadonlyArray<typeof SearchHit.Type>, InvalidQuery | LimitReached | RegistryUnavailable>
  /** The did:mesh resolver: current DID document, key and key version of a registered agent. */
  readonly resolveDid: (did: string) => Effect.Effect<ResolvedDid, DidNotRegistered | InvalidDid | RegistryUnavailable>
  /**
   * The DID an API key acts for on its own: the owner DID of an agent key that registered that DID's agent record
   * (the challenge exchange issues agent keys for unregistered DIDs to anyone, so the key alone proves nothing).
   */
  readonly agentKeyActsFor: (caller: Caller) => Effect.Effect<string | undefined, RegistryUnavailable>
  /** Revokes a mandate by `jti`; the request must be signed (signMessage) by the grantor's registered key. */
  readonly revokeMandate: (
    signed: unknown
  ) => Effect.Effect<{ readonly jti: string }, MalformedRevocation | InvalidDid | DidNotRegistered | InvalidSignature | MandateAlreadyRevoked | RegistryUnavailable>
  /** True when `grantor` revoked its mandate `jti` (a jti means something only with its grantor). */
  readonly isMandateRevoked: (jti: string, grantor: string) => Effect.Effect<boolean, RegistryUnavailable>
  /** True when the database answers. */
  readonly ping: Effect.Effect<boolean>
}

/** The `Registry` service. */
export class Registry extends Context.Tag("agent-mesh/Registry")<Registry, RegistryApi>() {}

/** The manifest fields the registry requires; everything else is kept as given. */
export const Manifest = Schema.Struct({ name: Schema.String.pipe(Schema.minLength(1)), meshProtocolVersion: Schema.Literal(MESH_PROTOCOL_VERSION) })

const RAW_CODEC = 0x55
const SHA2_256 = 0x12

/**
 * CIDv1 of a manifest: the `raw` codec over the UTF-8 of its JCS form, sha2-256. `ipfs add --cid-version 1
 * --raw-leaves` of those bytes gives the same id.
 */
export const manifestCid = (keys: KeysApi, canonical: Uint8Array): string => CID.createV1(RAW_CODEC, Digest.create(SHA2_256, keys.sha256(canonical))).toString()

/** The one-line form of a revocation request (signed by the grantor with `signMessage`). */
export const RevocationRequest = Schema.Struct({ type: Schema.Literal("MandateRevocation"), jti: Schema.String.pipe(Schema.minLength(1)), grantor: Schema.String, proof: Schema.Unknown })

/**
 * What the HTTP layer knows of a write: the origin of this hub (`publicUrl`, else the address the request arrived
 * on; undefined when neither can be rebuilt, which refuses every proof) and the client's address (a write quota key).
 */
export interface WriteContext {
  readonly hub: string | undefined
  readonly client: string
}

/**
 * Writes per window. One budget is charged per API key, one per DID for all keys issued to it (the challenge exchange
 * hands out new keys for one DID at will, so a per-key count alone resets with each), and one per client address
 * (`perAddress`). A write goes through only when every budget it touches has room. The admin credential is not counted.
 */
export interface WriteQuota {
  /** Agents, MCP servers and skills registered per key and per DID (default 100). */
  readonly entries: number
  /** Bytes of manifests pinned per key and per DID, counted in their canonical form (default 8 MiB). */
  readonly manifestBytes: number
  /** Window length (default 1 hour). */
  readonly windowMs: number
  /** The budget of one client address, whatever its keys (default 300 entries, 24 MiB). */
  readonly perAddress: { readonly entries: number; readonly manifestBytes: number }
}

/** Default write quota. */
export const DEFAULT_WRITE_QUOTA: WriteQuota = {
  entries: 100,
  manifestBytes: 8 * 1024 * 1024,
  windowMs: 60 * 60_000,
  perAddress: { entries: 300, manifestBytes: 24 * 1024 * 1024 }
}

/** How far a registration or rotation proof's `created` may lie from the hub's clock (default 5 minutes). */
export const DEFAULT_PROOF_MAX_AGE_MS = 5 * 60_000

/** Registry settings. */
export interface RegistryOptions {
  readonly writeQuota?: Partial<WriteQuota>
  readonly proofMaxAgeMs?: number
  /** Overrides of the search and size limits (`DEFAULT_LIMITS`). */
  readonly limits?: Partial<RegistryLimitsConfig>
  /** How long after it was last heard from an agent counts as stale; default `DEFAULT_STALE_AFTER_MS`. */
  readonly staleAfterMs?: number
}

const API_KEY_PREFIX = "mk_"
const MAX_LIMIT = 200
/** Purge over windows (or expired proofs) once every this many charges (or claims). */
const PURGE_EVERY = 256

/** Verifies a write proof and claims it for the write running it (`proven`). */
type CheckProof = (
  document: Record<string, unknown>,
  proof: unknown,
  publicKey: Uint8Array,
  did: string,
  what: string
) => Effect.Effect<void, InvalidSignature | RegistryUnavailable>

const iso = (ms: number) => new Date(ms).toISOString()
const storeError = (e: Store) => RegistryUnavailable.of(e)

const isHttpUrl = (u: string) => hubOrigin(u) !== undefined


const invalidKey = () =>
  new InvalidPublicKey({ code: "INVALID_PUBLIC_KEY", message: "publicKeyB64 must be standard base64 of a raw 32-byte Ed25519 key, canonical and not of small order" })

const notOwner = (message: string) => new NotOwner({ code: "NOT_OWNER", message })
const invalidManifest = (message: string) => new InvalidManifest({ code: "INVALID_MANIFEST", message })
const invalidEndpoint = () => new InvalidEndpoint({ code: "INVALID_ENDPOINT", message: "endpointUrl must be an http(s) URL" })
const didNotRegistered = (did: string) => new DidNotRegistered({ code: "NOT_FOUND", message: `no key registered for ${did}` })

/** A stored key in its padded spelling; rows written before keys were normalized may lack the padding. */
const canonicalStored = (b64: string | null): string => (b64 === null ? "" : canonicalPublicKeyB64(b64) ?? b64)

/** Builds the registry over the store and the key service. */
export const makeWith = (options: RegistryOptions = {}): Effect.Effect<RegistryApi, never, RegistryStore | Keys> => Effect.gen(function* () {
  const store: RegistryStoreApi = yield* RegistryStore
  const keys = yield* Keys
  const quota: WriteQuota = { ...DEFAULT_WRITE_QUOTA, ...options.writeQuota }
  const proofMaxAgeMs = options.proofMaxAgeMs ?? DEFAULT_PROOF_MAX_AGE_MS
  const staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS
  const clock = yield* Effect.clock
  const isLive = (r: EntryRow, now: number) => r.last_seen_at != null && r.last_seen_at >= now - staleAfterMs
  const seenFilter = (live: boolean | undefined, now: number) => (live === undefined ? undefined : { live, since: now - staleAfterMs })
  const hashSecret = (secret: string) => toHex(keys.sha256(utf8(secret)))
  const q = <A>(e: Effect.Effect<A, Store>): Effect.Effect<A, RegistryUnavailable> => Effect.mapError(e, storeError)
  const limits: RegistryLimitsConfig = { ...DEFAULT_LIMITS, ...options.limits }
  const searchLimiter = yield* RateLimiter.limiter("search", limits.searchRateLimit)
  const tooLarge = (message: string) => Effect.fail(new RecordTooLarge({ code: "PAYLOAD_TOO_LARGE", message }))
  const invalidQuery = (message: string) => Effect.fail(new InvalidQuery({ code: "INVALID_REQUEST", message }))
  // Names and tools are checked against the caps before anything is stored, so every stored record is bounded.
  const nameTooLong = (name: string) => (name.length > limits.maxNameLength ? tooLarge(`name is longer than ${limits.maxNameLength} characters`) : Effect.void)
  const toolsTooLarge = (tools: ReadonlyArray<{ readonly name: string; readonly inputSchema?: unknown }>) => {
    if (tools.length > limits.maxTools) return tooLarge(`more than ${limits.maxTools} tools`)
    let total = 2
    for (const t of tools) {
      if (t.name.length > limits.maxToolNameLength) return tooLarge(`tool name longer than ${limits.maxToolNameLength} characters`)
      const bytes = utf8(JSON.stringify(t)).length
      if (bytes > limits.maxToolBytes) return tooLarge(`tool ${JSON.stringify(t.name.slice(0, 64))} is larger than ${limits.maxToolBytes} bytes`)
      total += bytes + 1
    }
    return total > limits.maxToolListBytes ? tooLarge(`the tool list is larger than ${limits.maxToolListBytes} bytes`) : Effect.void
  }

  const createApiKey = (owner: string, kind: ApiKeyRow["kind"], label?: string) =>
    Effect.gen(function* () {
      const entropy = yield* Entropy
      const secret = `${API_KEY_PREFIX}${toBase64Url(entropy.bytes(32))}`
      const id = `key_${toBase64Url(entropy.bytes(9))}`
      const now = yield* Clock.currentTimeMillis
      yield* store.insertApiKey({ id, key_hash: hashSecret(secret), owner, kind, label: label ?? null, created_at: now, revoked_at: null })
      return { id, apiKey: secret, owner, kind, label: label ?? null }
    }).pipe(
      // Two random 256-bit secrets (or 72-bit ids) colliding is a broken CSPRNG, not a condition to answer.
      Effect.catchTag("PersistenceError", (e) => (e.reason === "UniqueViolation" ? Effect.die(e) : Effect.fail(storeError(e))))
    )

  const authenticate = (secret: string | undefined) =>
    Effect.gen(function* () {
      if (secret === undefined || !secret.startsWith(API_KEY_PREFIX) || secret.length !== API_KEY_PREFIX.length + 43) {
        return yield* Effect.fail(new InvalidApiKey({ code: "INVALID_API_KEY", message: "missing, unknown, revoked or malformed API key" }))
      }
      const hash = hashSecret(secret)
      const row = yield* q(store.apiKeyByHash(hash))
      // The lookup is by hash; the explicit comparison keeps the decision itself constant-time.
      if (Option.isNone(row) || !equalBytes(utf8(row.value.key_hash), utf8(hash)) || row.value.revoked_at !== null) {
        return yield* Effect.fail(new InvalidApiKey({ code: "INVALID_API_KEY", message: "missing, unknown, revoked or malformed API key" }))
      }
      return callerOf(row.value)
    })

  // What a record derives from its row's (did, key, endpoint, times) alone: the DID document (base58, varint), the
  // key in canonical base64 and the ISO times. Building them on every resolve is waste: kept per didHash, and used
  // while the row still has the fields they were made from.
  interface Derived {
    readonly did: string
    readonly key: string | null
    readonly endpoint: string | null
    readonly created: number
    readonly updated: number
    readonly document: DidDocument
    readonly publicKeyB64: string
    readonly createdAt: string
    readonly updatedAt: string
  }
  const derived = new Lru<string, Derived>(10_000)
  const derivedOf = (r: EntryRow): Derived => {
    const d = derived.get(r.did_hash)
    if (d !== undefined && d.did === r.did && d.key === r.public_key_b64 && d.endpoint === r.endpoint_url && d.created === r.created_at && d.updated === r.updated_at) {
      return d
    }
    const made: Derived = {
      did: r.did,
      key: r.public_key_b64,
      endpoint: r.endpoint_url,
      created: r.created_at,
      updated: r.updated_at,
      document: makeDidDocument(r.did as never, currentKey(r), r.endpoint_url ?? undefined),
      publicKeyB64: canonicalStored(r.public_key_b64),
      createdAt: iso(r.created_at),
      updatedAt: iso(r.updated_at)
    }
    derived.set(r.did_hash, made)
    return made
  }
  const documentOf = (r: EntryRow): DidDocument => derivedOf(r).document

  const toAgent = (r: EntryRow, now: number): AgentRecord => {
    const d = derivedOf(r)
    return {
      did: r.did,
      didHash: r.did_hash,
      manifestCID: r.manifest_cid ?? "",
      publicKeyB64: d.publicKeyB64,
      keyVersion: r.key_version,
      endpointUrl: r.endpoint_url ?? "",
      document: d.document,
      createdAt: d.createdAt,
      updatedAt: d.updatedAt,
      lastSeenAt: r.last_seen_at == null ? null : r.last_seen_at === r.updated_at ? d.updatedAt : iso(r.last_seen_at),
      live: isLive(r, now)
    }
  }
  const toMcp = (r: EntryRow): McpRecord => ({
    did: r.did,
    didHash: r.did_hash,
    name: r.name,
    endpointUrl: r.endpoint_url ?? "",
    tools: JSON.parse(r.tools ?? "[]"),
    createdAt: iso(r.created_at)
  })
  const toA2a = (r: EntryRow, card: string, fetchedAt: number): A2aRecord => ({
    did: r.did,
    didHash: r.did_hash,
    name: r.name,
    cardUrl: r.endpoint_url ?? "",
    card: JSON.parse(card),
    fetchedAt: iso(fetchedAt),
    createdAt: iso(r.created_at)
  })
  /** A card the registry keeps: an object with a name and a way to reach it, within the manifest size limit. */
  const checkCard = (card: unknown) => {
    const invalid = (message: string) => Effect.fail(new InvalidCard({ code: "INVALID_CARD", message }))
    if (typeof card !== "object" || card === null || Array.isArray(card)) return invalid("an agent card is a JSON object")
    const c = card as Record<string, unknown>
    if (typeof c.name !== "string" || c.name.trim().length === 0) return invalid("the card has no name")
    const interfaces = Array.isArray(c.supportedInterfaces) ? c.supportedInterfaces : []
    if (interfaces.length === 0 && typeof c.url !== "string") return invalid("the card names no interface (supportedInterfaces, or a 0.3 url)")
    const text = JSON.stringify(card)
    if (text.length > limits.maxManifestBytes) return Effect.fail(new RecordTooLarge({ code: "PAYLOAD_TOO_LARGE", message: `the card is larger than ${limits.maxManifestBytes} bytes` }))
    const skills = (Array.isArray(c.skills) ? c.skills : [])
      .flatMap((k: unknown) => (typeof k === "object" && k !== null && typeof (k as { name?: unknown }).name === "string" ? [{ name: ((k as { name: string }).name).slice(0, limits.maxToolNameLength) }] : []))
      .slice(0, limits.maxTools)
    return Effect.succeed({ name: c.name.slice(0, limits.maxNameLength), skills, text })
  }
  /**
   * A refreshed card's signatures hold: each by a DID the hub holds a key for verifies under that key, a signer the
   * hub does not know is taken only as the stored card already named it, and a signed card is not replaced by an
   * unsigned one. Otherwise whoever controls the card's URL could hand the hub's readers another key in the entry's
   * name.
   */
  const sameSignersOrProven = (did: string, card: unknown) =>
    Effect.gen(function* () {
      const stored = yield* q(store.a2aCard(did))
      const parsed = Option.isSome(stored) ? tryParseJsonStrict(stored.value.card) : undefined
      const before = parsed?.ok === true ? cardSigners(parsed.value) : []
      const after = cardSigners(card)
      const refused = (message: string) => Effect.fail(new InvalidCard({ code: "INVALID_CARD", message }))
      if (after.length === 0 && before.length > 0) return yield* refused("the stored card is signed; a refreshed card without a signature is not kept")
      // A signer the hub holds a key for is always checked (a copied header proves nothing); one it does not know is
      // taken only as the stored card named it.
      for (const signer of after) {
        const row = yield* q(store.entryByDid(signer))
        const key = Option.isSome(row) && row.value.public_key_b64 !== null ? currentKey(row.value) : undefined
        if (key === undefined) {
          if (before.includes(signer)) continue
          return yield* refused("the card names a new signing key that the hub holds no key for")
        }
        const ok = yield* verifyCardSigner(card as Record<string, unknown>, signer, key).pipe(Effect.provideService(Keys, keys))
        if (!ok) return yield* refused("the card's signature does not verify under the key the hub holds for the signer's DID")
      }
    })

  const toSkill = (r: EntryRow): SkillRecord => ({
    did: r.did,
    didHash: r.did_hash,
    name: r.name,
    skillType: Schema.is(SkillType)(r.skill_type) ? r.skill_type : "custom",
    createdAt: iso(r.created_at)
  })

  const entry = (kind: EntryKind, didHash: string) =>
    q(store.entryByHash(didHash)).pipe(
      Effect.flatMap((o) => (Option.isSome(o) && o.value.kind === kind ? Effect.succeed(o.value) : Effect.fail(new EntryNotFound({ code: "NOT_FOUND", message: `no ${kind} with didHash ${didHash}`, kind }))))
    )

  const owned = (caller: Caller, kind: EntryKind, didHash: string) =>
    Effect.flatMap(entry(kind, didHash), (row) =>
      row.owner_key_id === caller.keyId || caller.kind === "admin" ? Effect.succeed(row) : Effect.fail(notOwner("this API key did not register the record"))
    )

  // One row more than asked tells whether another page exists, so the last page says `nextCursor: null`.
  const page = <A>(kind: EntryKind, to: (r: EntryRow, now: number) => A) => (limit: number, cursor?: string, live?: boolean) => {
    const n = Math.max(1, Math.min(MAX_LIMIT, Math.floor(limit) || 50))
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(q(store.listEntries(kind, n + 1, cursor, seenFilter(live, now))), (rows) => {
        const items = rows.slice(0, n)
        return { items: items.map((r) => to(r, now)), nextCursor: rows.length > n ? items[items.length - 1]!.did_hash : null }
      })
    )
  }

  const pinnedOrFail = (cid: string) =>
    Effect.flatMap(q(store.manifest(cid)), (o) => (Option.isSome(o) ? Effect.void : Effect.fail(new ManifestNotPinned({ code: "MANIFEST_NOT_PINNED", message: `manifest ${cid} is not pinned here` }))))

  const insert = (row: EntryRow) =>
    store.insertEntry(row).pipe(
      // Only the database's unique violation (the DID or its hash) means taken; any other refusal is the store's.
      Effect.mapError((e) => (e.reason === "UniqueViolation" ? new DidTaken({ code: "DID_TAKEN", message: `${row.did} is already registered` }) : storeError(e)))
    )

  const validDid = (given: string) => {
    const did = normalizeDid(given)
    return did === undefined ? Effect.fail(new InvalidDid({ code: "INVALID_DID", message: `${JSON.stringify(given)} is not a did:mesh DID` })) : Effect.succeed(did)
  }

  // A key issued to a DID (the challenge exchange, or the admin naming a DID as owner) speaks for that DID only.
  const ownDid = (caller: Caller) => (caller.kind === "agent" ? normalizeDid(caller.owner) ?? caller.owner : undefined)
  const mayRegisterAgent = (caller: Caller, did: string) => {
    const own = ownDid(caller)
    return own === undefined || own === did ? Effect.void : Effect.fail(notOwner(`a key issued to ${own} registers only that DID`))
  }
  // The DID an agent key acts for: its owner DID, only when it is the key that registered that DID's agent record.
  const agentKeyActsFor = (caller: Caller): Effect.Effect<string | undefined, RegistryUnavailable> => {
    const own = ownDid(caller)
    if (own === undefined) return Effect.succeed(undefined)
    return Effect.map(q(store.entryByDid(own)), (row) =>
      Option.isSome(row) && row.value.kind === "agent" && row.value.owner_key_id === caller.keyId ? own : undefined
    )
  }
  // A key issued to a DID registers `<did>.<name>` only when it is the key that registered `<did>`'s agent record
  // (as the ledger requires of it): the challenge exchange issues keys for an unregistered DID to anyone, so such a
  // key alone would let anybody claim the names under a DID nobody holds yet, or whose agent was deleted.
  const mayRegisterChild = (caller: Caller, did: string) =>
    Effect.gen(function* () {
      const own = ownDid(caller)
      if (own === undefined) return
      if (!did.startsWith(`${own}.`)) return yield* Effect.fail(notOwner(`a key issued to ${own} registers MCP servers and skills only as ${own}.<name>`))
      if ((yield* agentKeyActsFor(caller)) === undefined) {
        return yield* Effect.fail(notOwner(`only the key that registered the agent ${own} registers names under it`))
      }
    })
  // A deleted agent's DID stays its owner's (see the tombstone rule of registerAgent): nothing else may take it.
  const notTombstoned = (did: string) =>
    Effect.flatMap(q(store.tombstone(did)), (tomb) =>
      Option.isSome(tomb) ? Effect.fail(new DidTaken({ code: "DID_TAKEN", message: `${did} was deleted as an agent; only its last key may register it again` })) : Effect.void
    )

  // Fixed windows per budget (API key, DID of agent keys, client address), in the database, so hubs sharing one count
  // each write once (docs/scaling.md §2). A store that cannot answer refuses the write (the write would meet the
  // same failure next). Windows over are purged every PURGE_EVERY charges, so the table holds about one window's.
  let chargesSincePurge = 0
  const charge = (caller: Caller, ctx: WriteContext, entries: number, bytes: number): Effect.Effect<void, LimitReached | RegistryUnavailable> =>
    Effect.gen(function* () {
      if (caller.kind === "admin") return
      const now = yield* Clock.currentTimeMillis
      const own = ownDid(caller)
      const budgets = [
        { id: `key ${caller.keyId}`, of: "this API key", entries: quota.entries, bytes: quota.manifestBytes },
        ...(own === undefined ? [] : [{ id: `did ${own}`, of: `the keys of ${own}`, entries: quota.entries, bytes: quota.manifestBytes }]),
        { id: `address ${ctx.client}`, of: "this client address", entries: quota.perAddress.entries, bytes: quota.perAddress.manifestBytes }
      ]
      if (++chargesSincePurge >= PURGE_EVERY) {
        chargesSincePurge = 0
        yield* Effect.ignore(store.purgeWriteWindows(now - quota.windowMs))
      }
      // Every budget is checked before any is charged (one transaction), so a refused write costs nothing.
      const refused = yield* q(store.chargeWrites(budgets.map(({ bytes, entries, id }) => ({ id, entries, bytes })), entries, bytes, now, quota.windowMs))
      if (Option.isNone(refused)) return
      const b = budgets.find((x) => x.id === refused.value.id) ?? budgets[0]!
      const w = Option.filter(refused.value.window, (x) => now - x.window_start < quota.windowMs)
      const start = Option.isSome(w) ? w.value.window_start : now
      const used = Option.isSome(w) ? w.value.entries : 0
      const retryAfterSeconds = Math.max(1, Math.ceil((start + quota.windowMs - now) / 1000))
      const what = used + entries > b.entries ? `${b.entries} registrations` : `${b.bytes} manifest bytes`
      return yield* Effect.fail(LimitReached.of(`write quota of ${b.of} spent (${what} per window)`, retryAfterSeconds))
    })

  const signatureInvalid = (message: string) => new InvalidSignature({ code: "SIGNATURE_INVALID", message })
  /** The origin write proofs must name; without one, no proof can be meant for this hub. */
  const hubOf = (ctx: WriteContext) =>
    ctx.hub === undefined ? Effect.fail(signatureInvalid("the hub cannot tell its own URL, so no write proof can name it; start the hub with publicUrl")) : Effect.succeed(ctx.hub)
  // decodePublicKeyB64 reads padded and unpadded spellings alike (rows from before keys were normalized).
  const currentKey = (row: { readonly public_key_b64: string | null }) => decodePublicKeyB64(row.public_key_b64 ?? "") ?? new Uint8Array()
  const proofValueOf = (proof: unknown) => {
    const v = typeof proof === "object" && proof !== null ? (proof as { proofValue?: unknown }).proofValue : undefined
    return typeof v === "string" ? v : undefined
  }
  // Proof values of applied writes are kept in the database until the proof could no longer be fresh, so a captured
  // write is applied once by whichever hub on it sees it first. A proof is accepted until `created + maxAge`, and
  // `created` may lie up to maxAge ahead of now. Expired ones are purged every PURGE_EVERY claims.
  let claimsSincePurge = 0
  /**
   * Runs a write whose proofs `check` verifies (eddsa-jcs-2022 by `did#key-1` under `publicKey` over `document`,
   * created near the hub's clock) and claims, one INSERT each, before the write. A claim the store refuses is a
   * replay; a store that cannot answer refuses the write (a replay is never let through). When the write then fails,
   * its claims are given back, so a write refused for another reason (quota, conflict) may be retried as signed; an
   * interrupted one keeps them (it may have been applied).
   */
  const proven = <A, E>(write: (check: CheckProof) => Effect.Effect<A, E>) =>
    Effect.suspend(() => {
      const held: Array<string> = []
      const check: CheckProof = (document, proof, publicKey, did, what) =>
        Effect.gen(function* () {
          yield* verifyMessage({ ...document, proof }, publicKey, { verificationMethod: verificationMethodId(did), proofPurpose: WRITE_PROOF_PURPOSE }).pipe(
            Effect.provideService(Keys, keys),
            Effect.mapError(() =>
              signatureInvalid(`${what} is missing or does not verify under that key${typeof document.hub === "string" ? ` over the document naming hub ${document.hub}` : ""}`)
            )
          )
          const created = typeof proof === "object" && proof !== null ? (proof as { created?: unknown }).created : undefined
          const at = typeof created === "string" ? Date.parse(created) : Number.NaN
          const now = yield* Clock.currentTimeMillis
          if (!Number.isFinite(at) || Math.abs(now - at) > proofMaxAgeMs) {
            return yield* Effect.fail(signatureInvalid(`${what} must be created within ${proofMaxAgeMs / 1000} s of the hub's clock; sign again`))
          }
          const value = proofValueOf(proof)
          if (value === undefined) return
          if (++claimsSincePurge >= PURGE_EVERY) {
            claimsSincePurge = 0
            yield* Effect.ignore(store.purgeProofs(now))
          }
          if (!(yield* q(store.claimProof(value, now + 2 * proofMaxAgeMs)))) return yield* Effect.fail(signatureInvalid(`${what} was already used here; sign again`))
          held.push(value)
        })
      return Effect.tapError(write(check), () => (held.length === 0 ? Effect.void : Effect.ignore(store.releaseProofs(held))))
    })

  const api: RegistryApi = {
    authenticate,
    createApiKey,
    issueApiKey: (caller, owner, label) =>
      caller.kind !== "admin"
        ? Effect.fail(new AdminRequired({ code: "ADMIN_REQUIRED", message: "this needs the admin credential" }))
        : createApiKey(owner, owner.startsWith("did:") ? "agent" : "user", label),
    revokeApiKey: (caller, id) =>
      Effect.gen(function* () {
        const row = yield* q(store.apiKeyById(id))
        if (Option.isNone(row)) return yield* Effect.fail(new ApiKeyNotFound({ code: "NOT_FOUND", message: `no API key ${id}` }))
        // Owner names are not identities (anyone can be issued a key "for" any name), so a non-admin key may revoke
        // only itself; the admin may revoke any key.
        if (caller.kind !== "admin" && row.value.id !== caller.keyId) return yield* Effect.fail(notOwner("a key may revoke only itself; the admin may revoke any"))
        const now = yield* Clock.currentTimeMillis
        const revoked = yield* q(store.revokeApiKey(id, now))
        if (!revoked) return yield* Effect.fail(new ApiKeyAlreadyRevoked({ code: "ALREADY_REVOKED", message: `API key ${id} is already revoked` }))
      }),
    ensureAdmin: Effect.gen(function* () {
      // The marker, not the count of live admin keys, decides: revoking the admin key must not mint a new one on the
      // next start. Claiming it first also keeps two processes starting on one new file from making two.
      const first = yield* q(store.claimSetting("admin_created", iso(yield* Clock.currentTimeMillis)))
      if (!first) return Option.none()
      return Option.some(yield* createApiKey("admin", "admin", "created on first start"))
    }),
    issueAdminKey: Effect.gen(function* () {
      yield* q(store.claimSetting("admin_created", iso(yield* Clock.currentTimeMillis)))
      return yield* createApiKey("admin", "admin", "issued on request")
    }),
    pinManifest: (caller, manifest, ctx) =>
      Effect.gen(function* () {
        if (typeof manifest !== "object" || manifest === null || Array.isArray(manifest)) {
          return yield* Effect.fail(invalidManifest("a manifest is a JSON object"))
        }
        if (!Schema.is(Manifest)(manifest)) {
          return yield* Effect.fail(invalidManifest(`a manifest needs a non-empty name and meshProtocolVersion "${MESH_PROTOCOL_VERSION}"`))
        }
        const bytes = canonicalBytes(manifest)
        if (bytes._tag === "Left") return yield* Effect.fail(invalidManifest(bytes.left.message))
        if (bytes.right.length > limits.maxManifestBytes) return yield* tooLarge(`the manifest is larger than ${limits.maxManifestBytes} bytes (JCS form)`)
        const cid = manifestCid(keys, bytes.right)
        yield* charge(caller, ctx, 0, bytes.right.length)
        yield* q(store.pinManifest(cid, new TextDecoder().decode(bytes.right), yield* Clock.currentTimeMillis))
        return { cid }
      }),
    manifest: (cid) =>
      Effect.flatMap(q(store.manifest(cid)), (o) => (Option.isSome(o) ? Effect.succeed(JSON.parse(o.value) as unknown) : Effect.fail(new ManifestNotFound({ code: "NOT_FOUND", message: `no manifest ${cid}` })))),
    registerAgent: (caller, input, ctx) =>
      proven((checkProof) => Effect.gen(function* () {
        const did = yield* validDid(input.did)
        yield* mayRegisterAgent(caller, did)
        const publicKey = acceptablePublicKeyB64(input.publicKeyB64)
        if (publicKey === undefined) return yield* Effect.fail(invalidKey())
        // No endpoint: a caller-only identity, whose key resolves (for its signatures and mandates) but which nobody calls.
        if (input.endpointUrl !== undefined && !isHttpUrl(input.endpointUrl)) return yield* Effect.fail(invalidEndpoint())
        yield* pinnedOrFail(input.manifestCID)
        const hub = yield* hubOf(ctx)
        yield* checkProof(registrationDocument({ ...input, hub }), input.proof, publicKey, did, "the registration proof")
        // A deleted DID comes back only under its last key, and its key version continues where it stopped.
        const tomb = yield* q(store.tombstone(did))
        if (Option.isSome(tomb) && !equalBytes(currentKey(tomb.value), publicKey)) {
          return yield* Effect.fail(new DidTaken({ code: "DID_TAKEN", message: `${did} was deleted; only its last key may register it again` }))
        }
        yield* charge(caller, ctx, 1, 0)
        const now = yield* Clock.currentTimeMillis
        const row: EntryRow = {
          did, did_hash: didHash(did), kind: "agent", name: did, endpoint_url: input.endpointUrl ?? null, public_key_b64: toBase64(publicKey),
          key_version: Option.isSome(tomb) ? tomb.value.key_version + 1 : 1, manifest_cid: input.manifestCID, skill_type: null, tools: null, owner_key_id: caller.keyId,
          created_at: now, updated_at: now, last_seen_at: now
        }
        yield* insert(row)
        return toAgent(row, now)
      })),
    // The clock read directly: a resolve then needs no fiber, and is answered on the request's own stack (Serve).
    resolveAgent: (h) => Effect.map(entry("agent", h), (row) => toAgent(row, clock.unsafeCurrentTimeMillis())),
    listAgents: page("agent", toAgent),
    heartbeat: (caller, h) =>
      Effect.gen(function* () {
        const row = yield* owned(caller, "agent", h)
        const now = yield* Clock.currentTimeMillis
        // Deleted between the read and the write: as if it had never been there.
        if (!(yield* q(store.touchEntry(row.did, now)))) return yield* Effect.fail(new EntryNotFound({ code: "NOT_FOUND", message: `no agent with didHash ${h}`, kind: "agent" }))
        return { didHash: row.did_hash, lastSeenAt: iso(now), live: true, staleAfterSeconds: Math.round(staleAfterMs / 1000) }
      }),
    updateAgent: (caller, h, patch, ctx) =>
      proven((checkProof) => Effect.gen(function* () {
        const row = yield* owned(caller, "agent", h)
        if (patch.endpointUrl !== undefined && !isHttpUrl(patch.endpointUrl)) return yield* Effect.fail(invalidEndpoint())
        if (patch.manifestCID !== undefined) yield* pinnedOrFail(patch.manifestCID)
        // The endpoint and manifest are what the registration proof vouched for and what the DID document publishes,
        // so changing them needs the current key too, not only the bearer key (the admin stands in for a lost key).
        if (caller.kind !== "admin" || patch.proof !== undefined) {
          const hub = yield* hubOf(ctx)
          const document = updateDocument({ hub, did: row.did, keyVersion: row.key_version, endpointUrl: patch.endpointUrl, manifestCID: patch.manifestCID })
          yield* checkProof(document, patch.proof, currentKey(row), row.did, "the update proof by the current key")
        }
        const now = yield* Clock.currentTimeMillis
        const next = { ...row, endpoint_url: patch.endpointUrl ?? row.endpoint_url, manifest_cid: patch.manifestCID ?? row.manifest_cid, updated_at: now, last_seen_at: now }
        yield* q(store.updateEntry(row.did, { endpoint_url: next.endpoint_url, manifest_cid: next.manifest_cid, updated_at: now, last_seen_at: now }))
        return toAgent(next, now)
      })),
    rotateAgentKey: (caller, h, input, ctx) =>
      proven((checkProof) => Effect.gen(function* () {
        const row = yield* owned(caller, "agent", h)
        const next = acceptablePublicKeyB64(input.publicKeyB64)
        if (next === undefined) return yield* Effect.fail(invalidKey())
        const hub = yield* hubOf(ctx)
        const document = rotationDocument({ hub, did: row.did, keyVersion: row.key_version, publicKeyB64: input.publicKeyB64 })
        // The current key authorizes the change (a stolen bearer key alone cannot take a DID over); the admin may
        // stand in for a lost key. The new key proves it is held, so nobody rotates to a key they cannot sign with.
        if (caller.kind !== "admin" || input.proof !== undefined) {
          yield* checkProof(document, input.proof, currentKey(row), row.did, "the proof by the current key")
        }
        yield* checkProof(document, input.newKeyProof, next, row.did, "the proof by the new key")
        const publicKeyB64 = toBase64(next)
        const now = yield* Clock.currentTimeMillis
        const version = yield* q(store.rotateKey(row.did, publicKeyB64, row.key_version, now))
        if (version === 0) return yield* Effect.fail(signatureInvalid(`the key of ${row.did} changed meanwhile; sign the rotation for the current version again`))
        return toAgent({ ...row, public_key_b64: publicKeyB64, key_version: version, updated_at: now }, now)
      })),
    deleteAgent: (caller, h, input, ctx) =>
      proven((checkProof) => Effect.gen(function* () {
        const row = yield* owned(caller, "agent", h)
        // Deleting frees the endpoint and ends the DID's resolution: the current key decides, or the admin.
        if (caller.kind !== "admin" || input.proof !== undefined) {
          const hub = yield* hubOf(ctx)
          yield* checkProof(deletionDocument({ hub, did: row.did, keyVersion: row.key_version }), input.proof, currentKey(row), row.did, "the deletion proof by the current key")
        }
        yield* q(store.deleteAgent(row, yield* Clock.currentTimeMillis))
      })),
    registerMcp: (caller, input, ctx) =>
      Effect.gen(function* () {
        if (input.name.trim().length === 0) return yield* Effect.fail(invalidManifest("name must not be empty"))
        if (!isHttpUrl(input.endpointUrl)) return yield* Effect.fail(invalidEndpoint())
        yield* nameTooLong(input.name)
        const did = yield* validDid(input.did)
        yield* mayRegisterChild(caller, did)
        const tools = input.tools.map((t) => (typeof t === "string" ? { name: t } : t))
        yield* toolsTooLarge(tools)
        yield* notTombstoned(did)
        yield* charge(caller, ctx, 1, 0)
        const now = yield* Clock.currentTimeMillis
        const row: EntryRow = {
          did, did_hash: didHash(did), kind: "mcp", name: input.name, endpoint_url: input.endpointUrl, public_key_b64: null, key_version: 1,
          manifest_cid: null, skill_type: null, tools: JSON.stringify(tools), owner_key_id: caller.keyId, created_at: now, updated_at: now
        }
        yield* insert(row)
        return toMcp(row)
      }),
    resolveMcp: (h) => Effect.map(entry("mcp", h), toMcp),
    listMcp: page("mcp", toMcp),
    registerA2a: (caller, input, ctx) =>
      Effect.gen(function* () {
        if (!isHttpUrl(input.cardUrl)) return yield* Effect.fail(invalidEndpoint())
        const { name, skills, text } = yield* checkCard(input.card)
        const did = yield* validDid(input.did)
        yield* mayRegisterChild(caller, did)
        yield* notTombstoned(did)
        yield* charge(caller, ctx, 1, text.length)
        const now = yield* Clock.currentTimeMillis
        const row: EntryRow = {
          did, did_hash: didHash(did), kind: "a2a", name, endpoint_url: input.cardUrl, public_key_b64: null, key_version: 1,
          manifest_cid: null, skill_type: null, tools: JSON.stringify(skills), owner_key_id: caller.keyId, created_at: now, updated_at: now
        }
        yield* insert(row)
        yield* q(store.putA2aCard(did, text, now))
        return toA2a(row, text, now)
      }),
    resolveA2a: (h) =>
      Effect.gen(function* () {
        const row = yield* entry("a2a", h)
        const card = yield* q(store.a2aCard(row.did))
        return toA2a(row, Option.isSome(card) ? card.value.card : "{}", Option.isSome(card) ? card.value.fetched_at : row.created_at)
      }),
    refreshA2a: (caller, h, fetch, ctx) =>
      Effect.gen(function* () {
        const row = yield* owned(caller, "a2a", h)
        const card = yield* fetch(row.endpoint_url ?? "")
        const { text } = yield* checkCard(card)
        yield* sameSignersOrProven(row.did, card)
        yield* charge(caller, ctx, 1, text.length)
        const now = yield* Clock.currentTimeMillis
        yield* q(store.putA2aCard(row.did, text, now))
        return toA2a(row, text, now)
      }),
    registerSkill: (caller, input, ctx) =>
      Effect.gen(function* () {
        if (input.name.trim().length === 0) return yield* Effect.fail(invalidManifest("name must not be empty"))
        yield* nameTooLong(input.name)
        const did = yield* validDid(input.did)
        yield* mayRegisterChild(caller, did)
        yield* notTombstoned(did)
        yield* charge(caller, ctx, 1, 0)
        const now = yield* Clock.currentTimeMillis
        const row: EntryRow = {
          did, did_hash: didHash(did), kind: "skill", name: input.name, endpoint_url: null, public_key_b64: null, key_version: 1,
          manifest_cid: null, skill_type: input.skillType ?? "custom", tools: null, owner_key_id: caller.keyId, created_at: now, updated_at: now
        }
        yield* insert(row)
        return toSkill(row)
      }),
    resolveSkill: (h) => Effect.map(entry("skill", h), toSkill),
    listSkills: page("skill", toSkill),
    search: (client, text, limit, live) =>
      Effect.gen(function* () {
        yield* Effect.mapError(searchLimiter.take(client), (e) =>
          LimitReached.of("too many searches", e.retryAfterSeconds)
        )
        if (text.length > limits.maxQueryLength) return yield* invalidQuery(`q is longer than ${limits.maxQueryLength} characters`)
        // Whitespace and control characters separate terms (a NUL inside a term would end the FTS query text early).
        const terms = text.split(/[\s\p{Cc}]+/u).filter((t) => t.length > 0)
        if (terms.length > limits.maxQueryTerms) return yield* invalidQuery(`q has more than ${limits.maxQueryTerms} terms`)
        const usable = terms.filter((t) => [...t].length >= MIN_TERM_LENGTH)
        if (usable.length === 0) return yield* invalidQuery(`q needs a term of at least ${MIN_TERM_LENGTH} characters`)
        const now = yield* Clock.currentTimeMillis
        const rows = yield* q(store.search(usable, Math.max(1, Math.min(limits.maxSearchResults, Math.floor(limit) || 50)), seenFilter(live, now)))
        return rows.map((r) => ({
          kind: r.kind,
          did: r.did,
          didHash: r.did_hash,
          name: r.kind === "agent" ? r.did : r.name,
          ...(r.kind === "agent" ? { live: isLive(r, now) } : {})
        }))
      }),
    resolveDid: (input) =>
      Effect.gen(function* () {
        const did = yield* validDid(input)
        const row = yield* q(store.entryByDid(did))
        if (Option.isNone(row) || row.value.public_key_b64 === null) return yield* Effect.fail(didNotRegistered(did))
        // The memoized document and the one key decoder: a resolve (every signed ledger request) builds neither anew.
        return { document: documentOf(row.value), keyVersion: row.value.key_version, publicKey: currentKey(row.value) }
      }),
    revokeMandate: (signed) =>
      Effect.gen(function* () {
        const req = Schema.decodeUnknownOption(RevocationRequest)(signed)
        if (Option.isNone(req)) return yield* Effect.fail(new MalformedRevocation({ code: "MISSING_FIELD", message: "expected { type: \"MandateRevocation\", jti, grantor, proof }" }))
        const grantor = normalizeDid(req.value.grantor)
        if (grantor === undefined) return yield* Effect.fail(new InvalidDid({ code: "INVALID_DID", message: "grantor is not a did:mesh DID" }))
        const row = yield* q(store.entryByDid(grantor))
        if (Option.isNone(row) || row.value.public_key_b64 === null) return yield* Effect.fail(didNotRegistered(grantor))
        yield* verifyMessage(signed as Record<string, unknown>, currentKey(row.value), { verificationMethod: verificationMethodId(grantor) }).pipe(
          Effect.provideService(Keys, keys),
          Effect.mapError(() => signatureInvalid("revocation is not signed by the grantor's current key"))
        )
        const fresh = yield* q(store.revokeMandate(req.value.jti, grantor, yield* Clock.currentTimeMillis))
        if (!fresh) return yield* Effect.fail(new MandateAlreadyRevoked({ code: "ALREADY_REVOKED", message: `mandate ${req.value.jti} is already revoked` }))
        return { jti: req.value.jti }
      }),
    agentKeyActsFor,
    isMandateRevoked: (jti, grantor) => q(store.isMandateRevoked(jti, normalizeDid(grantor) ?? grantor)),
    ping: store.ping
  }
  return api
})

/** The registry with default settings. */
export const make: Effect.Effect<RegistryApi, never, RegistryStore | Keys> = makeWith()

/** The registry over `RegistryStore` and `Keys`. */
export const layer: Layer.Layer<Registry, never, RegistryStore | Keys> = Layer.effect(Registry, make)

/** The registry with explicit settings (write quotas, proof freshness, search and size limits). */
export const layerWith = (options: RegistryOptions): Layer.Layer<Registry, never, RegistryStore | Keys> => Layer.effect(Registry, makeWith(options))
