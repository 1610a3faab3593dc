/**
 * Sagas: durable multi-agent transactions with compensation (docs/sagas.md).
 *
 * Floor: saga (docs/architecture.md §3).
 */
export * as Saga from "./Saga.js"
export * as SagaApi from "./SagaApi.js"
export * as SagaClient from "./SagaClient.js"
export * as SagaHttp from "./SagaHttp.js"
export * as SagaHub from "./SagaHub.js"
export * as SagaScheduler from "./SagaScheduler.js"
export * as SagaStore from "./SagaStore.js"
