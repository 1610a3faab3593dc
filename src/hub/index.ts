/**
 * The hub: registry, spending ledger, platform challenge exchange, their HTTP contract and handlers, and the typed client.
 * Floor: hub (docs/architecture.md §3).
 */
export * as Hub from "./Hub.js"
export * as HubApi from "./HubApi.js"
export * as HubError from "./HubError.js"
export * as HubHttp from "./HubHttp.js"
export * as HubWeb from "./HubWeb.js"
export * as Ledger from "./Ledger.js"
export * as LedgerWire from "./LedgerWire.js"
export * as MeshClient from "./MeshClient.js"
export * as Platform from "./Platform.js"
export * as RateLimiter from "./RateLimiter.js"
export * as Registry from "./Registry.js"
export * as RegistryWire from "./RegistryWire.js"
export * as LearnerStatsStore from "./LearnerStatsStore.js"
