#!/usr/bin/env node
/**
 * The first module `mesh` runs (bundled as dist/bin/mesh.js): `mesh --version` is answered from a constant, so it costs
 * little more than starting node; every other invocation loads the command (`mesh.ts`), whose subcommands in turn load
 * only what they use.
 *
 * Floor: bin, the top (docs/architecture.md §3).
 */
import { VERSION } from "../core/Version.js"

const args = process.argv.slice(2)
if (args.length === 1 && args[0] === "--version") {
  process.stdout.write(`${VERSION}\n`)
} else {
  const { main } = await import("./mesh.js")
  main()
}
