/**
 * mesh-sig: RFC 9421 HTTP Message Signatures over `@method`, `@target-uri` and an RFC 9530 `content-digest`, signed
 * with the caller's `did:mesh` key (docs/protocol.md §10). Verification checks, in this order, the fields, the time
 * window, the digest, the key, the signature, and only then the nonce, so forged traffic cannot burn nonces.
 * `checkRequest` stops before the nonce so a server can authorize the signer first (an authentic but unwelcome
 * caller must not fill the store either); `recordNonce` then records it, `verifyRequest` does both. A server with an
 * allow-list hands it to `checkRequest` as `isAllowed`, asked as soon as the keyid is read: a request naming a DID
 * outside it never reaches the key resolver, so unsigned traffic naming random DIDs cannot turn into lookups.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { replaysRefusedHttp } from "./MeshMetrics.js"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import {
  type BareItem,
  type Dictionary,
  type InnerList,
  type Item,
  isInnerList,
  parseDictionary,
  serializeDictionary,
  serializeInnerList,
  serializeItem
} from "structured-headers"
import { type Did, didOfVerificationMethod, type KeyRevoked, normalizeDid, verificationMethodId } from "./Did.js"
import { DEFAULT_CLOCK_TOLERANCE_MS, newNonce } from "./Envelope.js"
import { Entropy } from "./Entropy.js"
import type { KeyNotFound, KeyResolverUnavailable, ResolvedKey } from "./KeyResolver.js"
import { Keys, type KeysApi, type MalformedKey, type PrivateKeyInput } from "./Keys.js"
import { type NonceRecordError, nonceRefusal, type NonceStoreApi, recordAtTime } from "./NonceStore.js"
import { equalBytes, toBase64, utf8 } from "./internal/bytes.js"
import { parseSimpleSignature, parseSimpleSignatureInput, simpleDigestField } from "./internal/signatureFields.js"
import { lastUrlParser } from "./internal/url.js"

/** The `tag` parameter that marks a mesh-sig signature among any others on a request. */
export const MESH_SIG_TAG = "mesh-sig"

/** The components every mesh-sig signature covers (more are allowed). */
export const REQUIRED_COMPONENTS = ["@method", "@target-uri", "content-digest"] as const

/**
 * Fields a signer covers whenever the request carries them (docs/protocol.md §10.1): the correlation id and the W3C
 * trace context, so that neither can be swapped on a signed request. A verifier accepts a signature with or without
 * them, so older signers keep verifying.
 */
export const COVERED_WHEN_PRESENT = ["x-correlation-id", "traceparent"] as const

/** The only `alg` mesh-sig accepts (RFC 9421 §3.3.6). */
export const MESH_SIG_ALG = "ed25519"

/** Default lifetime of a signature made by `signRequest`. */
export const DEFAULT_SIGNATURE_TTL_SECONDS = 60

/** Default oldest `created` a verifier accepts; also caps every signature's lifetime. */
export const DEFAULT_MAX_AGE_SECONDS = 300

/** Reasons the request itself does not hold (HTTP 401). */
export const HttpSignatureRefusalCode = Schema.Literal(
  "SIGNATURE_MISSING",
  "SIGNATURE_MALFORMED",
  "SIGNATURE_INVALID",
  "SIGNATURE_EXPIRED",
  "SIGNATURE_NOT_YET_VALID",
  "DIGEST_MISMATCH",
  "REPLAYED",
  "KEY_NOT_FOUND"
)

/** Reasons the verifier could not decide: a store or the resolver is down (HTTP 503; retry). */
export const HttpSignatureUnavailableCode = Schema.Literal("RESOLVER_UNAVAILABLE", "NONCE_STORE_FULL", "NONCE_STORE_UNAVAILABLE")

/** The signer holds its quota of live nonces (HTTP 429; retry once its earlier signatures expire). */
export const HttpSignatureThrottledCode = Schema.Literal("NONCE_QUOTA_EXCEEDED")

/** The closed set of reasons a signed request is refused (docs/protocol.md §10). */
export const HttpSignatureErrorCode = Schema.Literal(
  ...HttpSignatureRefusalCode.literals,
  ...HttpSignatureUnavailableCode.literals,
  ...HttpSignatureThrottledCode.literals
)
/** The closed set of reasons a signed request is refused. */
export type HttpSignatureErrorCode = typeof HttpSignatureErrorCode.Type

/** A signed request that was refused; `code` says why. */
export class HttpSignatureError extends Schema.TaggedError<HttpSignatureError>()("HttpSignatureError", {
  code: HttpSignatureErrorCode,
  message: Schema.String,
  /** NONCE_QUOTA_EXCEEDED: when the signer's next nonce expires, in whole seconds. */
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {}

// An Either, so the same helper serves the pure base builder and, being yieldable, the effects.
const fail = (code: HttpSignatureErrorCode, message: string) => Either.left(new HttpSignatureError({ code, message }))

/** A request as signed and verified: absolute target URI, lower-case header names, raw body bytes. */
export interface SignableRequest {
  readonly method: string
  readonly url: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: Uint8Array
}

/** The RFC 9530 `Content-Digest` value of a body: `sha-256=:<base64>:`. */
export const contentDigest = (keys: KeysApi, body: Uint8Array): string => `sha-256=:${toBase64(keys.sha256(body))}:`

/** A field's value as RFC 9421 §2.1 reads it: each line trimmed, lines joined by `, `; undefined when absent. */
const fieldValue = (headers: SignableRequest["headers"], name: string): string | undefined => {
  const value = headers[name]
  if (value === undefined) return undefined
  if (typeof value === "string") return value.trim()
  const lines = value
  return lines.length === 0 ? undefined : lines.map((line) => line.trim()).join(", ")
}

const DERIVED = new Map<string, (req: Omit<SignableRequest, "body">, url: URL) => string>([
  // RFC 9421 §2.2.1: the method is case-sensitive and taken as is.
  ["@method", (req) => req.method],
  ["@target-uri", (req) => req.url],
  ["@authority", (_, url) => url.host],
  ["@scheme", (_, url) => url.protocol.slice(0, -1)],
  ["@path", (_, url) => url.pathname],
  ["@query", (_, url) => (url.search === "" ? "?" : url.search)],
  ["@request-target", (_, url) => url.pathname + url.search]
])

/** A lower-case field name (RFC 9110 §5.1 token). */
const FIELD_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/

/**
 * The covered component names, refusing what this profile does not derive: component parameters (`;sf`, `;key`,
 * `;bs`, `;req`, `;tr`), derived components other than the request ones above, and repeats (RFC 9421 §2.5).
 */
const coveredNames = (input: InnerList): Either.Either<ReadonlyArray<string>, HttpSignatureError> => {
  const names: Array<string> = []
  for (const item of input[0]) {
    const [name, params] = item
    if (typeof name !== "string" || params.size > 0 || !(DERIVED.has(name) || FIELD_NAME.test(name))) {
      return fail("SIGNATURE_MALFORMED", `unsupported covered component ${serializeItem(item)}`)
    }
    if (names.includes(name)) return fail("SIGNATURE_MALFORMED", `component "${name}" is covered twice`)
    names.push(name)
  }
  return Either.right(names)
}

/**
 * The RFC 9421 §2.5 signature base of a request for one signature's parameters (a Signature-Input member): a line
 * per covered component, then `"@signature-params"` with the parameters re-serialized. A covered field the request
 * lacks is SIGNATURE_INVALID; a component this profile does not derive is SIGNATURE_MALFORMED.
 */
export const signatureBase = (
  req: Omit<SignableRequest, "body">,
  input: InnerList
): Either.Either<string, HttpSignatureError> => {
  const names = coveredNames(input)
  if (Either.isLeft(names)) return Either.left(names.left)
  return baseOf(req, names.right, serializeInnerList(input))
}

// The signature base's URL: a server checks request after request to the same endpoint URL.
const parsedUrl = lastUrlParser()

/** The signature base for covered names already checked and the Signature-Input member's serialization. */
const baseOf = (
  req: Omit<SignableRequest, "body">,
  names: ReadonlyArray<string>,
  serialized: string
): Either.Either<string, HttpSignatureError> => {
  const url = parsedUrl(req.url)
  if (url === undefined) return fail("SIGNATURE_MALFORMED", `${JSON.stringify(req.url)} is not an absolute URI`)
  let base = ""
  for (const name of names) {
    const value = DERIVED.get(name)?.(req, url) ?? fieldValue(req.headers, name)
    if (value === undefined) return fail("SIGNATURE_INVALID", `covered field ${name} is absent from the request`)
    // A line break inside a value could forge extra lines of the base.
    if (/[\r\n]/.test(value)) return fail("SIGNATURE_MALFORMED", `covered component ${name} holds a line break`)
    base += `"${name}": ${value}\n`
  }
  return Either.right(`${base}"@signature-params": ${serialized}`)
}

/** What `signRequest` takes besides the request. */
export interface SignRequestOptions {
  readonly privateKey: PrivateKeyInput
  /** The signer's verification method id, `did:mesh:…#key-1`. */
  readonly keyId: string
  /** Seconds until the signature expires; a positive whole number, default 60. */
  readonly ttlSeconds?: number
  /** Default: 16 CSPRNG bytes, base64url. */
  readonly nonce?: string
  /** The Signature-Input / Signature member name; default `sig1`. */
  readonly label?: string
}

/**
 * Signs a request (time from Effect's Clock). The headers to add to the request: content-digest, signature-input,
 * signature. `@target-uri` is the URL as WHATWG `URL` serializes it, which is what `fetch` sends. Of `headers`, the
 * ones in `COVERED_WHEN_PRESENT` are covered too; the request must carry them as given.
 */
export const signRequest = (
  req: { readonly method: string; readonly url: string; readonly body: Uint8Array; readonly headers?: Readonly<Record<string, string | undefined>> },
  options: SignRequestOptions
): Effect.Effect<{ readonly "content-digest": string; readonly "signature-input": string; readonly signature: string }, MalformedKey, Keys> =>
  Effect.gen(function* () {
    const ttl = options.ttlSeconds ?? DEFAULT_SIGNATURE_TTL_SECONDS
    // created and expires are sf-integers: a fractional ttl would make a signature every verifier refuses.
    if (!Number.isSafeInteger(ttl) || ttl <= 0) return yield* Effect.dieMessage(`ttlSeconds must be a positive whole number, got ${ttl}`)
    const keys = yield* Keys
    const key = yield* keys.importPrivateKey(options.privateKey)
    const created = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const digest = contentDigest(keys, req.body)
    const covered: Array<string> = [...REQUIRED_COMPONENTS]
    const fields: Record<string, string> = { "content-digest": digest }
    for (const name of COVERED_WHEN_PRESENT) {
      const value = req.headers?.[name]
      // A value with a line break could not be sent as a field anyway; it is left uncovered rather than signed.
      if (value !== undefined && !/[\r\n]/.test(value)) {
        covered.push(name)
        fields[name] = value
      }
    }
    const input: InnerList = [
      covered.map((name): Item => [name, new Map()]),
      new Map<string, BareItem>([
        ["created", created],
        ["expires", created + ttl],
        ["nonce", options.nonce ?? newNonce(yield* Entropy)],
        ["alg", MESH_SIG_ALG],
        ["keyid", options.keyId],
        ["tag", MESH_SIG_TAG]
      ])
    ]
    const signed = { method: req.method, url: new URL(req.url).href, headers: fields }
    const base = yield* Effect.orDie(signatureBase(signed, input))
    const signature = yield* keys.sign(key, utf8(base))
    const label = options.label ?? "sig1"
    return {
      "content-digest": digest,
      "signature-input": serializeDictionary(new Map([[label, input]])),
      // A copy typed over a plain ArrayBuffer, which is what structured-headers' BufferSource asks for.
      signature: serializeDictionary(new Map<string, Item>([[label, [new Uint8Array(signature), new Map()]]]))
    }
  })

/** What `verifyRequest` needs besides the request. */
export interface VerifyRequestOptions {
  /** The DID's current key (a `KeyResolverApi.resolve`). */
  readonly resolveKey: (did: string) => Effect.Effect<ResolvedKey, KeyNotFound | KeyRevoked | KeyResolverUnavailable>
  readonly nonceStore: NonceStoreApi
  /** Allowed clock skew in ms, both ways; default 30 000. */
  readonly clockToleranceMs?: number
  /** Oldest `created` accepted, in seconds; also the longest lifetime honoured whatever `expires` says. Default 300. */
  readonly maxAgeSeconds?: number
}

/** What `checkRequest` needs besides the request. */
export interface CheckRequestOptions extends Omit<VerifyRequestOptions, "nonceStore"> {
  /**
   * Whether the keyid's normalized DID may call at all, asked before its key is resolved; a DID it refuses is
   * `CallerNotAllowed`. A request that passes is then verified under that very DID's key, so an allow-list needs no
   * second check of the verified DID.
   */
  readonly isAllowed?: (did: string) => boolean
}

/** The keyid names a DID the verifier's `isAllowed` refuses (HTTP 403); its key was not looked up. */
export class CallerNotAllowed extends Schema.TaggedError<CallerNotAllowed>()("CallerNotAllowed", {
  code: Schema.Literal("CALLER_NOT_ALLOWED"),
  message: Schema.String,
  did: Schema.String
}) {}

/** What `checkRequest` fails with: `CallerNotAllowed` only when its options may carry `isAllowed`. */
export type CheckRequestError<O> = "isAllowed" extends keyof O ? HttpSignatureError | CallerNotAllowed : HttpSignatureError

/** A signature that verified, and whose nonce is now recorded. */
export interface VerifiedSignature {
  /** The normalized DID of `keyid`. */
  readonly did: string
  readonly keyId: string
  /** Epoch seconds. */
  readonly created: number
  readonly nonce: string
}

/** A signature that verified, whose nonce is still to be recorded (`recordNonce`) until `retainUntilMs`. */
export interface CheckedSignature extends VerifiedSignature {
  readonly retainUntilMs: number
}

const parseField = (value: string, name: string): Either.Either<Dictionary, HttpSignatureError> =>
  Either.try({
    try: () => parseDictionary(value),
    catch: () => new HttpSignatureError({ code: "SIGNATURE_MALFORMED", message: `${name} is not a structured-field dictionary` })
  })

/** The first Signature-Input member tagged mesh-sig; other signatures on the request are left alone. */
const pickMeshSig = (inputs: Dictionary): readonly [string, InnerList] | undefined => {
  for (const [label, member] of inputs) {
    if (isInnerList(member) && member[1].get("tag") === MESH_SIG_TAG) return [label, member]
  }
  return undefined
}

/** The byte sequence of a dictionary member, or undefined when it is absent or something else. */
const bytesOf = (dictionary: Dictionary, key: string): Uint8Array | undefined => {
  const member = dictionary.get(key)
  return member !== undefined && !isInnerList(member) && member[0] instanceof ArrayBuffer ? new Uint8Array(member[0]) : undefined
}

/** The keyid and its normalized DID, when the keyid is `<did:mesh DID>#key-1`. */
const signerOf = (keyId: BareItem | undefined): { readonly did: Did; readonly keyId: string } | undefined => {
  if (typeof keyId !== "string") return undefined
  const did = normalizeDid(didOfVerificationMethod(keyId))
  return did !== undefined && keyId === verificationMethodId(didOfVerificationMethod(keyId)) ? { did, keyId } : undefined
}

const isInteger = (u: BareItem | undefined): u is number => typeof u === "number" && Number.isSafeInteger(u)

/** What the synchronous steps of `checkRequest` read from the request, for the steps after the key is resolved. */
interface ParsedRequest {
  readonly label: string
  readonly names: ReadonlyArray<string>
  readonly serialized: string
  readonly signature: Uint8Array
  readonly checked: CheckedSignature
}

/**
 * Steps 1 to 5 of `checkRequest`, synchronously: the fields (read by the fast path when they are in the form
 * signers write, else by the structured-field parser), the covered components and parameters, the allow-list, the
 * time window and the digest, with the same refusals in the same order.
 */
const parseRequest = (
  req: SignableRequest,
  options: CheckRequestOptions,
  now: number,
  keys: KeysApi
): Either.Either<ParsedRequest, HttpSignatureError | CallerNotAllowed> => {
  // 1. parse
  const inputField = fieldValue(req.headers, "signature-input")
  const signatureField = fieldValue(req.headers, "signature")
  if (inputField === undefined || signatureField === undefined) {
    return fail("SIGNATURE_MISSING", "the request has no Signature and Signature-Input fields")
  }
  const simpleInput = parseSimpleSignatureInput(inputField)
  let inputs: Dictionary | undefined
  if (simpleInput === undefined) {
    const parsed = parseField(inputField, "Signature-Input")
    if (Either.isLeft(parsed)) return Either.left(parsed.left)
    inputs = parsed.right
  }
  const simpleSignature = parseSimpleSignature(signatureField)
  let signatures: Dictionary | undefined
  if (simpleSignature === undefined) {
    const parsed = parseField(signatureField, "Signature")
    if (Either.isLeft(parsed)) return Either.left(parsed.left)
    signatures = parsed.right
  }

  // 2. the mesh-sig signature
  const picked = simpleInput === undefined
    ? pickMeshSig(inputs!)
    : simpleInput.input[1].get("tag") === MESH_SIG_TAG ? ([simpleInput.label, simpleInput.input] as const) : undefined
  if (picked === undefined) return fail("SIGNATURE_MISSING", `no signature with tag="${MESH_SIG_TAG}"`)
  const [label, input] = picked
  const signature = simpleSignature === undefined
    ? bytesOf(signatures!, label)
    : simpleSignature.label === label ? simpleSignature.bytes : undefined
  if (signature === undefined) return fail("SIGNATURE_MALFORMED", `Signature has no byte sequence for ${label}`)

  // 3. components and parameters
  const covered = coveredNames(input)
  if (Either.isLeft(covered)) return Either.left(covered.left)
  const names = covered.right
  const uncovered = REQUIRED_COMPONENTS.filter((name) => !names.includes(name))
  if (uncovered.length > 0) return fail("SIGNATURE_MALFORMED", `${label} does not cover ${uncovered.join(", ")}`)
  const params = input[1]
  const created = params.get("created")
  const expires = params.get("expires")
  const nonce = params.get("nonce")
  const alg = params.get("alg")
  if (!isInteger(created) || !isInteger(expires)) return fail("SIGNATURE_MALFORMED", "created and expires must be integers")
  if (expires <= created) return fail("SIGNATURE_MALFORMED", "expires must be after created")
  if (typeof nonce !== "string" || nonce.length === 0 || nonce.length > 256) {
    return fail("SIGNATURE_MALFORMED", "nonce must be a string of 1 to 256 characters")
  }
  if (alg !== undefined && alg !== MESH_SIG_ALG) return fail("SIGNATURE_MALFORMED", `alg must be "${MESH_SIG_ALG}"`)
  const signer = signerOf(params.get("keyid"))
  if (signer === undefined) return fail("SIGNATURE_MALFORMED", "keyid must be a did:mesh verification method, <did>#key-1")
  const { did, keyId } = signer
  // Before anything costs more than parsing: a DID the server would refuse anyway must not reach the resolver.
  if (options.isAllowed !== undefined && !options.isAllowed(did)) {
    return Either.left(new CallerNotAllowed({ code: "CALLER_NOT_ALLOWED", message: `${did} is not an allowed caller`, did }))
  }

  // 4. time window; maxAge caps the lifetime whatever expires says, which also bounds how long the nonce is kept
  const tolerance = options.clockToleranceMs ?? DEFAULT_CLOCK_TOLERANCE_MS
  const maxAge = options.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS
  if (created * 1000 > now + tolerance) return fail("SIGNATURE_NOT_YET_VALID", `created ${created * 1000 - now} ms in the future`)
  const validUntil = Math.min(expires, created + maxAge) * 1000
  if (validUntil <= now - tolerance) {
    return fail("SIGNATURE_EXPIRED", expires * 1000 === validUntil ? `expired ${now - validUntil} ms ago` : `created more than ${maxAge} s ago`)
  }

  // 5. the body is the one the digest names; the field as signers write it is compared as text, anything else parsed
  const digestField = fieldValue(req.headers, "content-digest")
  if (digestField === undefined) return fail("DIGEST_MISMATCH", "the request has no Content-Digest")
  const bodyDigest = keys.sha256(req.body)
  if (digestField !== simpleDigestField(bodyDigest)) {
    const parsed = parseField(digestField, "Content-Digest")
    if (Either.isLeft(parsed)) return Either.left(parsed.left)
    const digest = bytesOf(parsed.right, "sha-256")
    if (digest === undefined) return fail("DIGEST_MISMATCH", "Content-Digest has no sha-256 byte sequence")
    if (!equalBytes(digest, bodyDigest)) return fail("DIGEST_MISMATCH", "Content-Digest sha-256 is not the digest of the body")
  }

  const serialized = simpleInput !== undefined && picked[1] === simpleInput.input ? simpleInput.serialized : serializeInnerList(input)
  return Either.right({ label, names, serialized, signature, checked: { did, keyId, created, nonce, retainUntilMs: validUntil + tolerance } })
}

const resolverRefusal = (e: KeyNotFound | KeyRevoked | KeyResolverUnavailable): HttpSignatureError => {
  switch (e._tag) {
    case "KeyNotFound":
    case "KeyRevoked":
      return new HttpSignatureError({ code: "KEY_NOT_FOUND", message: e.message })
    case "KeyResolverUnavailable":
      return new HttpSignatureError({ code: "RESOLVER_UNAVAILABLE", message: e.message })
  }
}

/**
 * Verifies the mesh-sig signature of a request, everything but the nonce, which the caller records with
 * `recordNonce` once it has authorized the signer. Other signatures on the request are ignored. Everything but
 * resolving the key is synchronous; with a `Keys` layer that has `verifySync` the signature is checked in the same
 * step as the key arrives.
 */
export const checkRequest = <O extends CheckRequestOptions>(
  req: SignableRequest,
  options: O
): Effect.Effect<CheckedSignature, CheckRequestError<O>, Keys> => Effect.flatMap(Keys, (keys) => checkRequestWith(keys, req, options))

/** `checkRequest` with the `Keys` a server took once at start, so a request need not provide them again. */
export const checkRequestWith = <O extends CheckRequestOptions>(
  keys: KeysApi,
  req: SignableRequest,
  options: O
): Effect.Effect<CheckedSignature, CheckRequestError<O>> => Effect.clockWith((clock) => checkRequestAt(keys, req, options, clock.unsafeCurrentTimeMillis()))

/**
 * `checkRequestWith` at `nowMs` (epoch ms), read by the caller from its clock: with a resolver and a `Keys` layer
 * that answer at once, the whole check is made of steps that need no fiber.
 */
export const checkRequestAt = <O extends CheckRequestOptions>(
  keys: KeysApi,
  req: SignableRequest,
  options: O,
  nowMs: number
): Effect.Effect<CheckedSignature, CheckRequestError<O>> => {
  const parsed = parseRequest(req, options, nowMs, keys)
  // CallerNotAllowed is only ever raised when `isAllowed` is present, which is what CheckRequestError<O> says.
  if (Either.isLeft(parsed)) return Effect.fail(parsed.left) as Effect.Effect<never, CheckRequestError<O>>
  const { label, names, serialized, signature, checked } = parsed.right
  // 6. the signer's key
  const checkedKey = Effect.flatMap(Effect.mapError(options.resolveKey(checked.did), resolverRefusal), (key) => {
    // 7. signature
    const base = baseOf(req, names, serialized)
    if (Either.isLeft(base)) return Effect.fail(base.left)
    const invalid = () => new HttpSignatureError({ code: "SIGNATURE_INVALID", message: `${label} does not verify under the key of ${checked.did}` })
    if (keys.verifySync !== undefined) {
      return keys.verifySync(key.publicKey, utf8(base.right), signature) ? Effect.succeed(checked) : Effect.fail(invalid())
    }
    return Effect.flatMap(Effect.catchTag(keys.verify(key.publicKey, utf8(base.right), signature), "MalformedKey", () => Effect.succeed(false)), (ok) =>
      ok ? Effect.succeed(checked) : Effect.fail(invalid())
    )
  })
  return checkedKey as Effect.Effect<CheckedSignature, CheckRequestError<O>>
}

/**
 * Records the nonce of a checked signature: REPLAYED if it was used, NONCE_QUOTA_EXCEEDED past the signer's quota;
 * `nowMs` is the time the check was made at, when the caller read it.
 */
export const recordNonce = (checked: CheckedSignature, nonceStore: NonceStoreApi, nowMs?: number): Effect.Effect<void, HttpSignatureError> =>
  Effect.catchAll(
    nowMs === undefined
      ? nonceStore.record(checked.did, checked.nonce, checked.retainUntilMs)
      : recordAtTime(nonceStore, checked.did, checked.nonce, checked.retainUntilMs, nowMs),
    nonceRefused
  )

// One function rather than a table of handlers built per request: this runs for every signed request.
const nonceRefused = (e: NonceRecordError): Effect.Effect<never, HttpSignatureError> => {
  const { code, message } = nonceRefusal(e)
  if (code === "REPLAYED") return Effect.zipRight(Metric.increment(replaysRefusedHttp), fail(code, message))
  // The signer learns when its next nonce expires (Retry-After).
  return e._tag === "NonceQuotaExceeded"
    ? Effect.fail(new HttpSignatureError({ code, message, retryAfterSeconds: Math.max(1, Math.ceil(e.retryAfterMs / 1000)) }))
    : fail(code, message)
}

/**
 * Verifies the mesh-sig signature of a request and records its nonce under the signer's DID once everything else
 * holds (`checkRequest`, then `recordNonce`). Other signatures on the request are ignored.
 */
export const verifyRequest = (req: SignableRequest, options: VerifyRequestOptions): Effect.Effect<VerifiedSignature, HttpSignatureError, Keys> =>
  Effect.flatMap(checkRequest(req, options), (checked) =>
    Effect.as(recordNonce(checked, options.nonceStore), { did: checked.did, keyId: checked.keyId, created: checked.created, nonce: checked.nonce })
  )
