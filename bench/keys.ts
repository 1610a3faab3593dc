/**
 * Sign and verify per second: Keys.native and Keys.noble beside raw node:crypto with a cached KeyObject.
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { Keys, type KeysApi } from "../src/Keys.js"
import * as KeysNative from "../src/KeysNative.js"
import { measureSync, report, type Measurement } from "./harness.js"

/** Runs `n` service calls inside one Effect, as a program using the service would. */
const loop = <A>(n: number, op: () => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    for (let i = 0; i < n; i++) yield* op()
  })

const BATCH = 64

/** Ops/s of a service operation, run in batches of 64 inside one Effect (the per-batch runSync is amortized). */
const measureService = (name: string, op: () => Effect.Effect<unknown, unknown>): Measurement => {
  const batch = loop(BATCH, op)
  const m = measureSync(name, () => Effect.runSync(batch))
  return { name, opsPerSecond: m.opsPerSecond * BATCH }
}

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

  const rawSign = measureSync("raw node:crypto sign (cached KeyObject)", () => crypto.sign(null, message, privateKey))
  const rawVerify = measureSync("raw node:crypto verify (cached KeyObject)", () => crypto.verify(null, message, publicKey, rawSig))
  const nativeSign = measureService("Keys.native sign", () => native.sign(nativeKey, msg))
  const nativeVerify = measureService("Keys.native verify", () => native.verify(pub, msg, sig))
  const nobleSign = measureService("Keys.noble sign", () => noble.sign(nobleKey, msg))
  const nobleVerify = measureService("Keys.noble verify", () => noble.verify(pub, msg, sig))

  report("keys", [
    { figure: nativeSign, baseline: rawSign, target: 0.9 },
    { figure: nativeVerify, baseline: rawVerify, target: 0.9 },
    { figure: nobleSign, baseline: rawSign },
    { figure: nobleVerify, baseline: rawVerify }
  ])
}
