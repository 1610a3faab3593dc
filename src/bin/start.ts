#!/usr/bin/env node
/**
 * The first module `mesh` runs (bundled as dist/bin/mesh.js): `mesh --version` is answered from a constant, so it costs
 * little more than starting node; every other invocation loads the command (`mesh.ts`), whose subcommands in turn load
 * only what they use.
 *
 * Floor: bin, the top (docs/architecture.md §3).
 */
import * as NodeModule from "node:module"
import { VERSION } from "../core/Version.js"

// Node 22.1 and later keep V8's compiled code of the bundle's chunks between runs (in NODE_COMPILE_CACHE, else the
// system's temporary directory), so a start compiles little of the ~1.5 MB a hub loads; Node 20 has no such cache.
;(NodeModule as { readonly enableCompileCache?: () => unknown }).enableCompileCache?.()

const args = process.argv.slice(2)
if (args.length === 1 && args[0] === "--version") {
  process.stdout.write(`${VERSION}\n`)
} else {
  const { main } = await import("./mesh.js")
  main()
}
