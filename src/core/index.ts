/**
 * The runtime-free core: identities, keys, canonical JSON and proofs, envelopes, mandates and their guards, the store tags with their memory layers. Imports no `node:*`, HTTP or SQL, so it runs on any JavaScript runtime.
 * Floor: core (docs/architecture.md §3).
 */
export * as AgentMemory from "./AgentMemory.js"
export * as Approval from "./Approval.js"
export * as Canonical from "./Canonical.js"
export * as Constraints from "./Constraints.js"
export * as Did from "./Did.js"
export * as Envelope from "./Envelope.js"
export * as HttpSignature from "./HttpSignature.js"
export * as KeyResolver from "./KeyResolver.js"
export * as Keys from "./Keys.js"
export * as Mandate from "./Mandate.js"
export * as MandateCache from "./MandateCache.js"
export * as ModelProvider from "./ModelProvider.js"
export * as Money from "./Money.js"
export * as NonceStore from "./NonceStore.js"
export * as Proof from "./Proof.js"
export * as SpendingGuard from "./SpendingGuard.js"
export * as Sse from "./Sse.js"
export * as TaskGuard from "./TaskGuard.js"
export * as TaskStore from "./TaskStore.js"
export * as Version from "./Version.js"
