import { assert, describe, it } from "@effect/vitest"
import { ed25519 } from "@noble/curves/ed25519.js"
import { sha512 } from "@noble/hashes/sha2.js"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import { execFileSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Keys, type KeysApi, sha256Text } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { fromHex, toBase64, toHex, utf8 } from "../src/core/internal/bytes.js"
import { bytesToBigIntLE, L } from "../src/core/internal/ed25519.js"
import rfc8032 from "./vectors/rfc8032-ed25519.json" with { type: "json" }
import speccheck from "./vectors/ed25519-speccheck.json" with { type: "json" }
import opensslKey from "./vectors/openssl-pkcs8.json" with { type: "json" }

const layers = [
  ["native", KeysNative.layer],
  ["noble", Keys.noble]
] as const

const withKeys = <A, E>(layer: (typeof layers)[number][1], f: (k: KeysApi) => Effect.Effect<A, E>) =>
  Effect.provide(Effect.flatMap(Keys, f), layer)

const native = KeysNative.makeNative()
const noble = Effect.runSync(Effect.provide(Keys, Keys.noble))

describe.each(layers)("Keys (%s)", (_name, layer) => {
  it.effect("RFC 8032 §7.1 vectors: public key, signature, verification", () =>
    withKeys(layer, (keys) =>
      Effect.forEach(rfc8032.vectors, (v) =>
        Effect.gen(function* () {
          const key = yield* keys.importPrivateKey(fromHex(v.secretKey))
          assert.strictEqual(toHex(key.publicKey), v.publicKey, v.name)
          const sig = yield* keys.sign(key, fromHex(v.message))
          assert.strictEqual(toHex(sig), v.signature, v.name)
          assert.isTrue(yield* keys.verify(key.publicKey, fromHex(v.message), sig), v.name)
          const bad = fromHex(v.signature)
          bad[0]! ^= 1
          assert.isFalse(yield* keys.verify(key.publicKey, fromHex(v.message), bad), v.name)
        })
      )
    ))

  it.effect("imports seed, PKCS#8 DER and base64 of both to the same key", () =>
    withKeys(layer, (keys) =>
      Effect.gen(function* () {
        const k = yield* keys.generate
        const fromSeed = yield* keys.importPrivateKey(k.seed)
        const fromDer = yield* keys.importPrivateKey(k.toPkcs8())
        const fromB64 = yield* keys.importPrivateKey(toBase64(k.toPkcs8()))
        const fromSeedB64 = yield* keys.importPrivateKey(toBase64(k.seed))
        for (const other of [fromSeed, fromDer, fromB64, fromSeedB64]) {
          assert.deepStrictEqual(other.publicKey, k.publicKey)
          assert.deepStrictEqual(other.seed, k.seed)
        }
      })
    ))

  it.effect("rejects malformed keys with MALFORMED_KEY", () =>
    withKeys(layer, (keys) =>
      Effect.gen(function* () {
        for (const bad of [new Uint8Array(31), new Uint8Array(48), "not base64!", new Uint8Array(64)]) {
          const e = yield* Effect.flip(keys.importPrivateKey(bad))
          assert.strictEqual(e.code, "MALFORMED_KEY")
        }
        const e = yield* Effect.flip(keys.verify(new Uint8Array(31), new Uint8Array(0), new Uint8Array(64)))
        assert.strictEqual(e.code, "MALFORMED_KEY")
        // A wrong-length signature is just a bad signature.
        const k = yield* keys.generate
        assert.isFalse(yield* keys.verify(k.publicKey, new Uint8Array(0), new Uint8Array(63)))
      })
    ))

  it.effect("a PKCS#8 key made by OpenSSL imports and signs identically to its raw seed", () =>
    withKeys(layer, (keys) =>
      Effect.gen(function* () {
        const viaDer = yield* keys.importPrivateKey(opensslKey.pkcs8DerB64)
        const viaSeed = yield* keys.importPrivateKey(fromHex(opensslKey.seedHex))
        assert.strictEqual(toHex(viaDer.publicKey), opensslKey.publicKeyHex)
        const msg = utf8("openssl interop")
        assert.deepStrictEqual(yield* keys.sign(viaDer, msg), yield* keys.sign(viaSeed, msg))
      })
    ))

  it.effect("a key from node's generateKeyPairSync (KeyObject and DER, v1 and v2) signs like its seed", () =>
    withKeys(layer, (keys) =>
      Effect.gen(function* () {
        const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519")
        const jwk = privateKey.export({ format: "jwk" })
        const seed = new Uint8Array(Buffer.from(jwk.d!, "base64url"))
        const fromObject = yield* keys.importPrivateKey(privateKey)
        const fromDer = yield* keys.importPrivateKey(new Uint8Array(privateKey.export({ format: "der", type: "pkcs8" })))
        const fromSeed = yield* keys.importPrivateKey(seed)
        const msg = utf8("node interop")
        const expected = new Uint8Array(crypto.sign(null, msg, privateKey))
        for (const k of [fromObject, fromDer, fromSeed]) assert.deepStrictEqual(yield* keys.sign(k, msg), expected)
        const rawPublic = new Uint8Array(publicKey.export({ format: "der", type: "spki" }).subarray(12))
        assert.deepStrictEqual(fromSeed.publicKey, rawPublic)
        assert.isTrue(yield* keys.verify(rawPublic, msg, expected))
        // PKCS#8 v2 (OneAsymmetricKey with the public key), as some tools write it.
        const v2 = fromHex(`3051020101300506032b657004220420${toHex(seed)}8121` + `00${toHex(fromSeed.publicKey)}`)
        assert.deepStrictEqual((yield* keys.importPrivateKey(v2)).publicKey, fromSeed.publicKey)
        const wrongPub = fromHex(`3051020101300506032b657004220420${toHex(seed)}812100${"11".repeat(32)}`)
        assert.strictEqual((yield* Effect.flip(keys.importPrivateKey(wrongPub))).code, "MALFORMED_KEY")
      })
    ))

  it.effect("a key pair generated by the openssl command imports (the committed OpenSSL fixture without the command)", () =>
    withKeys(layer, (keys) =>
      Effect.gen(function* () {
        let der: Buffer
        try {
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-openssl-"))
          const pem = path.join(dir, "k.pem")
          execFileSync("openssl", ["genpkey", "-algorithm", "ed25519", "-out", pem], { stdio: "ignore" })
          der = execFileSync("openssl", ["pkey", "-in", pem, "-outform", "DER"])
        } catch {
          // No openssl command here: the key it wrote once, committed with the seed it printed, stands in.
          der = Buffer.from(opensslKey.pkcs8DerB64, "base64")
          assert.strictEqual(toHex((yield* keys.importPrivateKey(new Uint8Array(der))).seed), opensslKey.seedHex)
        }
        const key = yield* keys.importPrivateKey(new Uint8Array(der))
        const ko = crypto.createPrivateKey({ key: der, format: "der", type: "pkcs8" })
        const rawPublic = new Uint8Array(crypto.createPublicKey(ko).export({ format: "der", type: "spki" }).subarray(12))
        assert.deepStrictEqual(key.publicKey, rawPublic)
        const msg = utf8("fresh openssl key")
        const sig = yield* keys.sign(key, msg)
        assert.deepStrictEqual(sig, new Uint8Array(crypto.sign(null, msg, ko)))
        assert.isTrue(yield* keys.verify(rawPublic, msg, sig))
      })
    ))

  it.effect("never serializes the secret", () =>
    withKeys(layer, (keys) =>
      Effect.gen(function* () {
        const k = yield* keys.generate
        const text = JSON.stringify({ k }) + String(k)
        assert.notInclude(text, toHex(k.seed))
        assert.notInclude(text, toBase64(k.seed))
      })
    ))
})

describe("Keys: both layers agree", () => {
  it("accept and reject exactly the same edge-case signatures (ed25519-speccheck)", () => {
    const verdicts = speccheck.map((c) => {
      const args = [fromHex(c.pub_key), fromHex(c.message), fromHex(c.signature)] as const
      const a = Effect.runSync(native.verify(...args))
      const b = Effect.runSync(noble.verify(...args))
      assert.strictEqual(a, b, `case ${c.message}`)
      return a
    })
    // Our rule: small-order keys (0, 1), cofactored-only equations (4, 5), S ≥ L (6, 7) and non-canonical R (8, 9) fail.
    assert.deepStrictEqual(verdicts, [false, false, true, true, false, false, false, false, false, false])
  })

  it("accept a signature whose R is the identity (a small-order point) when the cofactorless equation holds", () => {
    // A = [a]B and S = k·a mod L give [S]B = [k]A = R + [k]A with R = identity; Node 24's OpenSSL call refuses it.
    const a = 0x1234_5678_9abc_def0n
    const publicKey = ed25519.Point.BASE.multiply(a).toBytes()
    const message = utf8("R is the identity")
    const R = fromHex(`01${"00".repeat(31)}`)
    const k = bytesToBigIntLE(sha512(new Uint8Array([...R, ...publicKey, ...message]))) % L
    const S = fromHex(((k * a) % L).toString(16).padStart(64, "0")).reverse()
    const signature = new Uint8Array([...R, ...S])
    const tampered = utf8("R is the identity, tampered")
    for (const keys of [native, noble]) {
      assert.isTrue(Effect.runSync(keys.verify(publicKey, message, signature)), keys.implementation)
      assert.isFalse(Effect.runSync(keys.verify(publicKey, tampered, signature)), keys.implementation)
    }
  })

  it("reject a non-canonical S (S + L) and a non-canonical public key encoding", () => {
    const key = Effect.runSync(native.importPrivateKey(fromHex(rfc8032.vectors[0]!.secretKey)))
    const msg = utf8("malleability")
    const sig = Effect.runSync(native.sign(key, msg))
    const s = BigInt(`0x${toHex(sig.slice(32).reverse())}`)
    const sPlusL = s + ((1n << 252n) + 27742317777372353535851937790883648493n)
    const sBytes = fromHex(sPlusL.toString(16).padStart(64, "0")).reverse()
    const malleated = new Uint8Array([...sig.slice(0, 32), ...sBytes])
    for (const k of [native, noble]) {
      assert.isTrue(Effect.runSync(k.verify(key.publicKey, msg, sig)))
      assert.isFalse(Effect.runSync(k.verify(key.publicKey, msg, malleated)))
      // y = p + 1 encodes the identity non-canonically.
      assert.isFalse(Effect.runSync(k.verify(fromHex(`ee${"ff".repeat(30)}7f`), msg, sig)))
    }
  })

  it("give byte-identical signatures and the same verdicts on random keys, messages and corruptions", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ maxLength: 256 }), fc.nat(63), (seed, msg, flip) => {
        const a = Effect.runSync(native.importPrivateKey(seed))
        const b = Effect.runSync(noble.importPrivateKey(seed))
        assert.deepStrictEqual(a.publicKey, b.publicKey)
        const sa = Effect.runSync(native.sign(a, msg))
        assert.deepStrictEqual(sa, Effect.runSync(noble.sign(b, msg)))
        assert.isTrue(Effect.runSync(noble.verify(a.publicKey, msg, sa)))
        const bad = sa.slice()
        bad[flip]! ^= 0x40
        assert.strictEqual(Effect.runSync(native.verify(a.publicKey, msg, bad)), Effect.runSync(noble.verify(a.publicKey, msg, bad)))
      }),
      { numRuns: 60 }
    )
  })

  it("sync variants: signSync makes sign's signature and verifySync gives verify's verdict, on both layers", () => {
    const cases = speccheck.map((c) => [fromHex(c.pub_key), fromHex(c.message), fromHex(c.signature)] as const)
    for (const k of [native, noble]) {
      assert.isDefined(k.signSync)
      assert.isDefined(k.verifySync)
      for (const v of rfc8032.vectors) {
        const key = Effect.runSync(k.importPrivateKey(fromHex(v.secretKey)))
        assert.strictEqual(toHex(k.signSync!(key, fromHex(v.message))), v.signature, `${k.implementation} ${v.name}`)
        assert.isTrue(k.verifySync!(key.publicKey, fromHex(v.message), fromHex(v.signature)))
      }
      for (const [pub, msg, sig] of cases) assert.strictEqual(k.verifySync!(pub, msg, sig), Effect.runSync(k.verify(pub, msg, sig)))
      // A public key of the wrong length: verify fails with MALFORMED_KEY, verifySync answers false.
      const [pub, msg, sig] = cases[2]!
      assert.isFalse(k.verifySync!(pub.slice(0, 31), msg, sig))
      assert.isFalse(k.verifySync!(new Uint8Array([...pub, 0]), msg, sig))
    }
  })

  it("the public-key cache never confuses two keys that share a prefix or differ in one byte", () => {
    const a = Effect.runSync(native.importPrivateKey(new Uint8Array(32).fill(1)))
    const b = Effect.runSync(native.importPrivateKey(new Uint8Array(32).fill(2)))
    const msg = utf8("which key")
    const sig = native.signSync!(a, msg)
    assert.isTrue(native.verifySync!(a.publicKey, msg, sig))
    assert.isFalse(native.verifySync!(b.publicKey, msg, sig))
    // A view into a larger buffer is read as its own 32 bytes.
    const padded = new Uint8Array(40)
    padded.set(b.publicKey, 8)
    assert.isFalse(native.verifySync!(padded.subarray(8), msg, sig))
    padded.set(a.publicKey, 8)
    assert.isTrue(native.verifySync!(padded.subarray(8), msg, sig))
  })

  it("hash SHA-256 identically", () => {
    const data = utf8("abc")
    assert.strictEqual(toHex(native.sha256(data)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    assert.strictEqual(toHex(noble.sha256(data)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })

  it("hash arbitrary bytes, and any string's UTF-8 (lone surrogates included), as noble does", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.string({ unit: "binary", maxLength: 200 }), (bytes, text) => {
        assert.strictEqual(toHex(native.sha256(bytes)), toHex(noble.sha256(bytes)))
        assert.strictEqual(toHex(native.sha256Utf8!(text)), toHex(noble.sha256(utf8(text))))
        assert.strictEqual(toHex(sha256Text(native, text)), toHex(sha256Text(noble, text)))
      }),
      { numRuns: 500 }
    )
  })
})
