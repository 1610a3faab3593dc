// @ts-check
import js from "@eslint/js"
import tseslint from "typescript-eslint"

// Core modules must run on any JavaScript runtime: no node:*, no HTTP, no SQL (docs/architecture.md §3).
const coreFiles = [
  "src/Bytes.ts", "src/Canonical.ts", "src/Did.ts", "src/Keys.ts", "src/Proof.ts", "src/Envelope.ts",
  "src/NonceStore.ts", "src/Money.ts", "src/Mandate.ts", "src/Constraints.ts", "src/KeyResolver.ts", "src/Approval.ts",
  "src/HttpSignature.ts", "src/internal/**/*.ts"
]

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "scratchpad/**", "coverage/**", "bench/results/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "no-restricted-properties": ["error", { object: "Math", property: "random", message: "Secrets and ids come from the platform CSPRNG." }],
      "no-restricted-syntax": ["error", { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: "Read time through Effect's Clock." }, { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: "Read time through Effect's Clock." }]
    }
  },
  {
    files: coreFiles,
    rules: {
      "no-restricted-imports": ["error", {
        patterns: [
          { group: ["node:*"], message: "Core modules import no node:* (docs/architecture.md §3)." },
          { group: ["@effect/sql*", "@effect/platform*", "better-sqlite3"], message: "Core modules import no HTTP or SQL." }
        ]
      }]
    }
  },
  {
    files: ["bench/**/*.ts", "scripts/**/*.mjs", "scripts/**/*.ts"],
    rules: { "no-restricted-syntax": "off" }
  },
  {
    files: ["scripts/**/*.mjs", "eslint.config.js"],
    languageOptions: { globals: { process: "readonly", console: "readonly" } }
  }
)
