/**
 * `did:mesh` identifiers, their W3C DID documents (Multikey, `z6Mk…`), the `did:key` form, and `didHash`.
 *
 * Floor: core (docs/architecture.md §3).
 */
import { sha256 } from "@noble/hashes/sha2.js"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { base32 } from "multiformats/bases/base32"
import { varint } from "multiformats"
import { acceptablePublicKey, invalidPublicKey, Keys, type MalformedKey, type PrivateKey } from "./Keys.js"
import { concat, fromMultibase58, toBase64, toMultibase58, utf8 } from "./internal/bytes.js"

/** The spec's pattern, matched case-insensitively; a DID is stored in lower case. */
export const DID_PATTERN = /^did:mesh:[a-z0-9][a-z0-9:._-]+$/i

/** Longest DID we accept; keeps ids usable as keys and in URLs. */
export const DID_MAX_LENGTH = 256

/** A normalized (lower-case) `did:mesh` DID. */
export const Did = Schema.String.pipe(
  Schema.maxLength(DID_MAX_LENGTH),
  Schema.pattern(DID_PATTERN, { message: () => "not a did:mesh DID" }),
  Schema.filter((s) => s === s.toLowerCase(), { message: () => "DID must be lower case" }),
  Schema.brand("Did")
)
/** A normalized (lower-case) `did:mesh` DID. */
export type Did = typeof Did.Type

/** Decodes any-case input into a normalized `Did`. */
export const DidFromString = Schema.transform(Schema.String, Did, {
  strict: false,
  decode: (s) => s.toLowerCase(),
  encode: (d) => d
})

/** Input that is not a `did:mesh` DID. */
export class InvalidDid extends Schema.TaggedError<InvalidDid>()("InvalidDid", {
  code: Schema.Literal("INVALID_DID"),
  message: Schema.String
}) {}

/** The normalized DID, or undefined; the same rule as `DidFromString`, without Schema's cost on hot paths. */
export const normalizeDid = (input: unknown): Did | undefined =>
  typeof input === "string" && input.length <= DID_MAX_LENGTH && DID_PATTERN.test(input) ? (input.toLowerCase() as Did) : undefined

/** The error for input that is not a DID. */
export const invalidDid = (input: unknown): InvalidDid =>
  new InvalidDid({
    code: "INVALID_DID",
    message: `${JSON.stringify(input)} is not a did:mesh DID (did:mesh:<name> or did:mesh:<namespace>.<name>, matching ${DID_PATTERN.source}, at most ${DID_MAX_LENGTH} characters)`
  })

/** Normalizes and checks a DID string. */
export const parseDid = (input: unknown): Effect.Effect<Did, InvalidDid> => {
  const did = normalizeDid(input)
  return did !== undefined ? Effect.succeed(did) : Effect.fail(invalidDid(input))
}

/** True when the input is already a normalized DID: the shape, and lower case. Shape checks of signed data use it. */
export const isNormalizedDid = (input: unknown): input is Did => typeof input === "string" && normalizeDid(input) === input

/** True when the input is a DID (any case). */
export const isDid = (input: unknown): boolean => normalizeDid(input) !== undefined

/** `<did>#key-1`: the verification method every mesh identity signs with. */
export const verificationMethodId = (did: string): string => `${did}#key-1`

/** The DID part of a verification method id. */
export const didOfVerificationMethod = (vm: string): string => {
  const i = vm.indexOf("#")
  return i < 0 ? vm : vm.slice(0, i)
}

const ED25519_PUB_CODEC = 0xed

/** multicodec ed25519-pub (0xed01 as varint) + key, base58btc multibase: `z6Mk…`. */
export const publicKeyMultibase = (publicKey: Uint8Array): string =>
  toMultibase58(concat(varint.encodeTo(ED25519_PUB_CODEC, new Uint8Array(varint.encodingLength(ED25519_PUB_CODEC))), publicKey))

/** The raw key inside a `z6Mk…` value, or undefined when it is not an Ed25519 Multikey. */
export const decodePublicKeyMultibase = (value: string): Uint8Array | undefined => {
  try {
    const bytes = fromMultibase58(value)
    const [codec, offset] = varint.decode(bytes)
    return codec === ED25519_PUB_CODEC && bytes.length === offset + 32 ? bytes.slice(offset) : undefined
  } catch {
    return undefined
  }
}

/** The `did:key` form of a public key (`did:key:z6Mk…`). */
export const didKey = (publicKey: Uint8Array): string => `did:key:${publicKeyMultibase(publicKey)}`

/** The public key of an Ed25519 `did:key`; `INVALID_PUBLIC_KEY` for anything else, a small-order or non-canonical key included. */
export const publicKeyOfDidKey = (did: string): Effect.Effect<Uint8Array, MalformedKey> => {
  const key = did.startsWith("did:key:") ? decodePublicKeyMultibase(did.slice(8)) : undefined
  if (key === undefined) return Effect.fail(invalidPublicKey("not an Ed25519 did:key"))
  const refused = acceptablePublicKey(key)
  return refused === undefined ? Effect.succeed(key) : Effect.fail(refused)
}

/**
 * `didHash`: the first 15 bytes (120 bits) of SHA-256 over the UTF-8 of the normalized DID, as unpadded
 * lower-case RFC 4648 base32: 24 characters from `a-z2-7`, safe in URLs and case-insensitive.
 */
export const didHash = (did: Did): string => base32.baseEncode(sha256(utf8(did)).subarray(0, 15))

/** `didHash` of any-case DID input. */
export const didHashOf = (input: string): Effect.Effect<string, InvalidDid> => Effect.map(parseDid(input), didHash)

/** What `didHash` writes: 24 characters of lower-case base32. */
export const DID_HASH_PATTERN = /^[a-z2-7]{24}$/

/** Input that is not a `didHash`. */
export class InvalidDidHash extends Schema.TaggedError<InvalidDidHash>()("InvalidDidHash", {
  code: Schema.Literal("INVALID_DID_HASH"),
  message: Schema.String
}) {}

/**
 * Checks that the input has the shape `didHash` writes (any case in, lower case out), so a name taken from outside
 * can be handed to the registry and never stands for an address of its own.
 */
export const parseDidHash = (input: unknown): Effect.Effect<string, InvalidDidHash> => {
  const h = typeof input === "string" ? input.toLowerCase() : undefined
  return h !== undefined && DID_HASH_PATTERN.test(h)
    ? Effect.succeed(h)
    : Effect.fail(new InvalidDidHash({ code: "INVALID_DID_HASH", message: `${JSON.stringify(input)} is not a didHash (24 characters of base32, a-z and 2-7)` }))
}

/** A W3C DID Core verification method of type Multikey. */
export const VerificationMethod = Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  controller: Schema.String,
  publicKeyMultibase: Schema.String,
  revoked: Schema.optional(Schema.String)
})
/** A W3C DID Core verification method of type Multikey. */
export type VerificationMethod = typeof VerificationMethod.Type

/** A service entry of a DID document. */
export const ServiceEntry = Schema.Struct({ id: Schema.String, type: Schema.String, serviceEndpoint: Schema.String })

/** The DID document of a mesh identity (W3C DID Core). */
export const DidDocument = Schema.Struct({
  "@context": Schema.Array(Schema.String),
  id: Schema.String,
  verificationMethod: Schema.NonEmptyArray(VerificationMethod),
  authentication: Schema.optional(Schema.Array(Schema.String)),
  assertionMethod: Schema.optional(Schema.Array(Schema.String)),
  service: Schema.optional(Schema.Array(ServiceEntry))
})
/** The DID document of a mesh identity (W3C DID Core). */
export type DidDocument = typeof DidDocument.Type

/** The contexts every mesh DID document names. */
export const DID_CONTEXT = ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"] as const

/** The DID document for a DID, its public key and (optionally) the endpoint where it is served. */
export const makeDidDocument = (did: Did, publicKey: Uint8Array, serviceEndpoint?: string): DidDocument => {
  const vm = verificationMethodId(did)
  return {
    "@context": [...DID_CONTEXT],
    id: did,
    verificationMethod: [{ id: vm, type: "Multikey", controller: did, publicKeyMultibase: publicKeyMultibase(publicKey) }],
    authentication: [vm],
    assertionMethod: [vm],
    ...(serviceEndpoint === undefined ? {} : { service: [{ id: `${did}#mesh`, type: "MeshAgent", serviceEndpoint }] })
  }
}

/** The DID document's key is marked revoked. */
export class KeyRevoked extends Schema.TaggedError<KeyRevoked>()("KeyRevoked", {
  code: Schema.Literal("KEY_REVOKED"),
  message: Schema.String,
  verificationMethod: Schema.String,
  revoked: Schema.String
}) {}

/** The document is not a DID document with an Ed25519 Multikey we can read. */
export class MalformedDidDocument extends Schema.TaggedError<MalformedDidDocument>()("MalformedDidDocument", {
  code: Schema.Literal("MALFORMED_DID_DOCUMENT"),
  message: Schema.String
}) {}

const decodeDocument = Schema.decodeUnknownEither(DidDocument)
const malformedDoc = (message: string) => new MalformedDidDocument({ code: "MALFORMED_DID_DOCUMENT", message })

/**
 * The raw public key of a DID document's method (default `<id>#key-1`); fails on a revoked or unreadable key, and with
 * `INVALID_PUBLIC_KEY` on a small-order or non-canonical one.
 */
export const extractPublicKey = (
  document: unknown,
  methodId?: string
): Effect.Effect<Uint8Array, KeyRevoked | MalformedDidDocument | MalformedKey> =>
  Effect.gen(function* () {
    const doc = yield* Effect.mapError(decodeDocument(document), (e) => malformedDoc(ParseResult.TreeFormatter.formatErrorSync(e)))
    const wanted = methodId ?? verificationMethodId(doc.id)
    const vm = doc.verificationMethod.find((m) => m.id === wanted)
    if (!vm) return yield* Effect.fail(malformedDoc(`no verification method ${wanted}`))
    if (vm.type !== "Multikey") return yield* Effect.fail(malformedDoc(`method type ${vm.type} is not Multikey`))
    if (vm.revoked !== undefined) {
      return yield* Effect.fail(new KeyRevoked({ code: "KEY_REVOKED", message: `key ${vm.id} was revoked at ${vm.revoked}`, verificationMethod: vm.id, revoked: vm.revoked }))
    }
    const key = decodePublicKeyMultibase(vm.publicKeyMultibase)
    if (!key) return yield* Effect.fail(malformedDoc("publicKeyMultibase is not an Ed25519 Multikey"))
    const refused = acceptablePublicKey(key)
    if (refused !== undefined) return yield* Effect.fail(refused)
    return key
  })

/** A mesh identity: the DID, its key pair and its DID document. */
export interface MeshIdentity {
  readonly did: Did
  readonly privateKey: PrivateKey
  /** publicKeyB64: standard base64 of the raw public key. */
  readonly publicKey: string
  readonly publicKeyBytes: Uint8Array
  readonly document: DidDocument
  /** The same public key as a `did:key`. */
  readonly didKey: string
}

/** The identity for a DID and an existing key. */
export const identityFromKey = (did: Did, privateKey: PrivateKey, baseAddress?: string): MeshIdentity => ({
  did,
  privateKey,
  publicKey: toBase64(privateKey.publicKey),
  publicKeyBytes: privateKey.publicKey,
  document: makeDidDocument(did, privateKey.publicKey, baseAddress),
  didKey: didKey(privateKey.publicKey)
})

/** A new identity `did:mesh:[<namespace>.]<name>` with a fresh key; `baseAddress` becomes the service endpoint. */
export const generateDid = (
  name: string,
  baseAddress?: string,
  namespace?: string
): Effect.Effect<MeshIdentity, InvalidDid, Keys> =>
  Effect.gen(function* () {
    const did = yield* parseDid(`did:mesh:${namespace === undefined ? "" : `${namespace}.`}${name}`)
    const keys = yield* Keys
    const key = yield* keys.generate
    return identityFromKey(did, key, baseAddress)
  })

/** An identity from a DID and a key in any accepted form (seed, PKCS#8, base64, `PrivateKey`). */
export const importIdentity = (
  did: string,
  privateKey: Parameters<typeof Keys.Service["importPrivateKey"]>[0],
  baseAddress?: string
): Effect.Effect<MeshIdentity, InvalidDid | MalformedKey, Keys> =>
  Effect.gen(function* () {
    const d = yield* parseDid(did)
    const keys = yield* Keys
    return identityFromKey(d, yield* keys.importPrivateKey(privateKey), baseAddress)
  })
