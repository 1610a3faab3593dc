import { defineConfig } from "vitest/config"

/**
 * The tests the mutation run uses (`npm run mutate`, docs/mutation.md): the protocol core's own suites, without the
 * server and process suites, whose cost would multiply by every mutant and whose reach into the core is covered here.
 */
export default defineConfig({
  test: {
    // A run of one module (scripts/mutate.mjs) names the test files that exercise it in MUTATE_TEST_FILES.
    include: process.env["MUTATE_TEST_FILES"]?.split(",") ?? [
      "test/Money.test.ts",
      "test/Constraints*.test.ts",
      "test/Mandate*.test.ts",
      "test/SpendingGuard.test.ts",
      "test/TaskGuard.test.ts",
      "test/Envelope*.test.ts",
      "test/Proof*.test.ts",
      "test/HttpSignature*.test.ts",
      "test/Did.test.ts",
      "test/Approval.test.ts",
      "test/Vectors.test.ts",
      "test/Timestamps.test.ts",
      "test/PublicKeyAcceptance.test.ts",
      "test/ComputeReservations.test.ts",
      "test/NonceStore.test.ts",
      "test/ReviewRegressions.test.ts",
      "test/core/**/*.test.ts"
    ],
    setupFiles: ["test/support/mutateSetup.ts"],
    // Under Stryker (which sets STRYKER_MUTATOR_WORKER in its test processes) nothing is printed: Stryker reads the
    // results from vitest's task state. The default reporter would parse each failure's stack, and vitest 3.2's parser
    // backtracks super-linearly on a long one-line failure without frames (an Effect failing with a mandate's JSON
    // takes minutes), which turned killed mutants into timeouts.
    reporters: process.env["STRYKER_MUTATOR_WORKER"] === undefined ? ["default"] : [{}],
    testTimeout: 30_000
  }
})
