import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { didHash, generateDid, identityFromKey, verificationMethodId } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { signMessage } from "../../src/core/Proof.js"
import { hubOrigin, rotationDocument, WRITE_PROOF_PURPOSE } from "../../src/hub/Registry.js"
import { fromHex, toBase64 } from "../../src/core/internal/bytes.js"
import { NON_CANONICAL_HEX, SMALL_ORDER_HEX } from "../support/weakKeys.js"
import { registeredAgent, registrationBody, request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

// The small-order encodings and the first three non-canonical ones: y = p (≡ 0), p + 1 (≡ 1, the identity), p + 2.
const WEAK_HEX = [...SMALL_ORDER_HEX, ...NON_CANONICAL_HEX.filter((h) => h.endsWith("7f")).slice(0, 3)]
// Each in its padded and its unpadded spelling.
const WEAK = WEAK_HEX.flatMap((h) => {
  const b64 = toBase64(fromHex(h))
  return [b64, b64.replace(/=+$/, "")]
})

const check = (r: { status: number; body: Record<string, unknown> }, status: number, code: string, what: string) => {
  assert.strictEqual(r.status, status, `${what}: ${JSON.stringify(r.body)}`)
  assert.strictEqual(r.body.code, code, what)
}

describe("public keys entering the hub", () => {
  it.live("small-order and non-canonical keys are INVALID_PUBLIC_KEY (422) at registration, rotation and the challenge exchange", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub({ rateLimit: { capacity: 1000, perMinute: 1000 } })
        const { cid } = yield* client.pinManifest({ name: "weak", meshProtocolVersion: "1.0" })
        const owner = yield* registeredAgent(client, "owner")
        const h = owner.record.didHash
        for (const key of WEAK) {
          const reg = { did: "did:mesh:weak", manifestCID: cid, publicKeyB64: key, endpointUrl: "http://127.0.0.1:9/weak", proof: {} }
          check(yield* request(`${hub.url}/v1/agents`, "POST", reg, adminKey), 422, "INVALID_PUBLIC_KEY", `register ${key}`)
          check(yield* request(`${hub.url}/v1/agents/${h}/key`, "POST", { publicKeyB64: key, newKeyProof: {} }, owner.apiKey), 422, "INVALID_PUBLIC_KEY", `rotate ${key}`)
          check(yield* request(`${hub.url}/api/agent-keys/challenge`, "POST", { did: "did:mesh:weak", publicKeyB64: key }), 422, "INVALID_PUBLIC_KEY", `challenge ${key}`)
        }
        // Nothing changed: the owner still has key version 1 and its own key.
        const resolved = yield* client.resolveAgent(h)
        assert.strictEqual(resolved.keyVersion, 1)
        assert.strictEqual(resolved.publicKeyB64, owner.identity.publicKey)
      })
    ))

  it.live("keys are compared as bytes: an unpadded spelling registers, rotates and is challenged as its padded form", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub()
        const { cid } = yield* client.pinManifest({ name: "nopad", meshProtocolVersion: "1.0" })
        const agent = yield* generateDid("nopad")
        const unpadded = agent.publicKey.replace(/=+$/, "")
        assert.notStrictEqual(unpadded, agent.publicKey)
        const body = yield* registrationBody({ did: agent.did, manifestCID: cid, publicKeyB64: unpadded, endpointUrl: "http://127.0.0.1:9/nopad" }, agent, hub.url)
        const reg = yield* request(`${hub.url}/v1/agents`, "POST", body, adminKey)
        assert.strictEqual(reg.status, 201, JSON.stringify(reg.body))
        // Stored and returned in the canonical padded form.
        assert.strictEqual(reg.body.publicKeyB64, agent.publicKey)
        assert.strictEqual((yield* client.resolveAgent(didHash(agent.did))).publicKeyB64, agent.publicKey)
        // Either spelling of the registered key gets a challenge; the challenge names the padded form.
        for (const spelling of [agent.publicKey, unpadded]) {
          const ch = yield* request(`${hub.url}/api/agent-keys/challenge`, "POST", { did: agent.did, publicKeyB64: spelling })
          assert.strictEqual(ch.status, 201, JSON.stringify(ch.body))
          assert.include(String(ch.body.challenge), `publicKey: ${agent.publicKey}\n`)
        }
        // A DID registered with a padded key is challenged with the same key unpadded, and the exchange completes.
        const padded = yield* registeredAgent(client, "padded")
        const viaUnpadded = yield* request(`${hub.url}/api/agent-keys/challenge`, "POST", { did: padded.identity.did, publicKeyB64: padded.identity.publicKey.replace(/=+$/, "") })
        assert.strictEqual(viaUnpadded.status, 201, JSON.stringify(viaUnpadded.body))

        // Rotation to an unpadded spelling stores the padded one.
        const next = identityFromKey(agent.did, (yield* generateDid("nopad-next")).privateKey)
        const nextUnpadded = next.publicKey.replace(/=+$/, "")
        const document = rotationDocument({ hub: hubOrigin(hub.url) ?? hub.url, did: agent.did, keyVersion: 1, publicKeyB64: nextUnpadded })
        const sign = (who: typeof agent) => Effect.map(Effect.orDie(signMessage(document, who.privateKey, verificationMethodId(agent.did), { proofPurpose: WRITE_PROOF_PURPOSE })), (s) => s.proof)
        const rotated = yield* request(
          `${hub.url}/v1/agents/${didHash(agent.did)}/key`,
          "POST",
          { publicKeyB64: nextUnpadded, proof: yield* sign(agent), newKeyProof: yield* sign(next) },
          adminKey
        )
        assert.strictEqual(rotated.status, 200, JSON.stringify(rotated.body))
        assert.strictEqual(rotated.body.publicKeyB64, next.publicKey)
        assert.strictEqual(rotated.body.keyVersion, 2)
      })
    ))
})
