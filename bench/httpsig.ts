/**
 * mesh-sig verification in process: one signed request checked by the library (`checkRequest` then `recordNonce`,
 * a memory nonce store, a resolver answering the caller's key at once) beside what it cannot avoid, one raw
 * node:crypto verify over the signature base with a cached KeyObject plus the SHA-256 of the body. Target ≥ 0.7×.
 *
 * Requests are signed by `signRequest` before the rounds, each with its own nonce (a nonce is single-use); the pool
 * is cycled with a fresh nonce store at each wrap. The raw baseline verifies the same requests: its base is built by
 * string concatenation from the headers as sent (the Signature-Input member after `sig1=`), the signature is the
 * base64 between the colons of `Signature: sig1=:…:`; it parses nothing, checks no time, no nonce.
 * Run: `npm run bench -- httpsig`.
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { checkRequest, recordNonce, signRequest, type SignableRequest } from "../src/core/HttpSignature.js"
import { Keys } from "../src/core/Keys.js"
import { makeMemory } from "../src/core/NonceStore.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { measureInterleaved, report, type Measurement } from "./harness.js"

const BATCH = 64
const POOL = 20_000
const CALLER = "did:mesh:bench-caller"
const URL_ = "http://127.0.0.1:8080/v1/run"

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const keys = Effect.runSync(Effect.provide(Keys, KeysNative.layer))
  const caller = Effect.runSync(keys.importPrivateKey(new Uint8Array(32).fill(7)))
  const resolved = Effect.succeed({ publicKey: caller.publicKey, keyVersion: 1 })
  const resolveKey = () => resolved

  const pool: Array<SignableRequest> = Effect.runSync(
    Effect.forEach(Array.from({ length: POOL }), (_, i) => {
      const body = new Uint8Array(Buffer.from(JSON.stringify({ message: `hello ${i}`, sessionId: `bench-${i}` })))
      return Effect.map(
        signRequest({ method: "POST", url: URL_, body }, { privateKey: caller, keyId: `${CALLER}#key-1`, ttlSeconds: 3_600 }),
        (headers): SignableRequest => ({ method: "POST", url: URL_, body, headers: { ...headers, host: "127.0.0.1:8080", "content-type": "application/json" } })
      )
    }).pipe(Effect.provideService(Keys, keys))
  )

  let next = 0
  let store = makeMemory({ capacity: POOL, perSenderQuota: POOL })
  const take = (): SignableRequest => {
    if (next === pool.length) {
      next = 0
      store = makeMemory({ capacity: POOL, perSenderQuota: POOL })
    }
    return pool[next++]!
  }
  const options = { resolveKey, clockToleranceMs: 30_000 }
  const verifyOne = Effect.suspend(() => Effect.flatMap(checkRequest(take(), options), (checked) => recordNonce(checked, store)))
  const verifyBatch = Effect.forEach(Array.from({ length: BATCH }), () => verifyOne, { discard: true }).pipe(Effect.provideService(Keys, keys))

  const publicKey = crypto.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(caller.publicKey).toString("base64url") }, format: "jwk" })
  let rawNext = 0
  const rawOne = () => {
    const req = pool[rawNext++ % pool.length]!
    const input = req.headers["signature-input"] as string
    const signature = req.headers["signature"] as string
    const digest = req.headers["content-digest"] as string
    crypto.hash("sha256", req.body, "buffer")
    const base = `"@method": ${req.method}\n"@target-uri": ${req.url}\n"content-digest": ${digest}\n"@signature-params": ${input.slice(5)}`
    if (!crypto.verify(null, Buffer.from(base), publicKey, Buffer.from(signature.slice(6, -1), "base64"))) throw new Error("raw verify failed")
  }

  const [raw, lib] = measureInterleaved([
    { name: "raw node:crypto verify + sha256 of the body", op: rawOne },
    { name: "mesh-sig checkRequest + recordNonce", op: () => Effect.runSync(verifyBatch), perCall: BATCH }
  ], { clock: "cpu" }) as [Measurement, Measurement]
  report("httpsig", [{ figure: lib, baseline: raw, target: 0.7 }])
}
