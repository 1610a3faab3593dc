/**
 * Language-model providers that speak HTTP (the provider tag and the scripted provider are in the core).
 * Floor: model (docs/architecture.md §3).
 */
export * as ModelProviderAnthropic from "./ModelProviderAnthropic.js"
export * as ModelProviderOpenAi from "./ModelProviderOpenAi.js"
