/**
 * agent-mesh: identities, signed envelopes and mandates for meshes of AI agents, on Effect. The root is the
 * runtime-free core (no `node:*`, HTTP or SQL); each folder is its own subpath: `agent-mesh/node` (node:crypto keys),
 * `agent-mesh/sql`, `agent-mesh/http`, `agent-mesh/model`, `agent-mesh/hub`, `agent-mesh/agent`, `agent-mesh/mesh`,
 * `agent-mesh/promise`; one module by its name (`agent-mesh/Envelope`, `agent-mesh/AgentPromise`, …).
 */
export * from "./core/index.js"
export { didHash, extractPublicKey, generateDid, parseDid, type MeshIdentity } from "./core/Did.js"
export { buildEnvelope, EnvelopeError, newCorrelationId, validateEnvelope } from "./core/Envelope.js"
export { PrivateKey } from "./core/Keys.js"
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
} from "./core/Mandate.js"
export { signMessage, verifyMessage } from "./core/Proof.js"
