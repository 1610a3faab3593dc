/**
 * Promise facades, for callers that do not use Effect.
 * Floor: promise (docs/architecture.md §3).
 */
export * as AgentPromise from "./AgentPromise.js"
export * as MandatePromise from "./MandatePromise.js"
export * as MeshClientPromise from "./MeshClientPromise.js"
export * as MeshPromise from "./Promise.js"
export * as ModelSessionPromise from "./ModelSessionPromise.js"
export * as SagaPromise from "./SagaPromise.js"
