// @ts-check
import js from "@eslint/js"
import tseslint from "typescript-eslint"

/**
 * The floors of `src/`, lowest first (docs/architecture.md §3). A module may import from its own folder and from
 * the folders before it, never from one after it; `core` imports no `node:*`, HTTP or SQL either. The zones below
 * are derived from this list, so a new folder is checked as soon as it is listed here.
 */
const floors = ["core", "node", "sql", "http", "model", "hub", "agent", "saga", "mesh", "sim", "promise", "cli", "bin"]

/** Import patterns that reach folder `name` from anywhere inside `src/` (relative specifiers only). */
const reaching = (name) => [`./${name}/*`, `../${name}/*`, `../../${name}/*`, `../../../${name}/*`]

const floorZones = floors.map((floor, i) => ({
  files: [`src/${floor}/**/*.ts`],
  rules: {
    "no-restricted-imports": ["error", {
      patterns: [
        ...floors.slice(i + 1).map((above) => ({
          group: reaching(above),
          message: `The ${floor} floor does not import from ${above}, a floor above it (docs/architecture.md §3).`
        })),
        ...(floor === "core"
          ? [
              { group: ["node:*", "fs", "path", "crypto", "http", "https", "net", "os", "url", "module", "child_process"], message: "Core modules import no Node built-ins (docs/architecture.md §3)." },
              { group: ["@effect/sql*", "@effect/platform*", "better-sqlite3"], message: "Core modules import no HTTP or SQL." }
            ]
          : [])
      ]
    }]
  }
}))

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "scratchpad/**", "coverage/**", "bench/results/**", ".ci/cache/**", ".stryker-tmp/**", "reports/**"] },
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
  ...floorZones,
  {
    // Core: no dynamic reach into Node either (`import("node:crypto")`, `createRequire`, `process`).
    files: ["src/core/**/*.ts"],
    rules: {
      "no-restricted-syntax": ["error",
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: "Read time through Effect's Clock." },
        { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: "Read time through Effect's Clock." },
        { selector: "ImportExpression", message: "Core modules import statically, so the floors can be checked." },
        { selector: "Identifier[name='createRequire']", message: "Core modules do not load CommonJS through Node." },
        { selector: "Identifier[name='require']", message: "Core modules do not load CommonJS through Node." }
      ],
      "no-restricted-globals": ["error", { name: "process", message: "Core modules do not read Node's process." }, { name: "Buffer", message: "Core modules use Uint8Array, not Node's Buffer." }]
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
