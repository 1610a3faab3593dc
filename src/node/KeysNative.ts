/**
 * The node:crypto layer of `Keys`: OpenSSL's Ed25519 with key objects cached, the default on Node.
 *
 * Floor: node (docs/architecture.md §3).
 */
import * as crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Keys, type KeysApi, checkPublicKey, isPrivateKey, nobleVerifyStrict, type PrivateKeyInput, privateKeyFromParts, privateKeyInputToBytes, type MalformedKey, PrivateKey } from "../core/Keys.js"
import { Entropy } from "../core/Entropy.js"
import { equalBytes, toBase64 } from "../core/internal/bytes.js"
import { MandateCache } from "../core/MandateCache.js"
import { isSmallOrderEncoding, passesStrictPrechecks, publicToSpki, seedToPkcs8 } from "../core/internal/ed25519.js"
import { Lru } from "../core/internal/lru.js"

/** A Uint8Array view of a Buffer, without copying (a Buffer from node's pool may share its ArrayBuffer). */
const view = (b: Buffer): Uint8Array => new Uint8Array(b.buffer, b.byteOffset, b.length)

// crypto.hash (node ≥ 20.12) skips the Hash object; older 20.x lines fall back to createHash. Given a string it
// hashes its UTF-8 without a TextEncoder copy in JavaScript.
const oneShotHash = (crypto as { hash?: (alg: string, data: Uint8Array | string, enc: "binary") => string }).hash

/**
 * SHA-256 of bytes or of a string's UTF-8. The digest is read as a "binary" (latin1) string, one character a byte,
 * and copied into a small array: a digest returned as a Buffer costs an ArrayBuffer with its own backing store,
 * which is slower to make and to collect than the hash is to compute.
 */
const sha256Of = (data: Uint8Array | string): Uint8Array => {
  const digest = oneShotHash === undefined
    ? crypto.createHash("sha256").update(data).digest("binary")
    : oneShotHash("sha256", data, "binary")
  const out = new Uint8Array(32)
  for (let i = 0; i < 32; i++) out[i] = digest.charCodeAt(i)
  return out
}

/** Stores `value` under `key` in `cache` and returns it. */
const remember = <K, V>(cache: Lru<K, V>, key: K, value: V): V => {
  cache.set(key, value)
  return value
}

/** Builds a native `KeysApi` with its own caches (public keys by value, private keys by object). */
export const makeNative = (options: { readonly cacheSize?: number } = {}): KeysApi => {
  const cacheSize = options.cacheSize ?? 4096
  const publicKeys = new Lru<string, crypto.KeyObject>(cacheSize)
  const privateKeyObjects = new WeakMap<PrivateKey, crypto.KeyObject>()

  const privateKeyObject = (key: PrivateKey): crypto.KeyObject => {
    let ko = privateKeyObjects.get(key)
    if (ko === undefined) {
      ko = crypto.createPrivateKey({ key: Buffer.from(seedToPkcs8(key.seed)), format: "der", type: "pkcs8" })
      privateKeyObjects.set(key, ko)
    }
    return ko
  }

  const derivePublic = (seed: Uint8Array): Uint8Array => {
    const ko = crypto.createPrivateKey({ key: Buffer.from(seedToPkcs8(seed)), format: "der", type: "pkcs8" })
    const spki = crypto.createPublicKey(ko).export({ format: "der", type: "spki" })
    return new Uint8Array(spki.subarray(spki.length - 32))
  }

  // Keyed by the key's bytes as a latin1 string: exact, and several times cheaper to make than base64. The key used
  // last is also held beside its own copy of the bytes: a run of messages from one sender then skips making the
  // string and reordering the cache.
  let lastPub: Uint8Array | undefined
  let lastPublicKey: crypto.KeyObject | undefined
  const publicKeyObject = (pub: Uint8Array): crypto.KeyObject => {
    if (lastPub !== undefined && lastPublicKey !== undefined && equalBytes(pub, lastPub)) return lastPublicKey
    const id = Buffer.from(pub.buffer, pub.byteOffset, pub.length).toString("latin1")
    const ko = publicKeys.get(id) ?? remember(publicKeys, id, crypto.createPublicKey({ key: Buffer.from(publicToSpki(pub)), format: "der", type: "spki" }))
    lastPub = pub.slice()
    lastPublicKey = ko
    return ko
  }

  const signSync = (key: PrivateKey, message: Uint8Array): Uint8Array => view(crypto.sign(null, message, privateKeyObject(key)))
  const verifySync = (pub: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean => {
    if (pub.length !== 32 || !passesStrictPrechecks(pub, signature)) return false
    // Node 24's crypto.verify refuses every signature whose R is a small-order point, even when the cofactorless
    // equation holds, which our rule accepts (docs/protocol.md §2; ed25519-speccheck case 2); Node 20 and 22 do
    // not. Honest signers never produce such an R, so the slower noble equation decides those few.
    if (signature.length === 64 && isSmallOrderEncoding(signature.subarray(0, 32))) return nobleVerifyStrict(pub, message, signature)
    try {
      return crypto.verify(null, message, publicKeyObject(pub), signature)
    } catch {
      // OpenSSL refuses some non-points as keys at import; under our rule that is just a bad signature.
      return false
    }
  }

  // Callers that pass raw bytes or base64 on every call (buildEnvelope's `privateKey`) should not pay an import each time.
  const imported = new Lru<string, PrivateKey>(256)
  const importPrivateKey = (input: PrivateKeyInput): Effect.Effect<PrivateKey, MalformedKey> => {
    if (isPrivateKey(input)) return Effect.succeed(input)
    const cacheKey = typeof input === "string" ? input : input instanceof Uint8Array ? toBase64(input) : undefined
    const hit = cacheKey === undefined ? undefined : imported.get(cacheKey)
    if (hit !== undefined) return Effect.succeed(hit)
    return Effect.flatMap(privateKeyInputToBytes(input), (parts) =>
      Effect.map(privateKeyFromParts(parts, derivePublic), (key) => (cacheKey === undefined ? key : remember(imported, cacheKey, key)))
    )
  }

  return {
    implementation: "native",
    generate: Effect.map(Entropy, (entropy) => {
      const seed = entropy.bytes(32)
      return new PrivateKey(seed, derivePublic(seed))
    }),
    importPrivateKey,
    sign: (key, message) => Effect.sync(() => signSync(key, message)),
    verify: (publicKey, message, signature) =>
      Effect.flatMap(checkPublicKey(publicKey), (pub) => Effect.sync(() => verifySync(pub, message, signature))),
    signSync,
    verifySync,
    sha256: sha256Of,
    sha256Utf8: sha256Of
  }
}

/** `Keys` on node:crypto: the default on Node. Each build comes with its own `MandateCache` (verification's parse cache). */
export const layer: Layer.Layer<Keys | MandateCache> = Layer.merge(Layer.sync(Keys, () => makeNative()), MandateCache.layer)

/** Same as `layer`; the name docs/architecture.md §2 gives it (`Keys.native`). */
export const native = layer
