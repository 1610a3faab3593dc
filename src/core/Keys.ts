/**
 * Ed25519 keys: generate, import (raw 32-byte seed or PKCS#8 DER, as bytes or base64), sign, verify, SHA-256.
 *
 * `Keys` is the service; `Keys.noble` is the runtime-agnostic layer on @noble/curves. The node:crypto layer lives
 * in `KeysNative` so this module runs on any JavaScript runtime. Both layers apply one verification rule
 * (docs/protocol.md §2): canonical S, canonical public key, no small-order public key, cofactorless equation.
 *
 * Floor: core (docs/architecture.md §3).
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import { sha256 as nobleSha256, sha512 } from "@noble/hashes/sha2.js"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { concat, equalBytes, fromBase64, toBase64, utf8 } from "./internal/bytes.js"
import { Entropy } from "./Entropy.js"
import { MandateCache } from "./MandateCache.js"
import {
  bytesToBigIntLE,
  decodePublicKeyB64,
  isAcceptablePublicKey,
  L,
  parsePrivateKeyBytes,
  passesStrictPrechecks,
  seedToPkcs8,
  SPKI_PREFIX
} from "./internal/ed25519.js"

/**
 * A key that could not be read or is not accepted. `MALFORMED_KEY`: wrong length, wrong encoding, or a PKCS#8 blob
 * that is not Ed25519. `INVALID_PUBLIC_KEY`: a public key from outside that is not 32 bytes, not canonically
 * encoded, or one of the small-order points (docs/protocol.md §2).
 */
export class MalformedKey extends Schema.TaggedError<MalformedKey>()("MalformedKey", {
  code: Schema.Literal("MALFORMED_KEY", "INVALID_PUBLIC_KEY"),
  message: Schema.String
}) {}

const malformed = (message: string) => new MalformedKey({ code: "MALFORMED_KEY", message })

/** The error for a public key refused at the door (`INVALID_PUBLIC_KEY`). */
export const invalidPublicKey = (message: string): MalformedKey => new MalformedKey({ code: "INVALID_PUBLIC_KEY", message })

/**
 * Where an Ed25519 public key enters from outside: raw 32 bytes, publicKeyB64 (standard base64, padding optional) or
 * an SPKI DER blob (bytes or base64). Refuses, with `INVALID_PUBLIC_KEY`, anything but a canonical encoding of a point
 * outside the small-order subgroup: a stock verifier accepts the forgery R = identity, S = 0 under the identity key.
 */
export const importPublicKey = (input: Uint8Array | string): Effect.Effect<Uint8Array, MalformedKey> =>
  Effect.suspend(() => {
    let bytes: Uint8Array | undefined
    if (typeof input === "string") {
      const s = input.trim()
      bytes = decodePublicKeyB64(s)
      if (bytes === undefined && s.length === 60) bytes = spkiKey(fromBase64OrUndefined(s))
    } else if (input instanceof Uint8Array) {
      bytes = input.length === 44 ? spkiKey(input) : input.slice()
    }
    if (bytes === undefined || bytes.length !== 32) {
      return Effect.fail(invalidPublicKey("public key must be 32 raw bytes, publicKeyB64 or an Ed25519 SPKI"))
    }
    return isAcceptablePublicKey(bytes)
      ? Effect.succeed(bytes)
      : Effect.fail(invalidPublicKey("public key is a small-order point or not canonically encoded"))
  })

/** `importPublicKey`'s rule, synchronously, for bytes already decoded: undefined when accepted, else the refusal. */
export const acceptablePublicKey = (bytes: Uint8Array): MalformedKey | undefined =>
  isAcceptablePublicKey(bytes)
    ? undefined
    : invalidPublicKey(bytes.length === 32 ? "public key is a small-order point or not canonically encoded" : `public key must be 32 bytes, got ${bytes.length}`)

const fromBase64OrUndefined = (s: string): Uint8Array | undefined => {
  try {
    return fromBase64(s)
  } catch {
    return undefined
  }
}

const spkiKey = (b: Uint8Array | undefined): Uint8Array | undefined =>
  b !== undefined && b.length === 44 && equalBytes(b.subarray(0, 12), SPKI_PREFIX) ? b.slice(12) : undefined

const PrivateKeyTypeId: unique symbol = Symbol.for("agent-mesh/PrivateKey")

/** An Ed25519 private key: the 32-byte seed and the public key derived from it. */
export class PrivateKey {
  readonly [PrivateKeyTypeId] = PrivateKeyTypeId
  /** @internal use `Keys.importPrivateKey` or `Keys.generate`. */
  constructor(
    /** The RFC 8032 32-byte secret seed. */
    readonly seed: Uint8Array,
    /** The raw 32-byte public key. */
    readonly publicKey: Uint8Array
  ) {}
  /** publicKeyB64: standard base64 of the raw public key. */
  get publicKeyB64(): string {
    return toBase64(this.publicKey)
  }
  /** The PKCS#8 v1 DER encoding (RFC 8410). */
  toPkcs8(): Uint8Array {
    return seedToPkcs8(this.seed)
  }
  /** Never serialize the secret by accident. */
  toJSON(): unknown {
    return { _tag: "PrivateKey", publicKeyB64: this.publicKeyB64 }
  }
  /** Never print the secret by accident. */
  toString(): string {
    return `PrivateKey(${this.publicKeyB64})`
  }
}

/** True for a `PrivateKey`. */
export const isPrivateKey = (u: unknown): u is PrivateKey =>
  typeof u === "object" && u !== null && PrivateKeyTypeId in u

/**
 * What every key-taking function accepts: a `PrivateKey`, a raw 32-byte seed, a PKCS#8 DER blob, either of those
 * as standard base64, or a node:crypto `KeyObject` (recognized by shape, so this module need not import node).
 */
export type PrivateKeyInput = PrivateKey | Uint8Array | string | KeyObjectLike

/** The part of node:crypto's `KeyObject` we read. */
export interface KeyObjectLike {
  readonly type: string
  readonly asymmetricKeyType?: string | undefined
  export(options: { format: "der"; type: "pkcs8" }): Uint8Array
}

const isKeyObjectLike = (u: unknown): u is KeyObjectLike =>
  typeof u === "object" && u !== null && "export" in u && "type" in u && typeof u.export === "function"

/** The operations of the `Keys` service. */
export interface KeysApi {
  /** Which implementation this is. */
  readonly implementation: "native" | "noble"
  /** A fresh key from the platform CSPRNG. */
  readonly generate: Effect.Effect<PrivateKey>
  /** Reads a key given as a seed, PKCS#8 DER, base64 of either, a `KeyObject`, or an existing `PrivateKey`. */
  readonly importPrivateKey: (input: PrivateKeyInput) => Effect.Effect<PrivateKey, MalformedKey>
  /** The 64-byte RFC 8032 signature. */
  readonly sign: (key: PrivateKey, message: Uint8Array) => Effect.Effect<Uint8Array>
  /** Verifies under the strict rule; `false` for any bad signature, `MalformedKey` for a public key that is not 32 bytes. */
  readonly verify: (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => Effect.Effect<boolean, MalformedKey>
  /** SHA-256, synchronous because it is pure and on every hot path. */
  readonly sha256: (data: Uint8Array) => Uint8Array
  /**
   * SHA-256 of a string's UTF-8, for a layer that can hash text without copying it out into bytes first (signed
   * messages hash their JCS text). Optional; callers then use `sha256(utf8(text))`, which it must equal.
   */
  readonly sha256Utf8?: (text: string) => Uint8Array
  /**
   * `sign` without the Effect, for the hot paths that sign inside one synchronous step (envelopes). Both layers
   * have it; a layer of one's own may leave it out, and callers then use `sign`.
   */
  readonly signSync?: (key: PrivateKey, message: Uint8Array) => Uint8Array
  /**
   * `verify` without the Effect, under the same rule: false for any bad signature, and also for a public key that
   * is not 32 bytes (which `verify` reports as `MalformedKey`). Optional as `signSync` is.
   */
  readonly verifySync?: (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => boolean
}

/** SHA-256 of the UTF-8 of `text`, through `sha256Utf8` when the layer has it. */
export const sha256Text = (keys: KeysApi, text: string): Uint8Array =>
  keys.sha256Utf8 === undefined ? keys.sha256(utf8(text)) : keys.sha256Utf8(text)

/** Signs through `signSync` when the layer has it, else through `sign`. */
export const signWith = (keys: KeysApi, key: PrivateKey, message: Uint8Array): Effect.Effect<Uint8Array> =>
  keys.signSync === undefined ? keys.sign(key, message) : Effect.succeed(keys.signSync(key, message))

/** Turns any `PrivateKeyInput` other than a `PrivateKey` into seed bytes (and an embedded public key, if any). */
export const privateKeyInputToBytes = (
  input: Exclude<PrivateKeyInput, PrivateKey>
): Effect.Effect<{ readonly seed: Uint8Array; readonly embeddedPublicKey?: Uint8Array }, MalformedKey> =>
  Effect.suspend(() => {
    let bytes: Uint8Array
    if (typeof input === "string") {
      try {
        bytes = fromBase64(input.trim())
      } catch {
        return Effect.fail(malformed("private key string is not base64"))
      }
    } else if (input instanceof Uint8Array) {
      bytes = input
    } else if (isKeyObjectLike(input)) {
      if (input.type !== "private" || input.asymmetricKeyType !== "ed25519") {
        return Effect.fail(malformed("KeyObject is not an Ed25519 private key"))
      }
      bytes = new Uint8Array(input.export({ format: "der", type: "pkcs8" }))
    } else {
      return Effect.fail(malformed("unsupported private key input"))
    }
    const parsed = parsePrivateKeyBytes(bytes)
    return parsed ? Effect.succeed(parsed) : Effect.fail(malformed(`not an Ed25519 seed or PKCS#8 key (${bytes.length} bytes)`))
  })

/** Checks a public key's length, the one malformation verification reports as an error rather than `false`. */
export const checkPublicKey = (publicKey: Uint8Array): Effect.Effect<Uint8Array, MalformedKey> =>
  publicKey.length === 32 ? Effect.succeed(publicKey) : Effect.fail(malformed(`public key must be 32 bytes, got ${publicKey.length}`))

/** Builds the `PrivateKey` for a seed, refusing a PKCS#8 v2 blob whose embedded public key does not match. */
export const privateKeyFromParts = (
  parts: { readonly seed: Uint8Array; readonly embeddedPublicKey?: Uint8Array },
  derivePublic: (seed: Uint8Array) => Uint8Array
): Effect.Effect<PrivateKey, MalformedKey> => {
  const publicKey = derivePublic(parts.seed)
  if (parts.embeddedPublicKey && !equalBytes(parts.embeddedPublicKey, publicKey)) {
    return Effect.fail(malformed("PKCS#8 public key does not match its private key"))
  }
  return Effect.succeed(new PrivateKey(parts.seed, publicKey))
}

const Point = ed25519.Point

/** The cofactorless RFC 8032 equation [S]B = R + [k]A, comparing R as bytes, on @noble/curves primitives. */
export const nobleVerifyStrict = (pub: Uint8Array, message: Uint8Array, sig: Uint8Array): boolean => {
  if (!passesStrictPrechecks(pub, sig)) return false
  let A
  try {
    A = Point.fromBytes(pub, false)
  } catch {
    return false
  }
  const R = sig.subarray(0, 32)
  const S = bytesToBigIntLE(sig.subarray(32))
  const k = bytesToBigIntLE(sha512(concat(R, pub, message))) % L
  const rCheck = Point.BASE.multiplyUnsafe(S).subtract(A.multiplyUnsafe(k))
  return equalBytes(rCheck.toBytes(), R)
}

/** The @noble/curves implementation: any runtime, about a tenth of native speed on Node. */
export const makeNoble: KeysApi = (() => {
  const derivePublic = (seed: Uint8Array) => ed25519.getPublicKey(seed)
  const importPrivateKey = (input: PrivateKeyInput): Effect.Effect<PrivateKey, MalformedKey> =>
    isPrivateKey(input)
      ? Effect.succeed(input)
      : Effect.flatMap(privateKeyInputToBytes(input), (parts) => privateKeyFromParts(parts, derivePublic))
  const signSync = (key: PrivateKey, message: Uint8Array): Uint8Array => ed25519.sign(message, key.seed)
  const verifySync = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean =>
    publicKey.length === 32 && nobleVerifyStrict(publicKey, message, signature)
  return {
    implementation: "noble",
    generate: Effect.map(Entropy, (entropy) => {
      const seed = entropy.bytes(32)
      return new PrivateKey(seed, derivePublic(seed))
    }),
    importPrivateKey,
    sign: (key, message) => Effect.sync(() => signSync(key, message)),
    verify: (publicKey, message, signature) =>
      Effect.map(checkPublicKey(publicKey), (pub) => nobleVerifyStrict(pub, message, signature)),
    sha256: (data) => nobleSha256(data),
    signSync,
    verifySync
  }
})()

/** The `Keys` service. Layers: `Keys.noble` here, `KeysNative.layer` (node:crypto) for Node. */
export class Keys extends Context.Tag("agent-mesh/Keys")<Keys, KeysApi>() {
  /** Runtime-agnostic layer on @noble/curves; also the test layer. Each build comes with its own `MandateCache`. */
  static readonly noble: Layer.Layer<Keys | MandateCache> = Layer.merge(Layer.succeed(Keys, makeNoble), MandateCache.layer)
}

/** Runtime-agnostic layer on @noble/curves. */
export const layerNoble = Keys.noble
