/**
 * Mandates: short-lived signed tokens delegating authority from a grantor DID to exactly one grantee DID.
 *
 * A mandate is a JWS compact token (`alg: EdDSA`, `typ: mandate+jwt`, `kid: <grantor>#key-1`) whose payload holds
 * `iss aud iat nbf exp jti kv kind cns prf`. An attenuated mandate carries its whole parent token in `prf`; the
 * chain verifies offline: every link's signature under its grantor's current key and key version, each child
 * within its parent in time, grantee and constraints. The normative text is docs/protocol.md §9.
 *
 * Signatures go through the `Keys` service and always cover the exact received bytes; nothing is re-serialized
 * before a check, and non-canonical base64url is refused, so a re-encoded or trimmed token never verifies.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import {
  type AnyConstraints,
  type ConstraintsFor,
  constraintsProblem,
  MANDATE_KINDS,
  type MandateKind,
  type ModelBudgetConstraints,
  narrowingViolation,
  normalizeTask,
  type PaymentConstraints,
  type SpendingConstraints,
  type TaskConstraints,
  withCanonicalUsd
} from "./Constraints.js"
import { isNormalizedDid, normalizeDid, verificationMethodId } from "./Did.js"
import { Keys, type MalformedKey, type PrivateKey, type PrivateKeyInput } from "./Keys.js"
import { KeyResolver, type KeyResolverApi } from "./KeyResolver.js"
import { MandateCache, type MandateCacheApi, type MandateLink as Link, type ParsedChain } from "./MandateCache.js"
import { decodeBase64UrlJson, decodeBase64UrlStrict } from "./internal/base64url.js"
import { toBase64Url, utf8 } from "./internal/bytes.js"
import { Entropy } from "./Entropy.js"
import { isRecord } from "./internal/record.js"

export type { MandateKind } from "./Constraints.js"

/** The JWS `typ` of every mandate. */
export const MANDATE_TYP = "mandate+jwt"
/** Longest token accepted, in characters; bounds the work an attacker can make a verifier do. */
export const MAX_TOKEN_LENGTH = 65_536
/** Most links in a chain (root included), whatever the constraints say: depth (prf links) is at most 7. */
export const MAX_CHAIN_LENGTH = 8
/** Default lifetime of an issued mandate. */
export const DEFAULT_TTL_SECONDS = 3600
/** Default tolerance for a verifier clock running behind the issuer's, applied to `nbf` only. */
export const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30

/** Why a mandate did not verify (docs/protocol.md §9.7 gives each one's recovery rule). */
export const MandateInvalidReason = Schema.Literal(
  "MALFORMED",
  "EXPIRED",
  "NOT_YET_VALID",
  "GRANTEE_MISMATCH",
  "KIND_MISMATCH",
  "KEY_NOT_FOUND",
  "KEY_REVOKED",
  "RESOLVER_UNAVAILABLE",
  "KEY_ROTATED",
  "SIGNATURE_INVALID",
  "REVOKED",
  "CHAIN_BROKEN",
  "ATTENUATION_WIDENED",
  "DEPTH_EXCEEDED"
)
/** Why a mandate did not verify. */
export type MandateInvalidReason = typeof MandateInvalidReason.Type

/** A mandate (or a link of its chain) failed verification; `reason` says which rule, `message` the detail. */
export class MandateInvalid extends Schema.TaggedError<MandateInvalid>()("MandateInvalid", {
  code: Schema.Literal("MANDATE_INVALID"),
  reason: MandateInvalidReason,
  message: Schema.String
}) {}

const invalid = (reason: MandateInvalidReason, message: string) => new MandateInvalid({ code: "MANDATE_INVALID", reason, message })

/** Why a mandate could not be issued or attenuated; nothing was signed. */
export const MandateIssueCode = Schema.Literal(
  "INVALID_CONSTRAINTS",
  "INVALID_DID",
  "INVALID_TTL",
  "PARENT_INVALID",
  "PARENT_EXPIRED",
  "ATTENUATION_WIDENED",
  "DELEGATION_DEPTH_EXCEEDED",
  "CHAIN_BROKEN",
  "GRANTEE_MISMATCH"
)
/** Why a mandate could not be issued or attenuated. */
export type MandateIssueCode = typeof MandateIssueCode.Type

/** Issuing or attenuating was refused before anything was signed. */
export class MandateIssueError extends Schema.TaggedError<MandateIssueError>()("MandateIssueError", {
  code: MandateIssueCode,
  message: Schema.String
}) {}

const issueError = (code: MandateIssueCode, message: string) => new MandateIssueError({ code, message })

/** A decoded mandate. `token` is what must be passed on, exactly as issued. */
export interface Mandate<K extends MandateKind = MandateKind> {
  /** The JWS compact token, byte for byte as issued. */
  readonly token: string
  readonly kind: K
  /** `iss`: the DID granting authority. */
  readonly grantor: string
  /** `aud`: the one DID the authority is granted to. */
  readonly grantee: string
  /** `exp` as a date. */
  readonly expiry: Date
  /** `exp`, `iat`, `nbf`: NumericDate seconds. */
  readonly expiresAt: number
  readonly issuedAt: number
  readonly notBefore: number
  /** `jti`: unique id of this mandate. */
  readonly jti: string
  /** `kv`: the grantor's key version the mandate was signed under. */
  readonly keyVersion: number
  /** `cns`, in its JSON form. */
  readonly constraints: ConstraintsFor<K>
  /** The mandate `prf` carries (undefined for a root). */
  readonly parent: Mandate | undefined
  /** Number of `prf` links above this mandate (0 for a root). */
  readonly depth: number
}

/** The decoded form of a token (frozen: decoded chains are shared through the parse cache). */
class DecodedMandate implements Mandate {
  readonly depth: number
  constructor(
    readonly token: string,
    readonly kind: MandateKind,
    readonly grantor: string,
    readonly grantee: string,
    readonly expiresAt: number,
    readonly issuedAt: number,
    readonly notBefore: number,
    readonly jti: string,
    readonly keyVersion: number,
    readonly constraints: AnyConstraints,
    readonly parent: Mandate | undefined
  ) {
    this.depth = parent === undefined ? 0 : parent.depth + 1
  }
  /** A fresh Date per read: a shared, mutable Date could be altered by one caller under another's feet. */
  get expiry(): Date {
    return new Date(this.expiresAt * 1000)
  }
  /** The JSON view shows the decoded fields, `expiry` included. */
  toJSON(): unknown {
    return { ...this, expiry: this.expiry.toISOString() }
  }
}

const HEADER_KEYS = ["alg", "typ", "kid"]
const CLAIM_KEYS = ["iss", "aud", "iat", "nbf", "exp", "jti", "kv", "kind", "cns", "prf"]

const isTime = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0

/** The `kid` of a valid mandate header segment, or why the header is not one; remembered in `cache` when given. */
const headerKid = (segment: string, cache: MandateCacheApi | undefined): string | MandateInvalid => {
  const cached = cache?.headers.get(segment)
  if (cached !== undefined) return cached
  const header = decodeBase64UrlJson(segment)
  if (!isRecord(header)) return invalid("MALFORMED", "header is not base64url I-JSON (an object, no member named twice, no __proto__)")
  for (const k in header) if (!HEADER_KEYS.includes(k)) return invalid("MALFORMED", `unsupported header member ${JSON.stringify(k)}`)
  if (header.alg !== "EdDSA") return invalid("MALFORMED", "alg must be EdDSA")
  if (header.typ !== MANDATE_TYP) return invalid("MALFORMED", `typ must be ${MANDATE_TYP}`)
  if (typeof header.kid !== "string") return invalid("MALFORMED", "kid must be the grantor's #key-1")
  cache?.headers.set(segment, header.kid)
  return header.kid
}

/** Parses one token (not its parents' signatures), recursing into `prf`; root first in `into`. */
const parseLinks = (token: unknown, into: Array<Link>, remaining: number, cache: MandateCacheApi | undefined): Mandate | MandateInvalid => {
  if (typeof token !== "string") return invalid("MALFORMED", "token is not a string")
  if (token.length > MAX_TOKEN_LENGTH) return invalid("MALFORMED", `token longer than ${MAX_TOKEN_LENGTH} characters`)
  const d1 = token.indexOf(".")
  const d2 = d1 < 0 ? -1 : token.indexOf(".", d1 + 1)
  if (d1 < 0 || d2 < 0 || token.indexOf(".", d2 + 1) >= 0) return invalid("MALFORMED", "not a JWS compact token (three segments)")
  const kid = headerKid(token.slice(0, d1), cache)
  if (typeof kid !== "string") return kid
  // prf is a nested token, checked as strict base64url when parsed, so the fast path need not scan it.
  const p = decodeBase64UrlJson(token.slice(d1 + 1, d2), "prf")
  if (!isRecord(p)) return invalid("MALFORMED", "payload is not base64url I-JSON (an object, no claim named twice, no __proto__)")
  for (const k in p) if (!CLAIM_KEYS.includes(k)) return invalid("MALFORMED", `unknown claim ${JSON.stringify(k)}`)
  if (!isNormalizedDid(p.iss)) return invalid("MALFORMED", "iss must be a lower-case did:mesh DID")
  if (!isNormalizedDid(p.aud)) return invalid("MALFORMED", "aud must be a lower-case did:mesh DID")
  if (kid !== verificationMethodId(p.iss)) return invalid("MALFORMED", "kid must be the grantor's #key-1")
  if (!isTime(p.iat) || !isTime(p.nbf) || !isTime(p.exp)) return invalid("MALFORMED", "iat, nbf and exp must be NumericDate integers")
  if (p.nbf >= p.exp || p.iat > p.exp) return invalid("MALFORMED", "exp must come after iat and nbf")
  if (typeof p.jti !== "string" || p.jti.length === 0 || p.jti.length > 128) return invalid("MALFORMED", "jti must be a string of 1..128 characters")
  if (typeof p.kv !== "number" || !Number.isSafeInteger(p.kv) || p.kv < 1) return invalid("MALFORMED", "kv must be a positive integer")
  if (typeof p.kind !== "string" || !(MANDATE_KINDS as ReadonlyArray<string>).includes(p.kind)) return invalid("MALFORMED", "unknown kind")
  const kind = p.kind as MandateKind
  // Its shape is a parse check (docs/protocol.md §9.5 step 1); what it holds is checked after the leaf's signature.
  if (!isRecord(p.cns)) return invalid("MALFORMED", "cns must be an object")
  // Cheap (every list is capped) and recorded, not returned: a forgery is refused for its signature first.
  const cnsProblem = constraintsProblem(kind, p.cns)
  const signature = decodeBase64UrlStrict(token.slice(d2 + 1))
  if (signature === undefined || signature.length !== 64) return invalid("MALFORMED", "signature is not 64 bytes of base64url")
  let parent: Mandate | undefined
  if (p.prf !== undefined) {
    if (remaining <= 1) return invalid("DEPTH_EXCEEDED", `chain longer than ${MAX_CHAIN_LENGTH} links`)
    const r = parseLinks(p.prf, into, remaining - 1, cache)
    if (r instanceof MandateInvalid) return r
    parent = r
  }
  const mandate: Mandate = Object.freeze(
    new DecodedMandate(token, kind, p.iss, p.aud, p.exp, p.iat, p.nbf, p.jti, p.kv, (cnsProblem === undefined ? deepFreeze(p.cns) : p.cns) as unknown as AnyConstraints, parent)
  )
  into.push({ mandate, signingInput: utf8(token.slice(0, d2)), signature, cnsProblem })
  return mandate
}

/** Freezes a parsed JSON value all the way down (decoded mandates are shared through the parse cache). */
const deepFreeze = <T>(u: T): T => {
  if (typeof u === "object" && u !== null && !Object.isFrozen(u)) {
    for (const v of Object.values(u)) deepFreeze(v)
    Object.freeze(u)
  }
  return u
}

/**
 * The parsed chain of a token, from `cache` when it holds it. Only well-formed tokens up to the cache's
 * `maxTokenLength` are kept, so the cache cannot be grown by garbage (docs: MandateCache).
 */
const parseChain = (token: unknown, cache: MandateCacheApi | undefined): Either.Either<ParsedChain, MandateInvalid> => {
  const cacheable = cache !== undefined && typeof token === "string" && token.length <= cache.maxTokenLength
  if (cacheable) {
    const cached = cache.chains.get(token)
    if (cached !== undefined) return Either.right(cached)
  }
  const links: Array<Link> = []
  const r = parseLinks(token, links, MAX_CHAIN_LENGTH, cache)
  if (r instanceof MandateInvalid) return Either.left(r)
  const parsed: ParsedChain = { links: Object.freeze(links), constraints: constraintsOfChain(links) }
  if (cacheable) cache.chains.set(token, parsed)
  return Either.right(parsed)
}

/** The first link whose `cns` is not valid for its kind (bounded: every list is capped at MAX_LIST_ENTRIES). */
const constraintsOfChain = (links: ReadonlyArray<Link>): MandateInvalid | undefined => {
  for (let i = 0; i < links.length; i++) {
    const problem = links[i]!.cnsProblem
    if (problem !== undefined) return invalid("MALFORMED", links.length === 1 ? `cns: ${problem}` : `link ${i}: cns: ${problem}`)
  }
  return undefined
}

/** `chainProblem`, computed once per parsed chain. */
const structuralOf = (parsed: ParsedChain): MandateInvalid | undefined => {
  if (parsed.structural === undefined) parsed.structural = chainProblem(parsed.links) ?? null
  return parsed.structural ?? undefined
}

/** Structural checks between consecutive links: grantee → grantor, expiry, kinds and constraints. */
const chainProblem = (links: ReadonlyArray<Link>): MandateInvalid | undefined => {
  const root = links[0]!.mandate
  if (root.kind === "cart" || root.kind === "payment") {
    return invalid("CHAIN_BROKEN", `a ${root.kind} mandate must carry its parent in prf`)
  }
  for (let i = 1; i < links.length; i++) {
    const parent = links[i - 1]!.mandate
    const child = links[i]!.mandate
    if (parent.grantee !== child.grantor) {
      return invalid("CHAIN_BROKEN", `link ${i}: grantor ${child.grantor} is not the parent's grantee ${parent.grantee}`)
    }
    if (child.expiresAt > parent.expiresAt) return invalid("ATTENUATION_WIDENED", `link ${i}: expires after its parent`)
    const v = narrowingViolation(parent.kind, parent.constraints, child.kind, child.constraints)
    if (v !== undefined) return invalid(v.reason, `link ${i}: ${v.message}`)
  }
  return undefined
}

/** Where verification gets grantor keys: one public key (the token's own grantor, no key-version check) or a resolver. */
export type KeySource = Uint8Array | KeyResolverApi

/** Options of `verifyMandate`. */
export interface VerifyOptions {
  /** The DID presenting the mandate; it must be the leaf's grantee (GRANTEE_MISMATCH otherwise). */
  readonly expectedGrantee?: string
  /** Kinds the leaf may have (KIND_MISMATCH otherwise). */
  readonly kinds?: ReadonlyArray<MandateKind>
  /** Seconds a verifier's clock may run behind the issuer's for `nbf` (default 30); `exp` is never stretched. */
  readonly clockToleranceSeconds?: number
  /** Parse cache for this call; default: the runtime's `MandateCache` service when there is one, else none. */
  readonly cache?: MandateCacheApi
}

const resolveLinkKey = (source: KeySource, link: Link, isLeaf: boolean): Effect.Effect<Uint8Array, MandateInvalid> => {
  const m = link.mandate
  if (source instanceof Uint8Array) {
    return isLeaf
      ? Effect.succeed(source)
      : Effect.fail(invalid("KEY_NOT_FOUND", `no key for ${m.grantor}: a chain needs a KeyResolver`))
  }
  return Effect.flatMap(
    Effect.mapError(source.resolve(m.grantor), (e) =>
      invalid(e._tag === "KeyNotFound" ? "KEY_NOT_FOUND" : e._tag === "KeyResolverUnavailable" ? "RESOLVER_UNAVAILABLE" : "KEY_REVOKED", e.message)
    ),
    (resolved) =>
      resolved.keyVersion !== m.keyVersion
        ? Effect.fail(invalid("KEY_ROTATED", `${m.grantor} signed under key version ${m.keyVersion}; the current one is ${resolved.keyVersion}`))
        : Effect.succeed(resolved.publicKey)
  )
}

/**
 * Verifies a mandate and its whole chain offline, failing with `MandateInvalid`. Checks in order: shape (MALFORMED),
 * the leaf's key, key version and signature, every link's constraints (MALFORMED), the other links root first (key,
 * key version, signature), revocation of each link, the chain's structure, time, the leaf's kind and grantee. The
 * leaf's signature comes before anything whose cost a token's author controls, so a forgery costs one verification.
 */
export const verifyMandate = (
  token: string,
  keys: KeySource,
  options: VerifyOptions = {}
): Effect.Effect<Mandate, MandateInvalid, Keys> =>
  Effect.contextWithEffect((context: Context.Context<Keys>) => {
    const k = Context.get(context, Keys)
    const cache = options.cache ?? Context.getOrElse(context, MandateCache, () => undefined)
    const parsed = parseChain(token, cache)
    if (Either.isLeft(parsed)) return Effect.fail(parsed.left)
    const chain = parsed.right
    const { links } = chain
    const last = links.length - 1
    const revoked = keys instanceof Uint8Array ? undefined : keys.isMandateRevoked
    const checkSignature = (i: number): Effect.Effect<void, MandateInvalid> => {
      const link = links[i]!
      return Effect.flatMap(resolveLinkKey(keys, link, i === last), (publicKey) =>
        Effect.flatMap(
          Effect.mapError(k.verify(publicKey, link.signingInput, link.signature), (e) => invalid("SIGNATURE_INVALID", e.message)),
          (ok): Effect.Effect<void, MandateInvalid> =>
            ok ? Effect.void : Effect.fail(invalid("SIGNATURE_INVALID", `link ${i}: signature does not verify under ${link.mandate.grantor}'s key`))
        )
      )
    }
    const checkParents = (i: number): Effect.Effect<void, MandateInvalid> =>
      i >= last ? Effect.void : Effect.flatMap(checkSignature(i), () => checkParents(i + 1))
    const checkRevoked = (i: number): Effect.Effect<void, MandateInvalid> => {
      if (revoked === undefined || i > last) return Effect.void
      const m = links[i]!.mandate
      return Effect.flatMap(revoked(m.jti, m.grantor), (r) =>
        r ? Effect.fail(invalid("REVOKED", `link ${i}: mandate ${m.jti} was revoked`)) : checkRevoked(i + 1)
      )
    }
    return checkSignature(last).pipe(
      Effect.flatMap(() => (chain.constraints === undefined ? checkParents(0) : Effect.fail(chain.constraints))),
      Effect.flatMap(() => checkRevoked(0)),
      Effect.flatMap(() => Clock.currentTimeMillis),
      Effect.flatMap((nowMs) => {
        const structural = structuralOf(chain)
        if (structural !== undefined) return Effect.fail(structural)
        const now = Math.floor(nowMs / 1000)
        const tolerance = options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS
        for (let i = 0; i <= last; i++) {
          const m = links[i]!.mandate
          if (now >= m.expiresAt) return Effect.fail(invalid("EXPIRED", `link ${i}: expired at ${m.expiresAt}`))
          if (now + tolerance < m.notBefore) return Effect.fail(invalid("NOT_YET_VALID", `link ${i}: not valid before ${m.notBefore}`))
        }
        const leaf = links[last]!.mandate
        if (options.kinds !== undefined && !options.kinds.includes(leaf.kind)) {
          return Effect.fail(invalid("KIND_MISMATCH", `a ${leaf.kind} mandate where ${options.kinds.join(" or ")} was expected`))
        }
        if (options.expectedGrantee !== undefined && options.expectedGrantee.toLowerCase() !== leaf.grantee) {
          return Effect.fail(invalid("GRANTEE_MISMATCH", `granted to ${leaf.grantee}, presented by ${options.expectedGrantee}`))
        }
        return Effect.succeed(leaf)
      })
    )
  })

/** `verifyMandate` with the `KeyResolver` service as key source. */
export const verifyMandateChain = (
  token: string,
  options: VerifyOptions = {}
): Effect.Effect<Mandate, MandateInvalid, Keys | KeyResolver> =>
  Effect.flatMap(KeyResolver, (resolver) => verifyMandate(token, resolver, options))

/**
 * Decodes a token and its chain without checking any signature, time or key: for display and routing only.
 * `cache` is used when given; this synchronous form cannot read the runtime's `MandateCache`.
 */
export const decodeUnverified = (token: string, cache?: MandateCacheApi): Either.Either<Mandate, MandateInvalid> =>
  Either.flatMap(parseChain(token, cache), ({ links, constraints }) =>
    constraints === undefined ? Either.right(links[links.length - 1]!.mandate) : Either.left(constraints)
  )

// ---------------------------------------------------------------------------------------------------------------
// Issuing

/** What issuing a root mandate takes besides its constraints. */
export interface IssueOptions {
  readonly grantorDid: string
  readonly granteeDid: string
  /** The grantor's key: `PrivateKey`, seed or PKCS#8 (bytes or base64), or a `KeyObject`. */
  readonly privateKey: PrivateKeyInput
  /** Lifetime (default 3600). */
  readonly ttlSeconds?: number
  /** The grantor's current key version (default 1). */
  readonly keyVersion?: number
}

/** What attenuating takes besides the narrowed constraints. The grantor is the parent's grantee. */
export interface AttenuateOptions {
  /** The parent mandate or its token. */
  readonly parent: Mandate | string
  readonly granteeDid: string
  /** The key of the parent's grantee, who grants the child. */
  readonly grantorPrivateKey: PrivateKeyInput
  /**
   * The DID whose key `grantorPrivateKey` is. When given it must be the parent's grantee (`GRANTEE_MISMATCH`
   * otherwise): a child signed with another DID's key names the grantee in its `kid` and fails every verification.
   */
  readonly grantorDid?: string
  /** Lifetime (default 3600), cut to the parent's expiry: a child never outlives its parent. */
  readonly ttlSeconds?: number
  /** The attenuating grantor's current key version (default 1). */
  readonly keyVersion?: number
}

/** A USD amount as an issuer takes it: a number, or the decimal string Money reads (`"5.00"`); tokens carry the canonical number. */
export type UsdInput = number | string

/** Constraints as an issuer takes them: the USD members `K` as a number or a decimal string. */
export type WithUsdInput<T, K extends keyof T> = Omit<T, K> & { readonly [P in K]: UsdInput }

/** Errors of issuing and attenuating. */
export type IssueFailure = MandateIssueError | MalformedKey

/** `Did.normalizeDid` with the issuing error: which party (`what`) was not a DID. */
const issuingDid = (did: string, what: string): Either.Either<string, MandateIssueError> => {
  const d = normalizeDid(did)
  return d !== undefined ? Either.right(d) : Either.left(issueError("INVALID_DID", `${what} ${JSON.stringify(did)} is not a did:mesh DID`))
}

interface SignRequest {
  readonly kind: MandateKind
  readonly grantor: string
  readonly grantee: string
  readonly constraints: AnyConstraints
  readonly key: PrivateKeyInput
  readonly ttlSeconds: number | undefined
  readonly keyVersion: number | undefined
  readonly parent: Mandate | undefined
}

/** Validates, then signs; the returned mandate is parsed back from the token, so it is exactly what verifiers see. */
const sign = <K extends MandateKind>(req: SignRequest): Effect.Effect<Mandate<K>, IssueFailure, Keys> =>
  Effect.gen(function* () {
    const grantor = yield* issuingDid(req.grantor, "grantor")
    const grantee = yield* issuingDid(req.grantee, "grantee")
    const ttl = req.ttlSeconds ?? DEFAULT_TTL_SECONDS
    if (!Number.isSafeInteger(ttl) || ttl <= 0) return yield* Effect.fail(issueError("INVALID_TTL", "ttlSeconds must be a positive integer"))
    const kv = req.keyVersion ?? 1
    if (!Number.isSafeInteger(kv) || kv < 1) return yield* Effect.fail(issueError("INVALID_CONSTRAINTS", "keyVersion must be a positive integer"))
    const constraints = withCanonicalUsd(req.kind, req.constraints) as AnyConstraints
    const problem = constraintsProblem(req.kind, constraints)
    if (problem !== undefined) return yield* Effect.fail(issueError("INVALID_CONSTRAINTS", problem))
    const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    let exp = now + ttl
    const parent = req.parent
    if (parent !== undefined) {
      if (parent.grantee !== grantor) {
        return yield* Effect.fail(issueError("CHAIN_BROKEN", `the parent was granted to ${parent.grantee}, not to ${grantor}`))
      }
      if (now >= parent.expiresAt) return yield* Effect.fail(issueError("PARENT_EXPIRED", `the parent expired at ${parent.expiresAt}`))
      if (parent.depth + 2 > MAX_CHAIN_LENGTH) {
        return yield* Effect.fail(issueError("DELEGATION_DEPTH_EXCEEDED", `a chain holds at most ${MAX_CHAIN_LENGTH} links`))
      }
      const v = narrowingViolation(parent.kind, parent.constraints, req.kind, constraints)
      if (v !== undefined) {
        return yield* Effect.fail(issueError(v.reason === "DEPTH_EXCEEDED" ? "DELEGATION_DEPTH_EXCEEDED" : v.reason, v.message))
      }
      exp = Math.min(exp, parent.expiresAt)
    }
    const keys = yield* Keys
    const key: PrivateKey = yield* keys.importPrivateKey(req.key)
    const header = { alg: "EdDSA", typ: MANDATE_TYP, kid: verificationMethodId(grantor) }
    const payload = {
      iss: grantor,
      aud: grantee,
      iat: now,
      nbf: now,
      exp,
      jti: toBase64Url((yield* Entropy).bytes(16)),
      kv,
      kind: req.kind,
      cns: constraints,
      ...(parent === undefined ? {} : { prf: parent.token })
    }
    const signingInput = `${toBase64Url(utf8(JSON.stringify(header)))}.${toBase64Url(utf8(JSON.stringify(payload)))}`
    const signature = yield* keys.sign(key, utf8(signingInput))
    const token = `${signingInput}.${toBase64Url(signature)}`
    const parsed = decodeUnverified(token)
    // Unreachable unless validation and parsing disagree; a defect, not a caller's error.
    if (Either.isLeft(parsed)) return yield* Effect.die(parsed.left)
    return parsed.right as Mandate<K>
  })

const parentMandate = (parent: Mandate | string): Either.Either<Mandate, MandateIssueError> =>
  typeof parent === "string"
    ? Either.mapLeft(decodeUnverified(parent), (e) => issueError("PARENT_INVALID", `${e.reason}: ${e.message}`))
    : Either.right(parent)

const attenuate = <K extends MandateKind>(
  kind: K,
  options: AttenuateOptions,
  constraints: ConstraintsFor<K>
): Effect.Effect<Mandate<K>, IssueFailure, Keys> =>
  Effect.flatMap(parentMandate(options.parent), (parent) => {
    const holder = options.grantorDid === undefined ? undefined : normalizeDid(options.grantorDid) ?? options.grantorDid
    if (holder !== undefined && holder !== parent.grantee) {
      return Effect.fail(issueError("GRANTEE_MISMATCH", `the parent was granted to ${parent.grantee}; ${holder} cannot attenuate it`))
    }
    return sign<K>({
      kind,
      grantor: parent.grantee,
      grantee: options.granteeDid,
      constraints,
      key: options.grantorPrivateKey,
      ttlSeconds: options.ttlSeconds,
      keyVersion: options.keyVersion,
      parent
    })
  })

// fromEntries defines members, so a caller's own `__proto__` stays a member (and is refused as unknown) rather than
// becoming the copy's prototype, as assignment would make it.
const dropUndefined = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T

/** Issues an intent mandate: the root of a spending chain, bounding total spend and (optionally) merchants. */
export const issueIntentMandate = (
  options: IssueOptions & { readonly constraints: WithUsdInput<SpendingConstraints, "spendLimitUsd"> }
): Effect.Effect<Mandate<"intent">, IssueFailure, Keys> =>
  sign<"intent">({
    kind: "intent",
    grantor: options.grantorDid,
    grantee: options.granteeDid,
    constraints: dropUndefined(options.constraints) as SpendingConstraints,
    key: options.privateKey,
    ttlSeconds: options.ttlSeconds,
    keyVersion: options.keyVersion,
    parent: undefined
  })

/** Attenuates an intent into a cart mandate with a spend limit and merchants within the parent's. */
export const attenuateToCart = (
  options: AttenuateOptions & { readonly narrowed: WithUsdInput<SpendingConstraints, "spendLimitUsd"> }
): Effect.Effect<Mandate<"cart">, IssueFailure, Keys> => attenuate("cart", options, dropUndefined(options.narrowed) as SpendingConstraints)

/** Attenuates an intent or cart into a payment mandate for one amount to one merchant. */
export const attenuateToPayment = (
  options: AttenuateOptions & { readonly amountUsd: UsdInput; readonly merchant: string }
): Effect.Effect<Mandate<"payment">, IssueFailure, Keys> =>
  // The amount is written in its canonical form by `sign`.
  attenuate<"payment">("payment", options, { amountUsd: options.amountUsd, merchant: options.merchant } as PaymentConstraints)

/** Issues a root task mandate; optional constraint members are written out at their defaults. */
export const issueTaskMandate = (
  options: IssueOptions & { readonly constraints: TaskConstraints }
): Effect.Effect<Mandate<"task">, IssueFailure, Keys> =>
  Effect.suspend(() => {
    const problem = constraintsProblem("task", options.constraints)
    if (problem !== undefined) return Effect.fail(issueError("INVALID_CONSTRAINTS", problem))
    return sign<"task">({
      kind: "task",
      grantor: options.grantorDid,
      grantee: options.granteeDid,
      constraints: normalizeTask(options.constraints),
      key: options.privateKey,
      ttlSeconds: options.ttlSeconds,
      keyVersion: options.keyVersion,
      parent: undefined
    })
  })

/** Attenuates a task mandate; the narrowed constraints must be within the parent's (docs/protocol.md §9.4). */
export const attenuateTaskMandate = (
  options: AttenuateOptions & { readonly constraints: TaskConstraints }
): Effect.Effect<Mandate<"task">, IssueFailure, Keys> =>
  Effect.suspend(() => {
    const problem = constraintsProblem("task", options.constraints)
    if (problem !== undefined) return Effect.fail(issueError("INVALID_CONSTRAINTS", problem))
    return attenuate("task", options, normalizeTask(options.constraints))
  })

/** Issues a root model-budget mandate (token and cost budgets, quality bar, task type) for model routing. */
export const issueModelBudgetMandate = (
  options: IssueOptions & { readonly constraints: WithUsdInput<ModelBudgetConstraints, "cost_budget_usd"> }
): Effect.Effect<Mandate<"model-budget">, IssueFailure, Keys> =>
  sign<"model-budget">({
    kind: "model-budget",
    grantor: options.grantorDid,
    grantee: options.granteeDid,
    constraints: { ...options.constraints } as ModelBudgetConstraints,
    key: options.privateKey,
    ttlSeconds: options.ttlSeconds,
    keyVersion: options.keyVersion,
    parent: undefined
  })

/** Attenuates a model-budget mandate: budgets and steps only shrink, the quality bar only rises, the task type stays. */
export const attenuateModelBudgetMandate = (
  options: AttenuateOptions & { readonly constraints: WithUsdInput<ModelBudgetConstraints, "cost_budget_usd"> }
): Effect.Effect<Mandate<"model-budget">, IssueFailure, Keys> => attenuate("model-budget", options, { ...options.constraints } as ModelBudgetConstraints)

/** The chain of a mandate, root first. */
export const chainOf = (mandate: Mandate): ReadonlyArray<Mandate> => {
  const out: Array<Mandate> = []
  for (let m: Mandate | undefined = mandate; m !== undefined; m = m.parent) out.push(m)
  return out.reverse()
}
