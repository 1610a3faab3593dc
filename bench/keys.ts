/**
 * Sign and verify per second: Keys.native and Keys.noble beside raw node:crypto with a cached KeyObject.
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { Keys, type KeysApi } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { measureInterleaved, report, type Measurement } from "./harness.js"

/** Runs `n` service calls inside one Effect, as a program using the service would. */
const loop = <A>(n: number, op: () => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    for (let i = 0; i < n; i++) yield* op()
  })

// Service calls run in batches of 64 inside one Effect, as a program using the service would; runSync is amortized.
const BATCH = 64

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const message = crypto.randomBytes(256)
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519")
  const rawSig = crypto.sign(null, message, privateKey)
  const seed = new Uint8Array(Buffer.from(privateKey.export({ format: "jwk" }).d!, "base64url"))
  const msg = new Uint8Array(message)

  const native: KeysApi = Effect.runSync(Effect.provide(Keys, KeysNative.layer))
  const noble: KeysApi = Effect.runSync(Effect.provide(Keys, Keys.noble))
  const nativeKey = Effect.runSync(native.importPrivateKey(seed))
  const nobleKey = Effect.runSync(noble.importPrivateKey(seed))
  const pub = nativeKey.publicKey
  const sig = new Uint8Array(rawSig)

  const signBatch = loop(BATCH, () => native.sign(nativeKey, msg))
  const verifyBatch = loop(BATCH, () => native.verify(pub, msg, sig))
  const nobleSignBatch = loop(BATCH, () => noble.sign(nobleKey, msg))
  const nobleVerifyBatch = loop(BATCH, () => noble.verify(pub, msg, sig))
  const [rawSign, nativeSign, rawVerify, nativeVerify] = measureInterleaved([
    { name: "raw node:crypto sign (cached KeyObject)", op: () => crypto.sign(null, message, privateKey) },
    { name: "Keys.native sign", op: () => Effect.runSync(signBatch), perCall: BATCH },
    { name: "raw node:crypto verify (cached KeyObject)", op: () => crypto.verify(null, message, publicKey, rawSig) },
    { name: "Keys.native verify", op: () => Effect.runSync(verifyBatch), perCall: BATCH }
  ]) as [Measurement, Measurement, Measurement, Measurement]
  const [nobleSign, nobleVerify] = measureInterleaved([
    { name: "Keys.noble sign", op: () => Effect.runSync(nobleSignBatch), perCall: BATCH },
    { name: "Keys.noble verify", op: () => Effect.runSync(nobleVerifyBatch), perCall: BATCH }
  ], { rounds: 3 }) as [Measurement, Measurement]

  report("keys", [
    { figure: nativeSign, baseline: rawSign, target: 0.9 },
    { figure: nativeVerify, baseline: rawVerify, target: 0.9 },
    { figure: nobleSign, baseline: rawSign },
    { figure: nobleVerify, baseline: rawVerify }
  ])
}
