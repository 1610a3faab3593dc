/**
 * Language models above the core: providers that speak HTTP, the catalogue, budgets, the router, the learner and
 * model sessions (the provider tag and the scripted provider are in the core).
 * Floor: model (docs/architecture.md §3).
 */
export * as LearnerRegistry from "./LearnerRegistry.js"
export * as ModelBudget from "./ModelBudget.js"
export * as ModelCatalogue from "./ModelCatalogue.js"
export * as ModelLearner from "./ModelLearner.js"
export * as ModelLearnerSql from "./ModelLearnerSql.js"
export * as ModelProviderAnthropic from "./ModelProviderAnthropic.js"
export * as ModelProviderOpenAi from "./ModelProviderOpenAi.js"
export * as ModelRouter from "./ModelRouter.js"
export * as ModelSession from "./ModelSession.js"
export * as QualityEstimator from "./QualityEstimator.js"
