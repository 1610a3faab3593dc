/**
 * agent-mesh: identities, signed envelopes, mandates, a hub and agent servers for meshes of AI agents, on Effect.
 * Each module is also its own subpath (`agent-mesh/Envelope`, `agent-mesh/http/Serve`, …); the Promise facades are
 * `agent-mesh/Promise` (core), `agent-mesh/MandatePromise` (mandates) and `agent-mesh/AgentPromise` (agents).
 */
export * as AgentApi from "./AgentApi.js"
export * as AgentClient from "./AgentClient.js"
export * as AgentError from "./AgentError.js"
export * as AgentMemory from "./AgentMemory.js"
export * as AgentMemorySql from "./AgentMemorySql.js"
export * as AgentPromise from "./AgentPromise.js"
export * as AgentServer from "./AgentServer.js"
export * as Approval from "./Approval.js"
export * as Canonical from "./Canonical.js"
export * as Constraints from "./Constraints.js"
export * as Database from "./Database.js"
export * as Did from "./Did.js"
export * as Envelope from "./Envelope.js"
export * as Hub from "./Hub.js"
export * as HubApi from "./HubApi.js"
export * as HubError from "./HubError.js"
export * as HttpSignature from "./HttpSignature.js"
export * as KeyResolver from "./KeyResolver.js"
export * as Keys from "./Keys.js"
export * as KeysNative from "./KeysNative.js"
export * as Ledger from "./Ledger.js"
export * as Mandate from "./Mandate.js"
export * as MandatePromise from "./MandatePromise.js"
export * as MeshClient from "./MeshClient.js"
export * as MeshClientPromise from "./MeshClientPromise.js"
export * as MeshPromise from "./Promise.js"
export * as MeshServer from "./MeshServer.js"
export * as MeshServerApi from "./MeshServerApi.js"
export * as MessageClient from "./MessageClient.js"
export * as ModelProvider from "./ModelProvider.js"
export * as ModelProviderOpenAi from "./ModelProviderOpenAi.js"
export * as Money from "./Money.js"
export * as NonceStore from "./NonceStore.js"
export * as NonceStoreSql from "./NonceStoreSql.js"
export * as Platform from "./Platform.js"
export * as Proof from "./Proof.js"
export * as RateLimiter from "./RateLimiter.js"
export * as Registry from "./Registry.js"
export * as RegistryStore from "./RegistryStore.js"
export * as SpendingGuard from "./SpendingGuard.js"
export * as TaskGuard from "./TaskGuard.js"
export * as TaskStore from "./TaskStore.js"
export * as TaskStoreSql from "./TaskStoreSql.js"
export { MESH_PROTOCOL_VERSION, VERSION } from "./Version.js"

export { didHash, extractPublicKey, generateDid, parseDid, type MeshIdentity } from "./Did.js"
export { buildEnvelope, EnvelopeError, newCorrelationId, validateEnvelope } from "./Envelope.js"
export { PrivateKey } from "./Keys.js"
export {
  attenuateModelBudgetMandate,
  attenuateTaskMandate,
  attenuateToCart,
  attenuateToPayment,
  issueIntentMandate,
  issueModelBudgetMandate,
  issueTaskMandate,
  MandateInvalid,
  verifyMandate
} from "./Mandate.js"
export { signMessage, verifyMessage } from "./Proof.js"
