import { defineConfig } from "vitest/config"

/**
 * The tests the mutation run uses (`npm run mutate`, docs/mutation.md): the protocol core's own suites, without the
 * server and process suites, whose cost would multiply by every mutant and whose reach into the core is covered here.
 */
export default defineConfig({
  test: {
    include: [
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
    testTimeout: 30_000
  }
})
