/**
 * The saga runner's entry in its own hub's registry. Every step's payment mandate is signed by the runner, and the
 * step's agent (and the ledger) verify it by resolving the runner's key on the hub: a runner the hub does not know
 * makes every saga fail at its first step. So a hub with sagas registers its runner's DID and key when it starts, as
 * a caller (no endpoint), and when the DID already holds another key, rotates it to the runner's (the hub acts as its
 * own admin; docs/sagas.md §1).
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type Did, didHash, normalizeDid, verificationMethodId } from "../core/Did.js"
import { toBase64 } from "../core/internal/bytes.js"
import { Keys, type PrivateKeyInput } from "../core/Keys.js"
import { signMessage } from "../core/Proof.js"
import { MESH_PROTOCOL_VERSION } from "../core/Version.js"
import { type Caller, Registry } from "../hub/Registry.js"
import { hubOrigin, registrationDocument, rotationDocument, WRITE_PROOF_PURPOSE } from "../hub/RegistryWire.js"

/** The API key id the runner's record is owned by: no real key, so only an admin credential changes it. */
export const RUNNER_RECORD_OWNER = "hub-saga-runner"

/** What `ensureRegistered` did. */
export type RunnerRecordAction = "registered" | "rotated" | "unchanged"

/**
 * Makes the registry hold the runner's DID with its key: registers it (no endpoint) when absent, rotates it when the
 * DID holds another key, else leaves it. `hubUrl` is the hub's public URL (or its listening URL): the proofs name
 * its origin.
 */
export const ensureRegistered = (runner: { readonly did: string; readonly privateKey: PrivateKeyInput }, hubUrl: string) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const keys = yield* Keys
    const key = yield* keys.importPrivateKey(runner.privateKey)
    const did = (normalizeDid(runner.did) ?? runner.did) as Did
    const hub = hubOrigin(hubUrl) ?? hubUrl
    const ctx = { hub, client: "127.0.0.1" }
    const caller: Caller = { keyId: RUNNER_RECORD_OWNER, owner: did, kind: "admin" }
    const publicKeyB64 = toBase64(key.publicKey)
    const prove = (document: Record<string, unknown>) =>
      Effect.map(signMessage(document, key, verificationMethodId(did), { proofPurpose: WRITE_PROOF_PURPOSE }), (signed) => signed.proof)
    const existing = yield* registry.resolveAgent(didHash(did)).pipe(
      Effect.map(Option.some),
      Effect.catchTag("EntryNotFound", () => Effect.succeedNone)
    )
    if (Option.isNone(existing)) {
      const { cid } = yield* registry.pinManifest(caller, { name: did, meshProtocolVersion: MESH_PROTOCOL_VERSION, role: "saga-runner", capabilities: [] }, ctx)
      const fields = { did, manifestCID: cid, publicKeyB64 }
      yield* registry.registerAgent(caller, { ...fields, proof: yield* prove(registrationDocument({ ...fields, hub })) }, ctx)
      return "registered" as RunnerRecordAction
    }
    if (existing.value.publicKeyB64 === publicKeyB64) return "unchanged" as RunnerRecordAction
    const document = rotationDocument({ hub, did, keyVersion: existing.value.keyVersion, publicKeyB64 })
    yield* registry.rotateAgentKey(caller, existing.value.didHash, { publicKeyB64, newKeyProof: yield* prove(document) }, ctx)
    return "rotated" as RunnerRecordAction
  })
