import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { didHash, generateDid, identityFromKey, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import { signMessage } from "../../src/core/Proof.js"
import { hubOrigin, rotationDocument, WRITE_PROOF_PURPOSE } from "../../src/hub/Registry.js"
import { registeredAgent, registrationBody, request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const check = (r: { status: number; body: Record<string, unknown> }, status: number, code: string, what: string) => {
  assert.strictEqual(r.status, status, `${what}: ${JSON.stringify(r.body)}`)
  assert.strictEqual(r.body.code, code, what)
}

const rotationProof = (did: string, keyVersion: number, publicKeyB64: string, signer: MeshIdentity, hubUrl: string) =>
  Effect.map(
    Effect.orDie(signMessage(rotationDocument({ hub: hubOrigin(hubUrl) ?? hubUrl, did, keyVersion, publicKeyB64 }), signer.privateKey, verificationMethodId(did), { proofPurpose: WRITE_PROOF_PURPOSE })),
    (s) => s.proof
  )

describe("who may write what in the registry", () => {
  it.live("a key from the challenge exchange registers only its own DID, and MCP servers and skills only under it", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const solo = yield* generateDid("solo")
        const { apiKey } = yield* client.requestAgentKey(solo)
        const { cid } = yield* client.pinManifest({ name: "x", meshProtocolVersion: "1.0" })
        // Another DID, even with a valid proof by that DID's key: refused.
        const acme = yield* generateDid("payments", undefined, "acme")
        const foreign = yield* registrationBody({ did: acme.did, manifestCID: cid, publicKeyB64: acme.publicKey, endpointUrl: "http://127.0.0.1:9/acme" }, acme, hub.url)
        check(yield* request(`${hub.url}/v1/agents`, "POST", foreign, apiKey), 403, "NOT_OWNER", "foreign agent")
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "s", did: "did:mesh:acme.payments.skill" }, apiKey), 403, "NOT_OWNER", "foreign skill")
        check(yield* request(`${hub.url}/v1/mcp`, "POST", { name: "m", endpointUrl: "http://127.0.0.1:9/m", tools: [], did: "did:mesh:solox.m" }, apiKey), 403, "NOT_OWNER", "look-alike prefix")
        // Its own DID, and children named under it.
        const own = yield* registrationBody({ did: solo.did, manifestCID: cid, publicKeyB64: solo.publicKey, endpointUrl: "http://127.0.0.1:9/solo" }, solo, hub.url)
        assert.strictEqual((yield* request(`${hub.url}/v1/agents`, "POST", own, apiKey)).status, 201)
        const skill = yield* client.registerSkill({ name: "Mine", did: `${solo.did}.mine`, apiKey })
        assert.strictEqual(skill.did, `${solo.did}.mine`)
      })
    ))

  it.effect("registration needs a fresh proof by the key being registered over exactly the fields sent", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub()
        const { cid } = yield* client.pinManifest({ name: "x", meshProtocolVersion: "1.0" })
        const bob = yield* generateDid("bob")
        const mallory = yield* generateDid("mallory")
        const fields = { did: bob.did, manifestCID: cid, publicKeyB64: bob.publicKey, endpointUrl: "http://127.0.0.1:9/bob" }
        const url = `${hub.url}/v1/agents`
        check(yield* request(url, "POST", fields, adminKey), 400, "INVALID_REQUEST", "no proof")
        // Signed by another key (the admin credential does not stand in for the DID's key).
        check(yield* request(url, "POST", yield* registrationBody(fields, identityFromKey(bob.did, mallory.privateKey), hub.url), adminKey), 401, "SIGNATURE_INVALID", "other key")
        // A field changed after signing.
        const signed = yield* registrationBody(fields, bob, hub.url)
        check(yield* request(url, "POST", { ...signed, endpointUrl: "http://127.0.0.1:9/evil" }, adminKey), 401, "SIGNATURE_INVALID", "tampered")
        // Older than 5 minutes by the hub's clock.
        yield* TestClock.adjust("6 minutes")
        check(yield* request(url, "POST", signed, adminKey), 401, "SIGNATURE_INVALID", "stale")
        assert.strictEqual((yield* request(url, "POST", yield* registrationBody(fields, bob, hub.url), adminKey)).status, 201)
      })
    ))

  it.live("rotation needs proofs by the current and the new key, each usable once; the admin may stand in for a lost current key", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const alice = yield* registeredAgent(client, "alice")
        const h = alice.record.didHash
        const did = alice.identity.did
        const next = identityFromKey(did, (yield* generateDid("alice-2")).privateKey)
        const thief = identityFromKey(did, (yield* generateDid("thief")).privateKey)
        const url = `${hub.url}/v1/agents/${h}/key`
        const newKeyProof = yield* rotationProof(did, 1, next.publicKey, next, hub.url)
        // The owner's bearer key alone is not enough.
        check(yield* request(url, "POST", { publicKeyB64: next.publicKey, newKeyProof }, alice.apiKey), 401, "SIGNATURE_INVALID", "no current-key proof")
        check(yield* request(url, "POST", { publicKeyB64: next.publicKey, newKeyProof, proof: yield* rotationProof(did, 1, next.publicKey, thief, hub.url) }, alice.apiKey), 401, "SIGNATURE_INVALID", "current proof by another key")
        // A new key nobody proved to hold.
        check(
          yield* request(url, "POST", { publicKeyB64: next.publicKey, newKeyProof: yield* rotationProof(did, 1, next.publicKey, thief, hub.url), proof: yield* rotationProof(did, 1, next.publicKey, alice.identity, hub.url) }, alice.apiKey),
          401, "SIGNATURE_INVALID", "new-key proof by another key"
        )
        const body = { publicKeyB64: next.publicKey, newKeyProof, proof: yield* rotationProof(did, 1, next.publicKey, alice.identity, hub.url) }
        const ok = yield* request(url, "POST", body, alice.apiKey)
        assert.strictEqual(ok.status, 200, JSON.stringify(ok.body))
        assert.strictEqual(ok.body.keyVersion, 2)
        // The same signed rotation again: it was for version 1.
        check(yield* request(url, "POST", body, alice.apiKey), 401, "SIGNATURE_INVALID", "replay")
        // The admin, for an owner who lost the current key: only the new key's proof.
        const third = identityFromKey(did, (yield* generateDid("alice-3")).privateKey)
        const byAdmin = yield* client.rotateAgentKey({ newIdentity: third })
        assert.strictEqual(byAdmin.keyVersion, 3)
        assert.strictEqual(byAdmin.publicKeyB64, third.publicKey)
      })
    ))

  it.live("the registry refuses an MCP server or skill without a DID (400); the client generates one", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub()
        check(yield* request(`${hub.url}/v1/mcp`, "POST", { name: "Files", endpointUrl: "http://127.0.0.1:9/mcp", tools: [] }, adminKey), 400, "INVALID_REQUEST", "mcp")
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "Plain" }, adminKey), 400, "INVALID_REQUEST", "skill")
        const skill = yield* client.registerSkill({ name: "Plain" })
        assert.match(skill.did, /^did:mesh:skill\.plain-[0-9a-f]{8}$/)
        assert.strictEqual(skill.didHash, didHash(skill.did as never))
      })
    ))

  it.effect("write quotas per API key: registrations and manifest bytes per window, 429 RATE_LIMITED, refilled on the Clock; the admin is not counted", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub({ writeQuota: { entries: 2, manifestBytes: 300, windowMs: 60_000 } })
        const user = yield* client.createApiKey({ owner: "carol" })
        const skill = (n: number, apiKey: string) => request(`${hub.url}/v1/skills`, "POST", { name: `s${n}`, did: `did:mesh:carol.s${n}` }, apiKey)
        assert.strictEqual((yield* skill(1, user.apiKey)).status, 201)
        assert.strictEqual((yield* skill(2, user.apiKey)).status, 201)
        const limited = yield* skill(3, user.apiKey)
        check(limited, 429, "RATE_LIMITED", "third registration")
        assert.strictEqual(limited.body.retryAfterSeconds, 60)
        assert.strictEqual(limited.headers.get("retry-after"), "60")
        // Another key has its own quota; the admin has none.
        const other = yield* client.createApiKey({ owner: "dave" })
        assert.strictEqual((yield* skill(4, other.apiKey)).status, 201)
        for (let n = 10; n < 15; n++) assert.strictEqual((yield* skill(n, adminKey)).status, 201)
        // Manifest bytes: about 120 bytes each, so the third pin passes 300.
        const pin = (n: number) => request(`${hub.url}/v1/manifests`, "POST", { name: `manifest-${n}`, meshProtocolVersion: "1.0", padding: "x".repeat(60) }, user.apiKey)
        assert.strictEqual((yield* pin(1)).status, 201)
        assert.strictEqual((yield* pin(2)).status, 201)
        check(yield* pin(3), 429, "RATE_LIMITED", "third manifest")
        yield* TestClock.adjust("60 seconds")
        assert.strictEqual((yield* skill(3, user.apiKey)).status, 201)
        assert.strictEqual((yield* pin(3)).status, 201)
      })
    ))

  it.live("a deleted agent leaves a tombstone: only its last key registers the DID again, and the key version continues", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub()
        const alice = yield* registeredAgent(client, "phoenix")
        const next = identityFromKey(alice.identity.did, (yield* generateDid("phoenix-2")).privateKey)
        yield* client.rotateAgentKey({ identity: alice.identity, newIdentity: next, apiKey: alice.apiKey })
        yield* client.deleteAgent(alice.record.didHash, { apiKey: alice.apiKey, identity: next })
        assert.strictEqual((yield* request(`${hub.url}/v1/dids/${alice.identity.did}`, "GET")).status, 404)
        // A newcomer with a fresh key for the same DID (proof included) cannot take it.
        const newcomer = identityFromKey(alice.identity.did, (yield* generateDid("newcomer")).privateKey)
        const admin = yield* MeshClient.make({ hubUrl: hub.url, apiKey: adminKey, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const taken = yield* Effect.flip(admin.registerAgent({ manifest: { name: "phoenix", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/p", identity: newcomer }))
        assert.strictEqual(taken.code, "DID_TAKEN")
        // The last key brings it back at version 3, never 1.
        const back = yield* admin.registerAgent({ manifest: { name: "phoenix", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/p", identity: next })
        assert.strictEqual(back.keyVersion, 3)
        assert.strictEqual((yield* client.resolveDid(alice.identity.did)).keyVersion, 3)
      })
    ))
})
