// The benches' TypeScript loader: `node --import ./bench/loader.mjs bench/run.ts`. It compiles each .ts file with
// esbuild as `tsc` would for dist/ (no `keepNames`), so the code measured runs as it ships. tsx keeps function names
// by wrapping every named closure in a call that defines its `name`, which a request path making closures per request
// pays for on every request (about a fifth of an agent run's CPU in process), a cost the built package does not have.
import { register } from "node:module"

register("./loader-hooks.mjs", import.meta.url)
