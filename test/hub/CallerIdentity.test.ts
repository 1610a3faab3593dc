/**
 * A caller-only identity: a DID and its key registered without an endpoint. Its key resolves, so it calls mesh-sig
 * agents and grants mandates; calling it is AGENT_NOT_CALLABLE.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { didHash, generateDid } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { request, startHub } from "./support.js"

describe("caller-only identities", () => {
  it.scoped("registered without an endpoint, a caller's signed calls verify; calling it is AGENT_NOT_CALLABLE", () =>
    Effect.gen(function* () {
      const { hub, client } = yield* startHub()
      const alice = yield* generateDid("alice", undefined, "acme")
      const echo = yield* generateDid("echo", undefined, "acme")
      const agent = yield* AgentServer.make({
        name: "echo", did: echo.did, privateKey: echo.privateKey, auth: "mesh-sig", hubUrl: hub.url, database: ":memory:",
        serving: { maxEventLoopLagMs: Infinity }, handler: ({ message, caller }) => `${caller.did}: ${message}`
      })
      yield* client.registerAgent({ manifest: { name: "echo", meshProtocolVersion: "1.0" }, endpointUrl: agent.url, identity: echo })
      const calls = yield* AgentClient.make({ hubUrl: hub.url })
      const before = yield* Effect.flip(calls.call(didHash(echo.did), "hello", { signAs: alice }))
      assert.strictEqual(before.code, "KEY_NOT_FOUND")

      const record = yield* client.registerAgent({ manifest: { name: alice.did, meshProtocolVersion: "1.0" }, identity: alice })
      assert.strictEqual(record.endpointUrl, "")
      assert.strictEqual(record.publicKeyB64, alice.publicKey)
      const resolved = yield* request(`${hub.url}/v1/agents/${didHash(alice.did)}`, "GET")
      assert.strictEqual(resolved.body.endpointUrl, "")

      const reply = yield* calls.call(didHash(echo.did), "hello", { signAs: alice })
      assert.strictEqual("message" in reply ? reply.message : undefined, `${alice.did}: hello`)
      const notCallable = yield* Effect.flip(calls.call(didHash(alice.did), "hello"))
      assert.strictEqual(notCallable.code, "AGENT_NOT_CALLABLE")
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer)))

  it.scoped("a registration proof covers the absence of an endpoint: one added to a caller's signed request is refused", () =>
    Effect.gen(function* () {
      const { hub, client, adminKey } = yield* startHub()
      const alice = yield* generateDid("alice", undefined, "acme")
      // Sign a caller-only registration, then send it with an endpoint slipped in.
      const { cid } = yield* client.pinManifest({ name: alice.did, meshProtocolVersion: "1.0" })
      const { registrationDocument, hubOrigin, WRITE_PROOF_PURPOSE } = yield* Effect.promise(() => import("../../src/hub/RegistryWire.js"))
      const { signMessage } = yield* Effect.promise(() => import("../../src/core/Proof.js"))
      const fields = { did: alice.did, manifestCID: cid, publicKeyB64: alice.publicKey }
      const signed = yield* signMessage(registrationDocument({ ...fields, hub: hubOrigin(hub.url)! }), alice.privateKey, `${alice.did}#key-1`, { proofPurpose: WRITE_PROOF_PURPOSE })
      const forged = yield* request(`${hub.url}/v1/agents`, "POST", { ...fields, endpointUrl: "https://evil.example", proof: signed.proof }, adminKey)
      assert.strictEqual(forged.status, 401)
      assert.strictEqual(forged.body.code, "SIGNATURE_INVALID")
      const honest = yield* request(`${hub.url}/v1/agents`, "POST", { ...fields, proof: signed.proof }, adminKey)
      assert.strictEqual(honest.status, 201, JSON.stringify(honest.body))
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer)))
})
