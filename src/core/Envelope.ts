/**
 * Signed envelopes: how agents talk. Build signs with eddsa-jcs-2022; validation checks, in this order, shape,
 * addressee, time window, signature, and only then the nonce, so forged traffic cannot burn nonces.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { replaysRefusedEnvelope } from "./MeshMetrics.js"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Did, type InvalidDid, invalidDid, isNormalizedDid, normalizeDid, verificationMethodId } from "./Did.js"
import { canonicalFast, canonicalJson, isPlainString, type NotCanonicalizable, quote } from "./Canonical.js"
import { isPrivateKey, Keys, type KeysApi, type MalformedKey, type PrivateKey, type PrivateKeyInput, sha256Text, signWith } from "./Keys.js"
import { type NonceRecordError, nonceRefusal, type NonceStoreApi, recordAtTime } from "./NonceStore.js"
import { CRYPTOSUITE, DataIntegrityProof, hashData, type ProofOptions } from "./Proof.js"
import { fromBase64, fromMultibase58, toBase64Url, toMultibase58 } from "./internal/bytes.js"
import { csprng, Entropy, type EntropyApi } from "./Entropy.js"
import { isRecord } from "./internal/record.js"
import { formatUtcTimestamp, parseUtcTimestamp, UTC_TIMESTAMP } from "./internal/timestamp.js"

/** The closed set of reasons an envelope is refused (docs/protocol.md §5). */
export const EnvelopeErrorCode = Schema.Literal(
  "MALFORMED",
  "WRONG_RECIPIENT",
  "NOT_YET_VALID",
  "EXPIRED",
  "TTL_TOO_LONG",
  "SIGNATURE_INVALID",
  "REPLAYED",
  "NONCE_STORE_FULL",
  "NONCE_QUOTA_EXCEEDED",
  "NONCE_STORE_UNAVAILABLE"
)
/** The closed set of reasons an envelope is refused. */
export type EnvelopeErrorCode = typeof EnvelopeErrorCode.Type

/** An envelope that was refused, or could not be built; `code` says why. */
export class EnvelopeError extends Schema.TaggedError<EnvelopeError>()("EnvelopeError", {
  code: EnvelopeErrorCode,
  message: Schema.String
}) {}

const fail = (code: EnvelopeErrorCode, message: string) => Effect.fail(new EnvelopeError({ code, message }))

/**
 * An RFC 3339 UTC timestamp: written as `Date.prototype.toISOString` does (`2026-01-01T00:00:00.000Z`), read in any
 * UTC form (`Z`/`z`, `+00:00`, `-00:00`, a fraction of any length; docs/protocol.md §1).
 */
export const Timestamp = Schema.String.pipe(
  Schema.maxLength(64),
  Schema.pattern(UTC_TIMESTAMP),
  Schema.filter((s) => parseUtcTimestamp(s) !== undefined, { message: () => "not a date (RFC 3339, UTC)" })
)

/** A JSON object (not an array, not null). */
export const JsonObject = Schema.declare(
  (u: unknown): u is { readonly [key: string]: unknown } => typeof u === "object" && u !== null && !Array.isArray(u),
  { identifier: "JsonObject" }
)

const Bounded = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

/** The wire form of an envelope. Every field is covered by the proof. */
export const Envelope = Schema.Struct({
  type: Bounded(128),
  id: Bounded(256),
  from: Did,
  to: Did,
  correlationId: Bounded(256),
  nonce: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{16,128}$/)),
  createdAt: Timestamp,
  expiresAt: Timestamp,
  body: JsonObject,
  proof: DataIntegrityProof
})
/** A signed envelope. */
export type Envelope = typeof Envelope.Type

/** The body of a `MeshRequest`. */
export const RequestBody = Schema.Struct({ capability: Schema.String, params: Schema.Unknown })
/** The body of a `MeshResponse`. */
export const ResponseBody = Schema.Struct({ capability: Schema.String, result: Schema.Unknown })

/** The usual envelope types; `type` is open, these are the ones the mesh itself sends. */
export const MESH_REQUEST = "MeshRequest"
/** The usual envelope types; `type` is open, these are the ones the mesh itself sends. */
export const MESH_RESPONSE = "MeshResponse"

/** Default envelope lifetime. */
export const DEFAULT_TTL_SECONDS = 300
/** Longest lifetime an envelope may claim, by default; bounds how long a nonce must be remembered. */
export const DEFAULT_MAX_TTL_SECONDS = 86_400
/** Default allowance for clock skew between sender and receiver. */
export const DEFAULT_CLOCK_TOLERANCE_MS = 30_000

/** A fresh correlation id (a random UUID from `entropy`, the platform CSPRNG by default). */
export const newCorrelationId = (entropy: EntropyApi = csprng): string => entropy.uuid()

/** A fresh 128-bit nonce, base64url, from `entropy` (the platform CSPRNG by default). */
export const newNonce = (entropy: EntropyApi = csprng): string => toBase64Url(entropy.nonceBytes(16))

type FrameTexts = { readonly unsecured: string; readonly options: string }

/**
 * JCS of an envelope's unsecured members and of its proof options, written directly in sorted key order: the frame
 * costs more through the generic canonicalizer than the body does. Undefined when a string needs the generic
 * path; a property test keeps this equal to `canonicalize`.
 */
export const canonicalEnvelope = (u: Omit<Envelope, "proof">, o: ProofOptions): FrameTexts | undefined => canonicalFrame(u, o, false)

/**
 * `canonicalEnvelope` of a frame whose DIDs, nonce, times and proof `created`, `cryptosuite`, `type` and
 * `verificationMethod` are known to be plain: one `buildEnvelope` made, or one `isEnvelope` and `checkEnvelope`
 * passed (normalized DIDs, the nonce and timestamp patterns, the two constants, `created` equal to `createdAt`, the
 * method derived from `from`). Only the strings that may hold anything are looked at; a property test keeps this
 * equal to `canonicalEnvelope` on every envelope that passes those checks.
 */
export const canonicalCheckedEnvelope = (u: Omit<Envelope, "proof">, o: ProofOptions): FrameTexts | undefined => canonicalFrame(u, o, true)

/** Both of the above: `checked` says which strings are already known to be plain. */
const canonicalFrame = (u: Omit<Envelope, "proof">, o: ProofOptions, checked: boolean): FrameTexts | undefined => {
  if (o["@context"] !== undefined || o.created === undefined) return undefined
  const body = canonicalFast(u.body)
  // Every frame string is plain when the envelope came from `buildEnvelope` or passed `isEnvelope` with ordinary
  // ids: written between quotes with no array of parts to collect and check.
  const plainFrame = body !== undefined && isPlainString(u.correlationId) && isPlainString(u.id) && isPlainString(u.type) &&
    isPlainString(o.proofPurpose) &&
    (checked || (isPlainString(u.createdAt) && isPlainString(u.expiresAt) && isPlainString(u.from) && isPlainString(u.nonce) &&
      isPlainString(u.to) && isPlainString(o.created) && isPlainString(o.cryptosuite) && isPlainString(o.type) && isPlainString(o.verificationMethod)))
  return plainFrame ? frameTexts(u, o, body) : canonicalEnvelopeGeneral(u, o, body)
}

/** The two JCS texts of a frame every string of which is plain, around the body's JCS. */
const frameTexts = (u: Omit<Envelope, "proof">, o: ProofOptions, body: string): FrameTexts => ({
  unsecured: `{"body":${body},"correlationId":"${u.correlationId}","createdAt":"${u.createdAt}","expiresAt":"${u.expiresAt}","from":"${u.from}","id":"${u.id}","nonce":"${u.nonce}","to":"${u.to}","type":"${u.type}"}`,
  options: `{"created":"${o.created}","cryptosuite":"${o.cryptosuite}","proofPurpose":"${o.proofPurpose}","type":"${o.type}","verificationMethod":"${o.verificationMethod}"}`
})

/** The frame with each string quoted as JCS does; the body's JCS as already written, when it was. */
const canonicalEnvelopeGeneral = (u: Omit<Envelope, "proof">, o: ProofOptions, bodyText: string | undefined): FrameTexts | undefined => {
  const body = bodyText ?? Either.getOrUndefined(canonicalJson(u.body))
  if (body === undefined) return undefined
  const parts = [quote(u.correlationId), quote(u.createdAt), quote(u.expiresAt), quote(u.from), quote(u.id), quote(u.nonce), quote(u.to), quote(u.type)]
  const opt = [quote(o.created!), quote(o.cryptosuite), quote(o.proofPurpose), quote(o.type), quote(o.verificationMethod)]
  if (parts.includes(undefined) || opt.includes(undefined)) return undefined
  return {
    unsecured: `{"body":${body},"correlationId":${parts[0]},"createdAt":${parts[1]},"expiresAt":${parts[2]},"from":${parts[3]},"id":${parts[4]},"nonce":${parts[5]},"to":${parts[6]},"type":${parts[7]}}`,
    options: `{"created":${opt[0]},"cryptosuite":${opt[1]},"proofPurpose":${opt[2]},"type":${opt[3]},"verificationMethod":${opt[4]}}`
  }
}

/** SHA-256(options) ‖ SHA-256(unsecured document) of the texts `canonicalEnvelope` wrote. */
const frameHashData = (keys: KeysApi, fast: FrameTexts): Uint8Array => {
  const out = new Uint8Array(64)
  out.set(sha256Text(keys, fast.options), 0)
  out.set(sha256Text(keys, fast.unsecured), 32)
  return out
}

/** The bytes a built envelope's proof signs (eddsa-jcs-2022 hashData), by the fast path when it applies. */
const envelopeHashData = (keys: KeysApi, u: Omit<Envelope, "proof">, o: ProofOptions): Either.Either<Uint8Array, NotCanonicalizable> => {
  const fast = canonicalCheckedEnvelope(u, o)
  return fast === undefined ? hashData(keys, o, u) : Either.right(frameHashData(keys, fast))
}

/** What `buildEnvelope` takes. */
export interface BuildEnvelopeInput {
  readonly type: string
  readonly from: string
  readonly to: string
  readonly body: { readonly [key: string]: unknown }
  readonly privateKey: PrivateKeyInput
  /** Defaults to a new id; a response carries its request's. */
  readonly correlationId?: string
  /** Seconds until the envelope expires; default 300, at most 86 400. */
  readonly ttlSeconds?: number
}

/**
 * Builds and signs an envelope (`id`, `nonce` and times are filled in; time from Effect's Clock). Everything after
 * the key import is one synchronous step when the `Keys` layer signs synchronously (`signSync`).
 */
export const buildEnvelope = (
  input: BuildEnvelopeInput
): Effect.Effect<Envelope, EnvelopeError | InvalidDid | MalformedKey, Keys> =>
  Effect.contextWithEffect((context: Context.Context<Keys>) => {
    const keys = Context.get(context, Keys)
    const entropy = Context.get(context, Entropy)
    return isPrivateKey(input.privateKey)
      ? buildWithKey(input, keys, entropy, input.privateKey)
      : Effect.flatMap(keys.importPrivateKey(input.privateKey), (key) => buildWithKey(input, keys, entropy, key))
  })

/** `buildEnvelope` once the key is imported. */
const buildWithKey = (input: BuildEnvelopeInput, keys: KeysApi, entropy: EntropyApi, key: PrivateKey): Effect.Effect<Envelope, EnvelopeError | InvalidDid> => {
  const from = normalizeDid(input.from)
  const to = normalizeDid(input.to)
  if (from === undefined) return Effect.fail(invalidDid(input.from))
  if (to === undefined) return Effect.fail(invalidDid(input.to))
  const ttl = input.ttlSeconds ?? DEFAULT_TTL_SECONDS
  if (!Number.isFinite(ttl) || ttl <= 0 || ttl > DEFAULT_MAX_TTL_SECONDS) {
    return fail("TTL_TOO_LONG", `ttlSeconds must be in (0, ${DEFAULT_MAX_TTL_SECONDS}], got ${ttl}`)
  }
  if (typeof input.type !== "string" || input.type.length === 0 || input.type.length > 128) {
    return fail("MALFORMED", "type must be a string of 1 to 128 characters")
  }
  return Effect.clockWith((clock) => {
    const now = clock.unsafeCurrentTimeMillis()
    const createdAt = formatUtcTimestamp(now)
    const unsecured = {
      type: input.type,
      id: `urn:uuid:${entropy.uuid()}`,
      from,
      to,
      correlationId: input.correlationId ?? entropy.uuid(),
      nonce: newNonce(entropy),
      createdAt,
      expiresAt: formatUtcTimestamp(now + Math.round(ttl * 1000)),
      body: input.body
    }
    const options: ProofOptions = {
      type: "DataIntegrityProof",
      cryptosuite: CRYPTOSUITE,
      created: createdAt,
      verificationMethod: verificationMethodId(from),
      proofPurpose: "assertionMethod"
    }
    const data = envelopeHashData(keys, unsecured, options)
    if (Either.isLeft(data)) return fail("MALFORMED", `body is not JSON: ${data.left.message}`)
    return Effect.map(signWith(keys, key, data.right), (sig) => signedEnvelope(unsecured, options.verificationMethod, sig))
  })
}

/** The envelope of `unsecured` with its proof. Written out rather than spread: this runs once per message sent. */
const signedEnvelope = (unsecured: Omit<Envelope, "proof">, verificationMethod: string, sig: Uint8Array): Envelope => ({
  type: unsecured.type,
  id: unsecured.id,
  from: unsecured.from,
  to: unsecured.to,
  correlationId: unsecured.correlationId,
  nonce: unsecured.nonce,
  createdAt: unsecured.createdAt,
  expiresAt: unsecured.expiresAt,
  body: unsecured.body,
  proof: {
    type: "DataIntegrityProof",
    cryptosuite: CRYPTOSUITE,
    created: unsecured.createdAt,
    verificationMethod,
    proofPurpose: "assertionMethod",
    proofValue: toMultibase58(sig)
  }
})

/** Options of `validateEnvelope`. */
export interface ValidateOptions {
  /**
   * Skip the signature check. Only for a trusted mesh (every hop authenticated some other way); each use logs a
   * warning. The nonce is still recorded.
   */
  readonly skipSignature?: boolean
  /** Allowed clock skew in ms, both ways; default 30 000. */
  readonly clockToleranceMs?: number
  /** Longest lifetime accepted; default 86 400 s. */
  readonly maxTtlSeconds?: number
}

const decodeEnvelope = Schema.decodeUnknownEither(Envelope, { onExcessProperty: "error" })

const ENVELOPE_KEYS = new Set(["type", "id", "from", "to", "correlationId", "nonce", "createdAt", "expiresAt", "body", "proof"])
const PROOF_KEYS = new Set(["type", "cryptosuite", "created", "verificationMethod", "proofPurpose", "@context", "proofValue"])
const NONCE = /^[A-Za-z0-9_-]{16,128}$/
const bounded = (u: unknown, max: number): u is string => typeof u === "string" && u.length >= 1 && u.length <= max
const onlyKeys = (o: object, allowed: ReadonlySet<string>) => {
  for (const k in o) if (!allowed.has(k)) return false
  return true
}
const timestampMs = (u: unknown): number | undefined => (typeof u === "string" && u.length <= 64 ? parseUtcTimestamp(u) : undefined)

/**
 * The same judgement as decoding with the `Envelope` schema (excess properties refused), written out by hand because
 * it runs on every message: Schema decoding cost more than the rest of validation but the signature (a property
 * test keeps the two equal). Schema still decodes a refused envelope, to say what is wrong.
 */
export const isEnvelope = (u: unknown): u is Envelope => envelopeTimes(u) !== undefined

/** `isEnvelope`, answering the envelope's two times (epoch ms) when it holds, so validation reads them once. */
const envelopeTimes = (u: unknown): { readonly createdMs: number; readonly expiresMs: number } | undefined => {
  if (!isRecord(u) || !onlyKeys(u, ENVELOPE_KEYS)) return undefined
  const p = u.proof
  if (!isRecord(p) || !onlyKeys(p, PROOF_KEYS)) return undefined
  const ctx = p["@context"]
  const createdMs = timestampMs(u.createdAt)
  const expiresMs = timestampMs(u.expiresAt)
  return (
      bounded(u.type, 128) && bounded(u.id, 256) && isNormalizedDid(u.from) && isNormalizedDid(u.to) &&
      bounded(u.correlationId, 256) && typeof u.nonce === "string" && NONCE.test(u.nonce) &&
      createdMs !== undefined && expiresMs !== undefined && isRecord(u.body) &&
      p.type === "DataIntegrityProof" && p.cryptosuite === CRYPTOSUITE &&
      (p.created === undefined || typeof p.created === "string") &&
      typeof p.verificationMethod === "string" && typeof p.proofPurpose === "string" &&
      (ctx === undefined || (Array.isArray(ctx) && ctx.every((c) => typeof c === "string"))) &&
      typeof p.proofValue === "string" && p.proofValue.startsWith("z")
    )
    ? { createdMs, expiresMs }
    : undefined
}

/**
 * Checks an envelope for `myDid` from a sender whose raw public key (bytes or publicKeyB64) is given, recording its
 * nonce in `nonceStore` once everything else holds. Succeeds with the decoded envelope.
 */
export const validateEnvelope = (
  envelope: unknown,
  senderPublicKey: Uint8Array | string,
  myDid: string,
  nonceStore: NonceStoreApi,
  options: ValidateOptions = {}
): Effect.Effect<Envelope, EnvelopeError, Keys> =>
  // Steps 1 to 4 are one synchronous function when the layer verifies synchronously; only the nonce is an effect.
  Effect.contextWithEffect((context: Context.Context<Keys>) =>
    Effect.clockWith((clock) => {
      const keys = Context.get(context, Keys)
      const now = clock.unsafeCurrentTimeMillis()
      const checked = checkEnvelope(envelope, senderPublicKey, myDid, options, now, keys)
      if (Either.isLeft(checked)) return Effect.fail(checked.left)
      const { env, retainUntilMs, verify } = checked.right
      const record = recordEnvelopeNonce(env, retainUntilMs, nonceStore, now)
      if (verify === "skipped") {
        return Effect.zipRight(Effect.logWarning(`envelope ${env.id} from ${env.from}: signature NOT checked (skipSignature; trusted mesh only)`), record)
      }
      if (verify === "verified") return record
      return Effect.flatMap(Effect.catchTag(keys.verify(verify.publicKey, verify.data, verify.signature), "MalformedKey", () => Effect.succeed(false)), (ok) =>
        ok ? record : fail("SIGNATURE_INVALID", "signature does not verify")
      )
    })
  )

/** What the synchronous steps of validation leave to do: nothing but the nonce, or the verification too. */
interface CheckedEnvelope {
  readonly env: Envelope
  readonly retainUntilMs: number
  readonly verify: "verified" | "skipped" | { readonly publicKey: Uint8Array; readonly data: Uint8Array; readonly signature: Uint8Array }
}

const refuse = (code: EnvelopeErrorCode, message: string) => Either.left(new EnvelopeError({ code, message }))

/** Steps 1 (shape), 2 (addressee), 3 (time window) and 4 (signature, when the layer verifies synchronously). */
const checkEnvelope = (
  envelope: unknown,
  senderPublicKey: Uint8Array | string,
  myDid: string,
  options: ValidateOptions,
  now: number,
  keys: KeysApi
): Either.Either<CheckedEnvelope, EnvelopeError> => {
  // 1. shape
  const times = envelopeTimes(envelope)
  if (times === undefined) {
    const decoded = decodeEnvelope(envelope)
    return refuse("MALFORMED", Either.isLeft(decoded) ? ParseResult.TreeFormatter.formatErrorSync(decoded.left) : "not an envelope")
  }
  const env = envelope as Envelope
  const { createdMs, expiresMs } = times
  if (env.proof.created !== env.createdAt) return refuse("MALFORMED", "proof.created must equal createdAt")
  if (env.proof.verificationMethod !== verificationMethodId(env.from)) {
    return refuse("MALFORMED", `proof must be by ${verificationMethodId(env.from)}`)
  }
  if (!(expiresMs > createdMs)) return refuse("MALFORMED", "expiresAt must be after createdAt")
  const maxTtlMs = (options.maxTtlSeconds ?? DEFAULT_MAX_TTL_SECONDS) * 1000
  if (expiresMs - createdMs > maxTtlMs) return refuse("TTL_TOO_LONG", `lifetime exceeds ${maxTtlMs / 1000} s`)

  // 2. addressee
  if (env.to !== myDid.toLowerCase()) return refuse("WRONG_RECIPIENT", `addressed to ${env.to}`)

  // 3. time window
  const tolerance = options.clockToleranceMs ?? DEFAULT_CLOCK_TOLERANCE_MS
  if (createdMs > now + tolerance) return refuse("NOT_YET_VALID", `created ${createdMs - now} ms in the future`)
  if (expiresMs <= now - tolerance) return refuse("EXPIRED", `expired ${now - expiresMs} ms ago`)
  const retainUntilMs = expiresMs + tolerance

  // 4. signature
  if (options.skipSignature === true) return Either.right({ env, retainUntilMs, verify: "skipped" })
  let publicKey: Uint8Array
  let signature: Uint8Array
  try {
    publicKey = typeof senderPublicKey === "string" ? fromBase64(senderPublicKey) : senderPublicKey
    signature = fromMultibase58(env.proof.proofValue)
  } catch {
    return refuse("SIGNATURE_INVALID", "public key or proofValue is not decodable")
  }
  const data = envelopeHashDataOf(keys, env)
  if (Either.isLeft(data)) return refuse("MALFORMED", data.left.message)
  if (keys.verifySync === undefined) return Either.right({ env, retainUntilMs, verify: { publicKey, data: data.right, signature } })
  return keys.verifySync(publicKey, data.right, signature)
    ? Either.right({ env, retainUntilMs, verify: "verified" })
    : refuse("SIGNATURE_INVALID", "signature does not verify")
}

/**
 * The bytes a received envelope's proof signs, once `checkEnvelope` has judged its shape and proof fields; the frame
 * is read in place, copied only for the generic path.
 */
const envelopeHashDataOf = (keys: KeysApi, env: Envelope): Either.Either<Uint8Array, NotCanonicalizable> => {
  const fast = canonicalCheckedEnvelope(env, env.proof)
  if (fast !== undefined) return Either.right(frameHashData(keys, fast))
  const { proof, ...unsecured } = env
  const { proofValue: _proofValue, ...proofOptions } = proof
  return hashData(keys, proofOptions, unsecured)
}

/** 5. The nonce, only once the envelope is authentic, judged at the time the checks were made; succeeds with the envelope. */
const recordEnvelopeNonce = (env: Envelope, retainUntilMs: number, nonceStore: NonceStoreApi, now: number): Effect.Effect<Envelope, EnvelopeError> =>
  Effect.matchEffect(recordAtTime(nonceStore, env.from, env.nonce, retainUntilMs, now), { onFailure: nonceRefused, onSuccess: () => Effect.succeed(env) })

const nonceRefused = (e: NonceRecordError): Effect.Effect<never, EnvelopeError> => {
  const { code, message } = nonceRefusal(e)
  return code === "REPLAYED" ? Effect.zipRight(Metric.increment(replaysRefusedEnvelope), fail(code, message)) : fail(code, message)
}
