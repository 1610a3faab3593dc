/**
 * Writes test/vectors/{identities,envelopes}.json from fixed seeds and fixed times. The committed files are what
 * the tests read; rerun this only when the protocol changes on purpose (`npx tsx scripts/gen-vectors.ts`).
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { didHash, identityFromKey, parseDid, verificationMethodId } from "../src/core/Did.js"
import { DEFAULT_CLOCK_TOLERANCE_MS } from "../src/core/Envelope.js"
import { Keys } from "../src/core/Keys.js"
import { CRYPTOSUITE, createProof, signMessage } from "../src/core/Proof.js"
import { fromHex, toHex } from "../src/core/internal/bytes.js"

const seeds = {
  alice: "0101010101010101010101010101010101010101010101010101010101010101",
  bob: "0202020202020202020202020202020202020202020202020202020202020202",
  carol: "a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5"
}
const dids = { alice: "did:mesh:acme.alice", bob: "did:mesh:bob", carol: "did:mesh:research.lab:carol-1" }
const endpoints = { alice: "https://alice.example/agent", bob: "http://127.0.0.1:7002", carol: undefined }

const program = Effect.gen(function* () {
  const keys = yield* Keys
  const ids: Record<string, ReturnType<typeof identityFromKey>> = {}
  const identities = []
  for (const name of ["alice", "bob", "carol"] as const) {
    const key = yield* keys.importPrivateKey(fromHex(seeds[name]))
    const did = yield* parseDid(dids[name])
    const id = identityFromKey(did, key, endpoints[name])
    ids[name] = id
    identities.push({
      name,
      seedHex: seeds[name],
      pkcs8Hex: toHex(key.toPkcs8()),
      did,
      baseAddress: endpoints[name] ?? null,
      publicKeyHex: toHex(key.publicKey),
      publicKeyB64: id.publicKey,
      publicKeyMultibase: id.document.verificationMethod[0].publicKeyMultibase,
      didKey: id.didKey,
      didHash: didHash(did),
      document: id.document
    })
  }
  const alice = ids.alice!
  const bob = ids.bob!

  const proofs = []
  for (const message of [{ hello: "world" }, { "@context": ["https://www.w3.org/ns/credentials/v2"], n: 1, list: [true, null, 1.5], nested: { b: 2, a: "é" } }]) {
    const signed = yield* signMessage(message, alice.privateKey, verificationMethodId(alice.did), { created: "2026-01-01T00:00:00Z" })
    proofs.push({ signer: "alice", message, signed })
  }

  const t0 = Date.UTC(2026, 0, 1, 12, 0, 0)
  const iso = (ms: number) => new Date(ms).toISOString()
  const makeEnvelope = (fields: Record<string, unknown>, signer = alice) =>
    Effect.gen(function* () {
      const unsecured = {
        type: "MeshRequest",
        id: "urn:uuid:00000000-0000-4000-8000-000000000001",
        from: alice.did,
        to: bob.did,
        correlationId: "00000000-0000-4000-8000-0000000000c1",
        nonce: "AAECAwQFBgcICQoLDA0ODw",
        createdAt: iso(t0),
        expiresAt: iso(t0 + 300_000),
        body: { capability: "summarize", params: { text: "hello" } },
        ...fields
      }
      const proof = yield* createProof(keys, signer.privateKey, {
        type: "DataIntegrityProof",
        cryptosuite: CRYPTOSUITE,
        created: unsecured.createdAt as string,
        verificationMethod: verificationMethodId(String(unsecured.from)),
        proofPurpose: "assertionMethod"
      }, unsecured)
      return { ...unsecured, proof }
    })

  const valid = yield* makeEnvelope({})
  const { nonce: _n, ...missingNonce } = valid
  const envelopes = [
    { name: "valid request", envelope: valid, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: null },
    { name: "valid at the end of the tolerance window", envelope: valid, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 300_000 + DEFAULT_CLOCK_TOLERANCE_MS - 1, expect: null },
    { name: "replayed", envelope: valid, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, validateTwice: true, expect: "REPLAYED" },
    { name: "missing nonce", envelope: missingNonce, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "MALFORMED" },
    { name: "extra top-level field", envelope: { ...valid, extra: 1 }, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "MALFORMED" },
    { name: "proof by another key than from#key-1", envelope: yield* makeEnvelope({ from: ids.carol!.did }, alice).pipe(Effect.map((e) => ({ ...e, proof: { ...e.proof, verificationMethod: verificationMethodId(alice.did) } }))), recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "MALFORMED" },
    { name: "wrong recipient", envelope: valid, recipient: ids.carol!.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "WRONG_RECIPIENT" },
    { name: "expired", envelope: valid, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 300_000 + DEFAULT_CLOCK_TOLERANCE_MS, expect: "EXPIRED" },
    { name: "not yet valid", envelope: valid, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 - DEFAULT_CLOCK_TOLERANCE_MS - 1, expect: "NOT_YET_VALID" },
    { name: "lifetime over a day", envelope: yield* makeEnvelope({ expiresAt: iso(t0 + 86_400_001) }), recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "TTL_TOO_LONG" },
    { name: "tampered body", envelope: { ...valid, body: { capability: "summarize", params: { text: "hellO" } } }, recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "SIGNATURE_INVALID" },
    { name: "signed by someone else", envelope: yield* makeEnvelope({}, bob), recipient: bob.did, senderPublicKeyB64: alice.publicKey, nowMs: t0 + 1000, expect: "SIGNATURE_INVALID" },
    { name: "verified under the wrong key", envelope: valid, recipient: bob.did, senderPublicKeyB64: bob.publicKey, nowMs: t0 + 1000, expect: "SIGNATURE_INVALID" }
  ]
  return { identities, proofs, envelopes }
})

const out = Effect.runSync(Effect.provide(program, Keys.noble))
fs.writeFileSync("test/vectors/identities.json", JSON.stringify({ note: "Generated by scripts/gen-vectors.ts from fixed seeds.", identities: out.identities, proofs: out.proofs }, null, 2) + "\n")
fs.writeFileSync("test/vectors/envelopes.json", JSON.stringify({ note: "Generated by scripts/gen-vectors.ts; validate each envelope for `recipient` at `nowMs` with the default options and a fresh nonce store; `expect` is the EnvelopeError code, null for valid.", envelopes: out.envelopes }, null, 2) + "\n")
console.log(`identities: ${out.identities.length}, proofs: ${out.proofs.length}, envelopes: ${out.envelopes.length}`)
