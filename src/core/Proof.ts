/**
 * W3C Data Integrity proofs with the `eddsa-jcs-2022` cryptosuite (vc-di-eddsa §3.3), over any JSON object.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { canonicalJson, type NotCanonicalizable } from "./Canonical.js"
import { Keys, type KeysApi, type MalformedKey, type PrivateKey, type PrivateKeyInput, sha256Text } from "./Keys.js"
import { concat, fromMultibase58, toMultibase58 } from "./internal/bytes.js"

/** The only cryptosuite the mesh signs with. */
export const CRYPTOSUITE = "eddsa-jcs-2022"

/** A Data Integrity proof as it travels. */
export const DataIntegrityProof = Schema.Struct({
  type: Schema.Literal("DataIntegrityProof"),
  cryptosuite: Schema.Literal(CRYPTOSUITE),
  created: Schema.optional(Schema.String),
  verificationMethod: Schema.String,
  proofPurpose: Schema.String,
  "@context": Schema.optional(Schema.Array(Schema.String)),
  proofValue: Schema.String.pipe(Schema.startsWith("z"))
})
/** A Data Integrity proof as it travels. */
export type DataIntegrityProof = typeof DataIntegrityProof.Type

/** Proof options: everything of the proof but its value. */
export type ProofOptions = Omit<DataIntegrityProof, "proofValue">

/** A JSON object carrying a proof. */
export type Signed<T extends object> = T & { readonly proof: DataIntegrityProof }

/** Why a proof did not verify. */
export const ProofInvalidReason = Schema.Literal("MALFORMED_PROOF", "VERIFICATION_METHOD_MISMATCH", "SIGNATURE_INVALID")

/** A proof that is missing, malformed, from another method than expected, or whose signature does not verify. */
export class ProofInvalid extends Schema.TaggedError<ProofInvalid>()("ProofInvalid", {
  code: ProofInvalidReason,
  message: Schema.String
}) {}

/** XML Schema dateTime in UTC with second precision, as Data Integrity examples use. */
export const toDateTimeSeconds = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z")

/** The bytes eddsa-jcs-2022 signs: SHA-256(JCS(proof options)) ‖ SHA-256(JCS(document without proof)). */
export const hashData = (
  keys: KeysApi,
  options: ProofOptions,
  unsecured: unknown
): Either.Either<Uint8Array, NotCanonicalizable> =>
  Either.flatMap(canonicalJson(options), (optionText) =>
    Either.map(canonicalJson(unsecured), (docText) => concat(sha256Text(keys, optionText), sha256Text(keys, docText)))
  )

/** Signs precomputed proof options over a document with an imported key; the hot path of envelopes. */
export const createProof = (
  keys: KeysApi,
  key: PrivateKey,
  options: ProofOptions,
  unsecured: unknown
): Effect.Effect<DataIntegrityProof, NotCanonicalizable> =>
  Effect.flatMap(hashData(keys, options, unsecured), (data) =>
    Effect.map(keys.sign(key, data), (sig) => ({ ...options, proofValue: toMultibase58(sig) }))
  )

/** Options for `signMessage`. */
export interface SignOptions {
  /** Defaults to `assertionMethod`. */
  readonly proofPurpose?: string
  /** Defaults to the current time of Effect's Clock. */
  readonly created?: string
}

const withoutProof = (message: Record<string, unknown>): Record<string, unknown> => {
  const { proof: _proof, ...rest } = message
  return rest
}

/** Adds an eddsa-jcs-2022 proof to a JSON object (any existing proof is replaced). */
export const signMessage = <T extends Record<string, unknown>>(
  message: T,
  privateKey: PrivateKeyInput,
  verificationMethod: string,
  options: SignOptions = {}
): Effect.Effect<Signed<Omit<T, "proof">>, MalformedKey | NotCanonicalizable, Keys> =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const key = yield* keys.importPrivateKey(privateKey)
    const unsecured = withoutProof(message)
    const created = options.created ?? toDateTimeSeconds(yield* Clock.currentTimeMillis)
    const context = unsecured["@context"]
    const proofOptions: ProofOptions = {
      type: "DataIntegrityProof",
      cryptosuite: CRYPTOSUITE,
      created,
      verificationMethod,
      proofPurpose: options.proofPurpose ?? "assertionMethod",
      ...(Array.isArray(context) ? { "@context": context as Array<string> } : {})
    }
    const proof = yield* createProof(keys, key, proofOptions, unsecured)
    return { ...(unsecured as Omit<T, "proof">), proof }
  })

const decodeProof = Schema.decodeUnknownEither(DataIntegrityProof)
const invalid = (code: typeof ProofInvalidReason.Type, message: string) => new ProofInvalid({ code, message })

/** Verifies the eddsa-jcs-2022 proof of a message under a raw public key; optionally pins the verification method. */
export const verifyMessage = <T extends Record<string, unknown>>(
  message: T,
  publicKey: Uint8Array,
  options: { readonly verificationMethod?: string; readonly proofPurpose?: string } = {}
): Effect.Effect<T, ProofInvalid | MalformedKey, Keys> =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const proofResult = decodeProof(message.proof)
    if (Either.isLeft(proofResult)) return yield* Effect.fail(invalid("MALFORMED_PROOF", "missing or malformed eddsa-jcs-2022 proof"))
    const { proofValue, ...proofOptions } = proofResult.right
    if (options.verificationMethod !== undefined && proofOptions.verificationMethod !== options.verificationMethod) {
      return yield* Effect.fail(invalid("VERIFICATION_METHOD_MISMATCH", `proof is by ${proofOptions.verificationMethod}`))
    }
    if (options.proofPurpose !== undefined && proofOptions.proofPurpose !== options.proofPurpose) {
      return yield* Effect.fail(invalid("MALFORMED_PROOF", `proof purpose ${proofOptions.proofPurpose} is not ${options.proofPurpose}`))
    }
    const unsecured = withoutProof(message)
    const proofContext = proofOptions["@context"]
    if (proofContext !== undefined) {
      // The document's @context must start with the proof's, in order (vc-di-eddsa §3.3.2).
      const docContext = unsecured["@context"]
      if (!Array.isArray(docContext) || proofContext.some((c, i) => docContext[i] !== c)) {
        return yield* Effect.fail(invalid("MALFORMED_PROOF", "proof @context does not match the document's"))
      }
    }
    let signature: Uint8Array
    try {
      signature = fromMultibase58(proofValue)
    } catch {
      return yield* Effect.fail(invalid("MALFORMED_PROOF", "proofValue is not base58btc"))
    }
    // Hash the proof exactly as received (minus proofValue): a member the schema does not name (domain, challenge,
    // expires, or anything injected) is covered by the signature rather than silently dropped.
    const { proofValue: _value, ...receivedOptions } = message.proof as Record<string, unknown>
    const data = hashData(keys, receivedOptions as ProofOptions, unsecured)
    if (Either.isLeft(data)) return yield* Effect.fail(invalid("MALFORMED_PROOF", data.left.message))
    const ok = yield* keys.verify(publicKey, data.right, signature)
    if (!ok) return yield* Effect.fail(invalid("SIGNATURE_INVALID", "signature does not verify"))
    return message
  })
