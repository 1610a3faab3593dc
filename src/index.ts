/**
 * agent-mesh: identities, signed envelopes and replay protection for meshes of AI agents, on Effect.
 * Each module is also its own subpath (`agent-mesh/Envelope`, …); the Promise facade is `agent-mesh/Promise`.
 */
export * as Canonical from "./Canonical.js"
export * as Database from "./Database.js"
export * as Did from "./Did.js"
export * as Envelope from "./Envelope.js"
export * as Keys from "./Keys.js"
export * as KeysNative from "./KeysNative.js"
export * as NonceStore from "./NonceStore.js"
export * as NonceStoreSql from "./NonceStoreSql.js"
export * as Proof from "./Proof.js"
export * as MeshPromise from "./Promise.js"
export { MESH_PROTOCOL_VERSION, VERSION } from "./Version.js"

export { didHash, extractPublicKey, generateDid, parseDid, type MeshIdentity } from "./Did.js"
export { buildEnvelope, EnvelopeError, newCorrelationId, validateEnvelope } from "./Envelope.js"
export { PrivateKey } from "./Keys.js"
export { signMessage, verifyMessage } from "./Proof.js"
