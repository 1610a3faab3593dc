/**
 * Commit tokens: signed receipts an agent gives for work it did inside a saga step, so a billing trail can be
 * checked offline by anyone who can resolve the agent's DID key (docs/protocol.md §13).
 *
 * A token is a JWS compact serialization like a mandate (`alg: EdDSA`, `typ: commit+jwt`, `kid: <issuer>#key-1`),
 * whose payload is the receipt itself: `{ sagaId, step, capability, amountUsd, resultDigest, at, issuer }`. Header
 * and payload are written in their JCS form, so one receipt and one key always give one token (the vectors rely on
 * it); verification covers the exact received bytes and refuses non-canonical base64url, so a re-encoded token
 * never verifies. A JWS rather than a Data Integrity proof because the receipt travels as one opaque string beside
 * a reply and is stored in a ledger column, exactly as mandates do.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { canonicalBytes, canonicalJson } from "./Canonical.js"
import { isNormalizedDid, verificationMethodId } from "./Did.js"
import { Keys, type MalformedKey, type PrivateKeyInput } from "./Keys.js"
import type { KeyResolverApi } from "./KeyResolver.js"
import { formatUsdString, parseUsd } from "./Money.js"
import { decodeBase64UrlJson, decodeBase64UrlStrict } from "./internal/base64url.js"
import { toBase64Url, utf8 } from "./internal/bytes.js"
import { isRecord } from "./internal/record.js"
import { isUtcTimestamp } from "./internal/timestamp.js"

/** The JWS `typ` of every commit token. */
export const COMMIT_TOKEN_TYP = "commit+jwt"
/** Longest token accepted, in characters. */
export const MAX_TOKEN_LENGTH = 8192

const Bounded = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

/** What an agent signs for one saga step it ran. */
export const CommitReceipt = Schema.Struct({
  /** The saga the step belongs to, as the caller named it. */
  sagaId: Bounded(200),
  /** The step's name within the saga. */
  step: Bounded(200),
  /** The capability the agent ran for the step. */
  capability: Bounded(200),
  /** USD used by the step, a decimal string in Money's canonical form (`"0"`, `"12.5"`). */
  amountUsd: Schema.String.pipe(Schema.filter((s) => Either.isRight(parseUsd(s)) || "a non-negative USD decimal")),
  /** base64url (unpadded) of SHA-256 over the JCS form of the step's result (`digestResult`). */
  resultDigest: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{43}$/)),
  /** When the agent committed the step, RFC 3339 UTC. */
  at: Schema.String.pipe(Schema.filter((s) => isUtcTimestamp(s) || "an RFC 3339 UTC timestamp")),
  /** The agent's DID, lower case; the token's `kid` is its `#key-1`. */
  issuer: Schema.String.pipe(Schema.filter((s) => isNormalizedDid(s) || "a lower-case did:mesh DID"))
})
/** What an agent signs for one saga step it ran. */
export type CommitReceipt = typeof CommitReceipt.Type

/** Why a commit token could not be made or did not verify. */
export const CommitTokenErrorCode = Schema.Literal(
  "MALFORMED_TOKEN",
  "SIGNATURE_INVALID",
  "KEY_NOT_FOUND",
  "KEY_REVOKED",
  "RESOLVER_UNAVAILABLE",
  "INVALID_RECEIPT"
)
/** Why a commit token could not be made or did not verify. */
export type CommitTokenErrorCode = typeof CommitTokenErrorCode.Type

/** A commit token that does not decode or verify, or a receipt that cannot be signed. */
export class CommitTokenError extends Schema.TaggedError<CommitTokenError>()("CommitTokenError", {
  code: CommitTokenErrorCode,
  message: Schema.String
}) {}

const failure = (code: CommitTokenErrorCode, message: string) => new CommitTokenError({ code, message })

const decodeReceipt = Schema.decodeUnknownEither(CommitReceipt, { onExcessProperty: "error" })

/** The receipt's `resultDigest` of a result: base64url of SHA-256 over its JCS form. */
export const digestResult = (result: unknown): Effect.Effect<string, CommitTokenError, Keys> =>
  Effect.flatMap(Keys, (keys) =>
    Either.match(canonicalBytes(result), {
      onLeft: (e) => Effect.fail(failure("INVALID_RECEIPT", `the result has no JSON form: ${e.message}`)),
      onRight: (bytes) => Effect.succeed(toBase64Url(keys.sha256(bytes)))
    })
  )

/** Signs a receipt with the issuer's key; the amount is written in Money's canonical form. */
export const sign = (receipt: CommitReceipt, privateKey: PrivateKeyInput): Effect.Effect<string, CommitTokenError | MalformedKey, Keys> =>
  Effect.gen(function* () {
    const checked = decodeReceipt(receipt)
    if (Either.isLeft(checked)) return yield* Effect.fail(failure("INVALID_RECEIPT", `the receipt is not valid: ${checked.left.message}`))
    const amount = Either.getOrThrow(parseUsd(checked.right.amountUsd))
    const payload: CommitReceipt = { ...checked.right, amountUsd: formatUsdString(amount) }
    const keys = yield* Keys
    const key = yield* keys.importPrivateKey(privateKey)
    const header = { alg: "EdDSA", typ: COMMIT_TOKEN_TYP, kid: verificationMethodId(payload.issuer) }
    // A receipt is strings only, so JCS cannot fail on it.
    const segment = (value: unknown) => toBase64Url(utf8(Either.getOrThrow(canonicalJson(value))))
    const signingInput = `${segment(header)}.${segment(payload)}`
    const signature = yield* keys.sign(key, utf8(signingInput))
    return `${signingInput}.${toBase64Url(signature)}`
  })

/** A token split into its parts and its receipt read, before any signature is checked. */
interface Parsed {
  readonly receipt: CommitReceipt
  readonly signingInput: Uint8Array
  readonly signature: Uint8Array
}

const HEADER_KEYS = ["alg", "typ", "kid"]

const parse = (token: unknown): Either.Either<Parsed, CommitTokenError> => {
  const malformed = (message: string) => Either.left(failure("MALFORMED_TOKEN", message))
  if (typeof token !== "string") return malformed("a commit token is a string")
  if (token.length > MAX_TOKEN_LENGTH) return malformed(`token longer than ${MAX_TOKEN_LENGTH} characters`)
  const parts = token.split(".")
  if (parts.length !== 3) return malformed("not a JWS compact token (three segments)")
  const [h, p, s] = parts as [string, string, string]
  const header = decodeBase64UrlJson(h)
  if (!isRecord(header)) return malformed("header is not base64url I-JSON")
  for (const k in header) if (!HEADER_KEYS.includes(k)) return malformed(`unsupported header member ${JSON.stringify(k)}`)
  if (header.alg !== "EdDSA") return malformed("alg must be EdDSA")
  if (header.typ !== COMMIT_TOKEN_TYP) return malformed(`typ must be ${COMMIT_TOKEN_TYP}`)
  const payload = decodeBase64UrlJson(p)
  const receipt = decodeReceipt(payload)
  if (Either.isLeft(receipt)) return malformed(`payload is not a commit receipt: ${receipt.left.message}`)
  if (header.kid !== verificationMethodId(receipt.right.issuer)) return malformed("kid must be the issuer's #key-1")
  const signature = decodeBase64UrlStrict(s)
  if (signature === undefined || signature.length !== 64) return malformed("signature is not 64 bytes of base64url")
  return Either.right({ receipt: receipt.right, signingInput: utf8(`${h}.${p}`), signature })
}

/** Reads a token's receipt without checking its signature: for display and routing only, never for billing. */
export const decodeUnverified = (token: string): Either.Either<CommitReceipt, CommitTokenError> => Either.map(parse(token), (x) => x.receipt)

/** Where verification gets the issuer's key: its raw 32-byte public key, or a resolver asked for the issuer's DID. */
export type KeySource = Uint8Array | KeyResolverApi

const issuerKey = (source: KeySource, issuer: string): Effect.Effect<Uint8Array, CommitTokenError> =>
  source instanceof Uint8Array
    ? Effect.succeed(source)
    : Effect.map(
        // The resolver's failure codes are this module's own.
        Effect.mapError(source.resolve(issuer), (e) => failure(e.code, e.message)),
        (k) => k.publicKey
      )

/** Verifies a commit token offline under its issuer's key and returns the receipt it signs. */
export const verify = (token: string, keys: KeySource): Effect.Effect<CommitReceipt, CommitTokenError, Keys> =>
  Effect.gen(function* () {
    const parsed = parse(token)
    if (Either.isLeft(parsed)) return yield* Effect.fail(parsed.left)
    const { receipt, signature, signingInput } = parsed.right
    const publicKey = yield* issuerKey(keys, receipt.issuer)
    const k = yield* Keys
    const ok = yield* Effect.mapError(k.verify(publicKey, signingInput, signature), (e) => failure("SIGNATURE_INVALID", e.message))
    if (!ok) return yield* Effect.fail(failure("SIGNATURE_INVALID", `signature does not verify under ${receipt.issuer}'s key`))
    return receipt
  })
