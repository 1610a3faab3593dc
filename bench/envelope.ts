/**
 * Envelope build and validate (memory nonce store) per CPU-second of this process, beside one raw node:crypto sign
 * and verify, in interleaved rounds (CPU time, so time descheduled on a shared machine is charged to nothing).
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { generateDid } from "../src/core/Did.js"
import { buildEnvelope, validateEnvelope, type Envelope } from "../src/core/Envelope.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeMemory } from "../src/core/NonceStore.js"
import { measureInterleaved, report, type Measurement } from "./harness.js"

const BATCH = 64

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const provide = <A, E>(e: Effect.Effect<A, E, Keys>) => Effect.provide(e, KeysNative.layer)
  // One Keys instance for the whole run, as an application has: its caches are part of what is measured.
  const keysLayer = KeysNative.layer
  const keys = Effect.runSync(Effect.provide(Keys, keysLayer))
  const withKeys = <A, E>(e: Effect.Effect<A, E, Keys>) => Effect.provideService(e, Keys, keys)
  const { alice, bob } = Effect.runSync(provide(Effect.all({ alice: generateDid("alice"), bob: generateDid("bob") })))
  const body = { capability: "summarize", params: { text: "The quick brown fox jumps over the lazy dog.", maxWords: 12 } }

  const build = buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body, privateKey: alice.privateKey })
  const buildBatch = withKeys(Effect.forEach(Array.from({ length: BATCH }), () => build, { discard: true }))
  // Validation needs a fresh envelope per call (nonces are single-use): prebuild a pool, validate each once.
  const pool: Array<Envelope> = Effect.runSync(withKeys(Effect.forEach(Array.from({ length: 20_000 }), () => build)))
  let next = 0
  let store = makeMemory({ capacity: 1_000_000 })
  const validateOne = Effect.suspend(() => {
    if (next === pool.length) {
      next = 0
      store = makeMemory({ capacity: 1_000_000 })
    }
    return validateEnvelope(pool[next++]!, alice.publicKeyBytes, bob.did, store)
  })
  const validateBatch = withKeys(Effect.forEach(Array.from({ length: BATCH }), () => validateOne, { discard: true }))

  const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519")
  const data = crypto.randomBytes(64)
  const sig = crypto.sign(null, data, privateKey)
  const [rawSign, buildM, rawVerify, validateM] = measureInterleaved([
    { name: "raw node:crypto sign (one)", op: () => crypto.sign(null, data, privateKey) },
    { name: "envelope build", op: () => Effect.runSync(buildBatch), perCall: BATCH },
    { name: "raw node:crypto verify (one)", op: () => crypto.verify(null, data, publicKey, sig) },
    { name: "envelope validate (memory nonce store)", op: () => Effect.runSync(validateBatch), perCall: BATCH }
  ], { clock: (process.env["BENCH_CLOCK"] ?? "cpu") as "cpu" | "wall" }) as [Measurement, Measurement, Measurement, Measurement]

  report("envelope", [
    { figure: buildM, baseline: rawSign, target: 0.6 },
    { figure: validateM, baseline: rawVerify, target: 0.75 }
  ])
}
