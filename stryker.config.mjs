// Mutation testing of the protocol core (`npm run mutate`, docs/mutation.md). Not part of `npm test`: it takes tens
// of minutes on two cores. Incremental: a rerun tests only the mutants whose code or covering tests changed.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutate.config.ts" },
  plugins: ["@stryker-mutator/vitest-runner"],
  mutate: [
    "src/core/Money.ts",
    "src/core/Constraints.ts",
    "src/core/Mandate.ts",
    "src/core/SpendingGuard.ts",
    "src/core/TaskGuard.ts",
    "src/core/Envelope.ts",
    "src/core/Proof.ts",
    "src/core/HttpSignature.ts",
    "src/core/Did.ts",
    "src/core/Approval.ts"
  ],
  coverageAnalysis: "perTest",
  incremental: true,
  incrementalFile: "reports/mutation/incremental.json",
  reporters: ["clear-text", "progress", "json", "html"],
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  concurrency: 2,
  // Generous: the machines are shared, and a mutant that only ran slowly is not a kill.
  timeoutMS: 20_000,
  timeoutFactor: 3,
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always"
}
