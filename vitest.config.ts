import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    // Checks the hub and agent suites' responses against /openapi.json (the file itself says which files).
    setupFiles: ["test/support/conformanceSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
