/**
 * Two identities exchange signed envelopes: alice asks bob for a capability, bob checks the request and answers,
 * alice checks the answer, and a replay of the request is refused.
 *
 *   npm start
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { pathToFileURL } from "node:url"
import { didHash, generateDid } from "../src/core/Did.js"
import { buildEnvelope, MESH_REQUEST, MESH_RESPONSE, validateEnvelope } from "../src/core/Envelope.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeMemory } from "../src/core/NonceStore.js"

/** The whole exchange; returns what happened so a test can check it. */
export const program = Effect.gen(function* () {
  const alice = yield* generateDid("alice", "http://127.0.0.1:7001", "example")
  const bob = yield* generateDid("bob", "http://127.0.0.1:7002", "example")
  yield* Console.log(`alice  ${alice.did}  didHash ${didHash(alice.did)}`)
  yield* Console.log(`bob    ${bob.did}  didHash ${didHash(bob.did)}`)

  const bobNonces = makeMemory()
  const aliceNonces = makeMemory()

  const request = yield* buildEnvelope({
    type: MESH_REQUEST,
    from: alice.did,
    to: bob.did,
    body: { capability: "summarize", params: { text: "Signed envelopes carry an eddsa-jcs-2022 proof." } },
    privateKey: alice.privateKey
  })
  yield* Console.log(`alice → bob  ${request.type} id=${request.id} nonce=${request.nonce} expires=${request.expiresAt}`)

  const received = yield* validateEnvelope(request, alice.publicKeyBytes, bob.did, bobNonces)
  yield* Console.log(`bob    accepted request from ${received.from} (signature by ${received.proof.verificationMethod})`)

  const response = yield* buildEnvelope({
    type: MESH_RESPONSE,
    from: bob.did,
    to: alice.did,
    correlationId: received.correlationId,
    body: { capability: "summarize", result: { summary: "Envelopes are signed." } },
    privateKey: bob.privateKey
  })
  const answer = yield* validateEnvelope(response, bob.publicKey, alice.did, aliceNonces)
  yield* Console.log(`alice  accepted ${answer.type} for correlationId ${answer.correlationId}: ${JSON.stringify(answer.body)}`)

  const replay = yield* Effect.flip(validateEnvelope(request, alice.publicKeyBytes, bob.did, bobNonces))
  yield* Console.log(`bob    refused a replay of the request: ${replay.code}`)

  const tampered = { ...request, body: { ...request.body, capability: "transfer-funds" } }
  const forged = yield* Effect.flip(validateEnvelope(tampered, alice.publicKeyBytes, bob.did, bobNonces))
  yield* Console.log(`bob    refused a tampered request: ${forged.code}`)

  return { request, response, replayCode: replay.code, tamperedCode: forged.code }
}).pipe(Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  Effect.runPromise(program).catch((e: unknown) => {
    console.error(e)
    process.exitCode = 1
  })
}
