/**
 * Regression tests of who may write what in the registry: write quotas shared by the keys of one DID and of one
 * address, tombstoned and unowned names refused to MCP servers and skills, proofs bound to the hub they were made
 * for, and updates and deletions signed by the agent's current key (docs/hub.md, "Who may write what").
 */
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { type Did, didHash, generateDid, identityFromKey, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import { signMessage } from "../../src/core/Proof.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { deletionDocument, hubOrigin, updateDocument, WRITE_PROOF_PURPOSE } from "../../src/hub/Registry.js"
import { registeredAgent, registrationBody, request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const check = (r: { status: number; body: Record<string, unknown> }, status: number, code: string | undefined, what: string) => {
  assert.strictEqual(r.status, status, `${what}: ${JSON.stringify(r.body)}`)
  if (code !== undefined) assert.strictEqual(r.body.code, code, what)
}

/** A write proof by `signer` (as `did#key-1`) over `document`. */
const proofOver = (document: Record<string, unknown>, did: string, signer: MeshIdentity) =>
  Effect.map(Effect.orDie(signMessage(document, signer.privateKey, verificationMethodId(did), { proofPurpose: WRITE_PROOF_PURPOSE })), (s) => s.proof)

const manifest = (n: number) => ({ name: `manifest-${n}`, meshProtocolVersion: "1.0", padding: "x".repeat(60) })

describe("registry writes", () => {
  it.live("a new key for the same DID does not reset the write quota, nor does a new key from the same address", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub({
          writeQuota: { entries: 2, manifestBytes: 300, perAddress: { entries: 3, manifestBytes: 10_000 } }
        })
        // Keys from the challenge exchange for one DID share its budget: about 120 bytes a manifest, 300 per window.
        const solo = yield* generateDid("quota-solo")
        const first = yield* client.requestAgentKey(solo)
        const pin = (n: number, apiKey: string) => request(`${hub.url}/v1/manifests`, "POST", manifest(n), apiKey)
        check(yield* pin(1, first.apiKey), 201, undefined, "first pin")
        check(yield* pin(2, first.apiKey), 201, undefined, "second pin")
        check(yield* pin(3, first.apiKey), 429, "RATE_LIMITED", "over the key's bytes")
        const second = yield* client.requestAgentKey(solo)
        assert.notStrictEqual(second.apiKey, first.apiKey)
        const again = yield* pin(3, second.apiKey)
        check(again, 429, "RATE_LIMITED", "a new key of the same DID")
        assert.include(String(again.body.error), solo.did)

        // Keys for different owners from one address share the address's budget (3 entries here).
        const skill = (n: number, apiKey: string) => request(`${hub.url}/v1/skills`, "POST", { name: `s${n}`, did: `did:mesh:quota.s${n}` }, apiKey)
        const carol = yield* client.createApiKey({ owner: "carol" })
        const dave = yield* client.createApiKey({ owner: "dave" })
        check(yield* skill(1, carol.apiKey), 201, undefined, "carol 1")
        check(yield* skill(2, carol.apiKey), 201, undefined, "carol 2")
        check(yield* skill(3, dave.apiKey), 201, undefined, "dave 1")
        const limited = yield* skill(4, dave.apiKey)
        check(limited, 429, "RATE_LIMITED", "dave 2: the address's budget is spent, not dave's")
        assert.include(String(limited.body.error), "address")
        // A refused write charges nothing, and the admin is not counted.
        for (let n = 10; n < 14; n++) check(yield* skill(n, adminKey), 201, undefined, `admin ${n}`)
      })
    ))

  it.live("a deleted agent's DID cannot be taken as an MCP server or skill, and an unregistered parent grants nothing", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const parent = yield* generateDid("acme-tomb")
        const bot = identityFromKey(`${parent.did}.bot` as Did, (yield* generateDid("bot-key")).privateKey)
        const botKey = yield* client.createApiKey({ owner: bot.did })
        const { cid } = yield* client.pinManifest({ name: "bot", meshProtocolVersion: "1.0" })
        yield* client.registerAgent({ manifest: { name: "bot", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/bot", identity: bot, apiKey: botKey.apiKey })
        yield* client.deleteAgent(didHash(bot.did), { apiKey: botKey.apiKey, identity: bot })

        // A key for the unregistered parent, from the challenge exchange: it speaks for no registered agent.
        const { apiKey: parentKey } = yield* client.requestAgentKey(parent)
        const mcp = { name: "grab", endpointUrl: "http://127.0.0.1:9/grab", tools: [], did: bot.did }
        check(yield* request(`${hub.url}/v1/mcp`, "POST", mcp, parentKey), 403, "NOT_OWNER", "mcp under an unregistered parent")
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "grab", did: bot.did }, parentKey), 403, "NOT_OWNER", "skill under an unregistered parent")
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "fresh", did: `${parent.did}.fresh` }, parentKey), 403, "NOT_OWNER", "a fresh name too")
        // A user key may name any DID, but not a tombstoned one.
        const user = yield* client.createApiKey({ owner: "mallory" })
        check(yield* request(`${hub.url}/v1/mcp`, "POST", mcp, user.apiKey), 409, "DID_TAKEN", "mcp over a tombstone")
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "grab", did: bot.did }, user.apiKey), 409, "DID_TAKEN", "skill over a tombstone")
        // The owner still gets its DID back with its last key.
        const back = yield* registrationBody({ did: bot.did, manifestCID: cid, publicKeyB64: bot.publicKey, endpointUrl: "http://127.0.0.1:9/bot-back" }, bot, hub.url)
        const restored = yield* request(`${hub.url}/v1/agents`, "POST", back, botKey.apiKey)
        check(restored, 201, undefined, "owner re-registers")
        assert.strictEqual(restored.body.keyVersion, 2)

        // Once the parent's agent is registered, only the key that registered it names children; a second key for
        // the same DID from the challenge exchange does not.
        const body = yield* registrationBody({ did: parent.did, manifestCID: cid, publicKeyB64: parent.publicKey, endpointUrl: "http://127.0.0.1:9/acme" }, parent, hub.url)
        check(yield* request(`${hub.url}/v1/agents`, "POST", body, parentKey), 201, undefined, "parent registers")
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "mine", did: `${parent.did}.mine` }, parentKey), 201, undefined, "child by the registering key")
        const { apiKey: secondKey } = yield* client.requestAgentKey(parent)
        check(yield* request(`${hub.url}/v1/skills`, "POST", { name: "other", did: `${parent.did}.other` }, secondKey), 403, "NOT_OWNER", "child by another key of the DID")
      })
    ))

  it.live("a registration proof names the hub it is meant for: another hub refuses it", () =>
    provide(
      Effect.gen(function* () {
        const a = yield* startHub()
        const b = yield* startHub()
        const victim = yield* generateDid("replayed")
        const fields = (cid: string) => ({ did: victim.did, manifestCID: cid, publicKeyB64: victim.publicKey, endpointUrl: "http://127.0.0.1:9/v" })
        const m = { name: "replayed", meshProtocolVersion: "1.0" }
        const { cid } = yield* a.client.pinManifest(m)
        yield* b.client.pinManifest(m)
        const captured = yield* registrationBody(fields(cid), victim, a.hub.url)
        check(yield* request(`${a.hub.url}/v1/agents`, "POST", captured, a.adminKey), 201, undefined, "on hub A")
        const replay = yield* request(`${b.hub.url}/v1/agents`, "POST", captured, b.adminKey)
        check(replay, 401, "SIGNATURE_INVALID", "the same body on hub B")
        assert.include(String(replay.body.error), hubOrigin(b.hub.url)!)

        // With publicUrl set, that origin is the one proofs name, not the address the request arrived on.
        const proxied = yield* startHub({ publicUrl: "https://hub.example/mesh" })
        yield* proxied.client.pinManifest(m)
        const forListener = yield* registrationBody(fields(cid), victim, proxied.hub.url)
        check(yield* request(`${proxied.hub.url}/v1/agents`, "POST", forListener, proxied.adminKey), 401, "SIGNATURE_INVALID", "signed for the listener")
        const forPublic = yield* registrationBody(fields(cid), victim, "https://hub.example/mesh")
        check(yield* request(`${proxied.hub.url}/v1/agents`, "POST", forPublic, proxied.adminKey), 201, undefined, "signed for publicUrl")
      })
    ))

  it.live("a write proof is applied once on a hub: a replayed registration or update is refused", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const victim = yield* generateDid("once")
        const ownKey = yield* client.createApiKey({ owner: victim.did })
        const { cid } = yield* client.pinManifest({ name: "once", meshProtocolVersion: "1.0" })
        const captured = yield* registrationBody({ did: victim.did, manifestCID: cid, publicKeyB64: victim.publicKey, endpointUrl: "http://127.0.0.1:9/once" }, victim, hub.url)
        check(yield* request(`${hub.url}/v1/agents`, "POST", captured, ownKey.apiKey), 201, undefined, "registration")
        yield* client.deleteAgent(didHash(victim.did), { apiKey: ownKey.apiKey, identity: victim })
        // Replayed under another key after the deletion (the tombstone's key matches): refused.
        const mallory = yield* client.createApiKey({ owner: "mallory" })
        check(yield* request(`${hub.url}/v1/agents`, "POST", captured, mallory.apiKey), 401, "SIGNATURE_INVALID", "replayed registration")

        const alice = yield* registeredAgent(client, "once-updated")
        const url = `${hub.url}/v1/agents/${alice.record.didHash}`
        const signedPatch = (endpointUrl: string) =>
          Effect.map(proofOver(updateDocument({ hub: hubOrigin(hub.url)!, did: alice.identity.did, keyVersion: 1, endpointUrl }), alice.identity.did, alice.identity), (proof) => ({ endpointUrl, proof }))
        const first = yield* signedPatch("http://127.0.0.1:10/first")
        check(yield* request(url, "PATCH", first, alice.apiKey), 200, undefined, "first update")
        check(yield* request(url, "PATCH", yield* signedPatch("http://127.0.0.1:10/second"), alice.apiKey), 200, undefined, "second update")
        check(yield* request(url, "PATCH", first, alice.apiKey), 401, "SIGNATURE_INVALID", "the first update replayed")
        assert.strictEqual((yield* client.resolveAgent(alice.record.didHash)).endpointUrl, "http://127.0.0.1:10/second")
      })
    ))

  it.live("two identical registrations and two identical updates by MeshClient in one millisecond all apply (each proof is unique); a replayed one is still refused", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const alice = yield* generateDid("twice")
        const key = yield* client.createApiKey({ owner: alice.did })
        const input = { manifest: { name: "twice", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/twice", identity: alice, apiKey: key.apiKey }
        // The client's clock stands still: every proof it makes reads the same millisecond (whole seconds before).
        const now = yield* Clock.currentTimeMillis
        const live = yield* Effect.clock
        const frozen: Clock.Clock = {
          [Clock.ClockTypeId]: Clock.ClockTypeId,
          currentTimeMillis: Effect.succeed(now),
          currentTimeNanos: Effect.succeed(BigInt(now) * 1_000_000n),
          unsafeCurrentTimeMillis: () => now,
          unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
          sleep: (d) => live.sleep(d)
        }
        const writes = Effect.gen(function* () {
          // The same registration twice (a deletion between, the DID's own key registers it again).
          const first = yield* client.registerAgent(input)
          yield* client.deleteAgent(first.didHash, { identity: alice, apiKey: key.apiKey })
          const second = yield* client.registerAgent(input)
          const patch = { endpointUrl: "http://127.0.0.1:9/moved" }
          yield* client.updateAgent(first.didHash, patch, { identity: alice, apiKey: key.apiKey })
          yield* client.updateAgent(first.didHash, patch, { identity: alice, apiKey: key.apiKey })
          return second
        }).pipe(Effect.withClock(frozen))
        const record = yield* writes
        assert.strictEqual((yield* client.resolveAgent(record.didHash)).endpointUrl, "http://127.0.0.1:9/moved")
        // The once-only rule stands: the same signed body sent again is refused.
        const url = `${hub.url}/v1/agents/${record.didHash}`
        const current = yield* client.resolveAgent(record.didHash)
        const doc = updateDocument({ hub: hubOrigin(hub.url)!, did: alice.did, keyVersion: current.keyVersion, endpointUrl: "http://127.0.0.1:9/again" })
        const body = { endpointUrl: "http://127.0.0.1:9/again", proof: yield* proofOver(doc, alice.did, alice) }
        check(yield* request(url, "PATCH", body, key.apiKey), 200, undefined, "the signed update")
        check(yield* request(url, "PATCH", body, key.apiKey), 401, "SIGNATURE_INVALID", "the same update replayed")
      })
    ))

  it.live("updating or deleting an agent needs a proof by its current key; the bearer key alone is refused, the admin is not", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub()
        const alice = yield* registeredAgent(client, "updated")
        const h = alice.record.didHash
        const did = alice.identity.did
        const url = `${hub.url}/v1/agents/${h}`
        const origin = hubOrigin(hub.url)!
        const moved = "http://127.0.0.1:10/moved"
        const update = (endpointUrl: string) => updateDocument({ hub: origin, did, keyVersion: 1, endpointUrl })

        // The stolen bearer key alone changes nothing.
        check(yield* request(url, "PATCH", { endpointUrl: "http://evil.example/" }, alice.apiKey), 401, "SIGNATURE_INVALID", "update without proof")
        check(yield* request(url, "DELETE", undefined, alice.apiKey), 401, "SIGNATURE_INVALID", "delete without proof")
        check(yield* request(url, "DELETE", {}, alice.apiKey), 401, "SIGNATURE_INVALID", "delete with an empty body")
        const thief = identityFromKey(did, (yield* generateDid("thief")).privateKey)
        check(yield* request(url, "PATCH", { endpointUrl: moved, proof: yield* proofOver(update(moved), did, thief) }, alice.apiKey), 401, "SIGNATURE_INVALID", "proof by another key")
        // The proof covers the patch as sent, and names this hub.
        const forMoved = yield* proofOver(update(moved), did, alice.identity)
        check(yield* request(url, "PATCH", { endpointUrl: "http://evil.example/", proof: forMoved }, alice.apiKey), 401, "SIGNATURE_INVALID", "another patch")
        const elsewhere = updateDocument({ hub: "https://other-hub.example", did, keyVersion: 1, endpointUrl: moved })
        check(yield* request(url, "PATCH", { endpointUrl: moved, proof: yield* proofOver(elsewhere, did, alice.identity) }, alice.apiKey), 401, "SIGNATURE_INVALID", "another hub")
        const updated = yield* request(url, "PATCH", { endpointUrl: moved, proof: forMoved }, alice.apiKey)
        check(updated, 200, undefined, "signed update")
        assert.strictEqual(updated.body.endpointUrl, moved)
        // The client signs for the caller.
        const viaClient = yield* client.updateAgent(h, { endpointUrl: "http://127.0.0.1:11/again" }, { apiKey: alice.apiKey, identity: alice.identity })
        assert.strictEqual(viaClient.endpointUrl, "http://127.0.0.1:11/again")

        const deletion = deletionDocument({ hub: origin, did, keyVersion: 1 })
        check(yield* request(url, "DELETE", { proof: yield* proofOver(deletion, did, thief) }, alice.apiKey), 401, "SIGNATURE_INVALID", "deletion by another key")
        check(yield* request(url, "DELETE", { proof: yield* proofOver(deletion, did, alice.identity) }, alice.apiKey), 204, undefined, "signed deletion")
        check(yield* request(url, "GET"), 404, "NOT_FOUND", "deleted")

        // The admin credential stands in for a lost key, with no body at all.
        const bob = yield* registeredAgent(client, "recovered")
        const bobUrl = `${hub.url}/v1/agents/${bob.record.didHash}`
        check(yield* request(bobUrl, "PATCH", { endpointUrl: moved }, adminKey), 200, undefined, "admin update")
        check(yield* request(bobUrl, "DELETE", undefined, adminKey), 204, undefined, "admin delete")
      })
    ))
})
