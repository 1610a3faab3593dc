/**
 * A Worker that checks the protocol's vectors (test/vectors/) against the core entry (src/core/index.ts) with
 * `Keys.noble`, and Web Crypto's own Ed25519 against RFC 8032 and the speccheck cases: bundled for the neutral
 * platform with no import left and run by workerd without `nodejs_compat`, so nothing of it can reach node:crypto.
 * `GET /` answers the checks; `GET /bench?impl=noble|webcrypto&op=sign|verify&n=…` runs `n` operations (timed from
 * outside: workerd's clock stands still while code runs), for bench/runtimes.ts.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import { Did, Envelope, HttpSignature, KeyResolver, Keys, NonceStore, Proof } from "../../../src/core/index.js"
import envelopes from "../../vectors/envelopes.json" with { type: "json" }
import identities from "../../vectors/identities.json" with { type: "json" }
import meshSig from "../../vectors/mesh-sig.json" with { type: "json" }
import rfc8032 from "../../vectors/rfc8032-ed25519.json" with { type: "json" }
import speccheck from "../../vectors/ed25519-speccheck.json" with { type: "json" }
import w3c from "../../vectors/w3c-eddsa-jcs-2022.json" with { type: "json" }

const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("")
const unhex = (s: string): Uint8Array<ArrayBuffer> => new Uint8Array((s.match(/../g) ?? []).map((h) => parseInt(h, 16)))
const b64 = (b: Uint8Array): string => btoa(String.fromCharCode(...b))
const utf8 = (s: string): Uint8Array<ArrayBuffer> => new TextEncoder().encode(s) as Uint8Array<ArrayBuffer>
const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const fromMultibase58 = (s: string): Uint8Array => {
  let n = 0n
  for (const c of s.slice(1)) n = n * 58n + BigInt(BASE58.indexOf(c))
  const out: Array<number> = []
  while (n > 0n) {
    out.unshift(Number(n % 256n))
    n /= 256n
  }
  for (const c of s.slice(1)) {
    if (c !== "1") break
    out.unshift(0)
  }
  return new Uint8Array(out)
}
const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)

/** One check's verdict. */
interface Verdict {
  readonly name: string
  readonly ok: boolean
  readonly detail?: string
}

const noble = Keys.Keys.noble

const check = (name: string, effect: Effect.Effect<boolean, unknown, Keys.Keys>): Effect.Effect<Verdict> =>
  effect.pipe(
    Effect.provide(Layer.merge(noble, TestContext.TestContext)),
    Effect.either,
    Effect.map((r): Verdict => (Either.isRight(r) ? { name, ok: r.right } : { name, ok: false, detail: String(r.left) }))
  )

const checks: ReadonlyArray<Effect.Effect<Verdict>> = [
  ...rfc8032.vectors.map((v) =>
    check(`rfc8032 ${v.name}`, Effect.gen(function* () {
      const keys = yield* Keys.Keys
      const key = yield* keys.importPrivateKey(unhex(v.secretKey))
      const sig = yield* keys.sign(key, unhex(v.message))
      const bad = unhex(v.signature)
      bad[0]! ^= 1
      return hex(key.publicKey) === v.publicKey && hex(sig) === v.signature && (yield* keys.verify(key.publicKey, unhex(v.message), sig)) && !(yield* keys.verify(key.publicKey, unhex(v.message), bad))
    }))
  ),
  check("ed25519-speccheck verdicts", Effect.gen(function* () {
    const keys = yield* Keys.Keys
    const verdicts = yield* Effect.forEach(speccheck, (c) => keys.verify(unhex(c.pub_key), unhex(c.message), unhex(c.signature)))
    return same(verdicts, [false, false, true, true, false, false, false, false, false, false])
  })),
  ...identities.identities.map((v) =>
    check(`identity ${v.did}`, Effect.gen(function* () {
      const keys = yield* Keys.Keys
      const key = yield* keys.importPrivateKey(unhex(v.seedHex))
      const did = yield* Did.parseDid(v.did)
      return (
        hex(key.publicKey) === v.publicKeyHex &&
        hex(key.toPkcs8()) === v.pkcs8Hex &&
        b64(key.publicKey) === v.publicKeyB64 &&
        Did.publicKeyMultibase(key.publicKey) === v.publicKeyMultibase &&
        Did.didKey(key.publicKey) === v.didKey &&
        Did.didHash(did) === v.didHash &&
        same(Did.makeDidDocument(did, key.publicKey, v.baseAddress ?? undefined), v.document)
      )
    }))
  ),
  ...identities.proofs.map((v, i) =>
    check(`proof ${i}`, Effect.gen(function* () {
      const alice = identities.identities[0]!
      const signed = yield* Proof.signMessage(v.message, unhex(alice.seedHex), `${alice.did}#key-1`, { created: "2026-01-01T00:00:00Z" })
      yield* Proof.verifyMessage(v.signed, unhex(alice.publicKeyHex), { verificationMethod: `${alice.did}#key-1` })
      return same(signed, v.signed)
    }))
  ),
  check("w3c eddsa-jcs-2022", Effect.gen(function* () {
    const secret = fromMultibase58(w3c.keyPair.privateKeyMultibase)
    const { proof, ...document } = w3c.signed
    const signed = yield* Proof.signMessage(document, secret.subarray(2), proof.verificationMethod, { created: proof.created })
    const pub = fromMultibase58(w3c.keyPair.publicKeyMultibase).subarray(2)
    yield* Proof.verifyMessage(w3c.signed, pub)
    const tampered = yield* Effect.either(Proof.verifyMessage({ ...w3c.signed, name: "Forged Credential" }, pub))
    return signed.proof.proofValue === proof.proofValue && Either.isLeft(tampered) && tampered.left.code === "SIGNATURE_INVALID"
  })),
  ...envelopes.envelopes.map((v) =>
    check(`envelope ${v.name}`, Effect.gen(function* () {
      const store = NonceStore.makeMemory()
      yield* TestClock.setTime(v.nowMs)
      const first = yield* Effect.either(Envelope.validateEnvelope(v.envelope, v.senderPublicKeyB64, v.recipient, store))
      const outcome = "validateTwice" in v && v.validateTwice ? yield* Effect.either(Envelope.validateEnvelope(v.envelope, v.senderPublicKeyB64, v.recipient, store)) : first
      return v.expect === null ? Either.isRight(outcome) : Either.isLeft(outcome) && outcome.left.code === v.expect
    }))
  ),
  check("mesh-sig example", Effect.gen(function* () {
    const keys = yield* Keys.Keys
    const key = yield* keys.importPrivateKey(unhex(meshSig.seedHex))
    yield* TestClock.setTime(meshSig.time)
    const req = { ...meshSig.request, body: utf8(meshSig.request.body) }
    const headers = yield* HttpSignature.signRequest(req, { privateKey: key, keyId: meshSig.keyId, nonce: meshSig.nonce })
    const resolveKey = KeyResolver.makeStatic({ "did:mesh:acme.alice": { publicKey: key.publicKey, keyVersion: 1 } }).resolve
    const verified = yield* HttpSignature.verifyRequest({ ...req, headers }, { resolveKey, nonceStore: NonceStore.makeMemory() })
    return same(headers, meshSig.headers) && verified.did === "did:mesh:acme.alice"
  }))
]

/** Web Crypto's Ed25519 where the runtime has it: RFC 8032 signatures reproduced, and its speccheck verdicts. */
const webCrypto = async () => {
  const subtle = globalThis.crypto.subtle
  const pkcs8 = (seed: Uint8Array): Uint8Array<ArrayBuffer> => new Uint8Array([...unhex("302e020100300506032b657004220420"), ...seed])
  const rfc: Array<Verdict> = []
  for (const v of rfc8032.vectors) {
    try {
      const priv = await subtle.importKey("pkcs8", pkcs8(unhex(v.secretKey)), { name: "Ed25519" }, false, ["sign"])
      const pub = await subtle.importKey("raw", unhex(v.publicKey), { name: "Ed25519" }, false, ["verify"])
      const sig = new Uint8Array(await subtle.sign({ name: "Ed25519" }, priv, unhex(v.message)))
      const ok = hex(sig) === v.signature && (await subtle.verify({ name: "Ed25519" }, pub, sig, unhex(v.message)))
      rfc.push({ name: `webcrypto rfc8032 ${v.name}`, ok })
    } catch (e) {
      rfc.push({ name: `webcrypto rfc8032 ${v.name}`, ok: false, detail: String(e) })
    }
  }
  const speccheckVerdicts: Array<boolean | string> = []
  for (const c of speccheck) {
    try {
      const pub = await subtle.importKey("raw", unhex(c.pub_key), { name: "Ed25519" }, false, ["verify"])
      speccheckVerdicts.push(await subtle.verify({ name: "Ed25519" }, pub, unhex(c.signature), unhex(c.message)))
    } catch (e) {
      speccheckVerdicts.push(`refused: ${String(e)}`)
    }
  }
  return { rfc8032: rfc, speccheck: speccheckVerdicts }
}

const SEED = unhex(rfc8032.vectors[0]!.secretKey)
const MESSAGE = utf8("a mesh request's signature base, about this long: method, target URI, digest, nonce, created")

/** `n` signatures or verifications by one implementation. */
const bench = async (impl: string, op: string, n: number): Promise<number> => {
  if (impl === "noble") {
    const keys = Effect.runSync(Effect.provide(Keys.Keys, noble))
    const key = Effect.runSync(keys.importPrivateKey(SEED))
    const sig = Effect.runSync(keys.sign(key, MESSAGE))
    let ok = 0
    for (let i = 0; i < n; i++) ok += op === "sign" ? Effect.runSync(keys.sign(key, MESSAGE)).length : Effect.runSync(keys.verify(key.publicKey, MESSAGE, sig)) ? 1 : 0
    return ok
  }
  const subtle = globalThis.crypto.subtle
  const priv = await subtle.importKey("pkcs8", new Uint8Array([...unhex("302e020100300506032b657004220420"), ...SEED]), { name: "Ed25519" }, false, ["sign"])
  const pub = await subtle.importKey("raw", unhex(rfc8032.vectors[0]!.publicKey), { name: "Ed25519" }, false, ["verify"])
  const sig = await subtle.sign({ name: "Ed25519" }, priv, MESSAGE)
  let ok = 0
  for (let i = 0; i < n; i++) ok += op === "sign" ? (await subtle.sign({ name: "Ed25519" }, priv, MESSAGE)).byteLength : (await subtle.verify({ name: "Ed25519" }, pub, sig, MESSAGE)) ? 1 : 0
  return ok
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url)
    if (url.pathname === "/bench") {
      const n = Number(url.searchParams.get("n") ?? "0")
      return Response.json({ done: await bench(url.searchParams.get("impl") ?? "noble", url.searchParams.get("op") ?? "verify", n) })
    }
    const verdicts = await Effect.runPromise(Effect.all(checks))
    return Response.json({ noble: verdicts, webCrypto: await webCrypto(), hasNodeCrypto: typeof (globalThis as { process?: unknown }).process !== "undefined" })
  }
}
