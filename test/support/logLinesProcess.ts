/**
 * A process that writes numbered lines through the log writer, on stdout (src/cli/LogOutput.ts) and then ends in the way
 * its argument names: `scope` closes the writer's scope and exits; `exit` calls process.exit with the scope open;
 * `crash` throws an uncaught exception with the scope open. Usage: `node --import tsx logLinesProcess.ts <how> <n>`.
 */
import * as Effect from "effect/Effect"
import { fdLines } from "../../src/cli/LogOutput.js"

const how = process.argv[2]
const n = Number(process.argv[3])

// Stdout, so the test reads the lines where it reads the process's output; the writer is the one stderr logs go through.
const written = Effect.flatMap(fdLines(1), (out) =>
  Effect.sync(() => {
    for (let i = 0; i < n; i++) out(`line ${i} ${"x".repeat(60)}`)
  }))

if (how === "scope") {
  void Effect.runPromise(Effect.scoped(written)).then(() => process.exit(0))
} else {
  Effect.runFork(Effect.scoped(Effect.zipRight(written, Effect.sync(() => {
    if (how === "exit") process.exit(0)
    // Before the event loop turns, so the one write under way is still the first line's (as with `exit`).
    process.nextTick(() => {
      throw new Error("crash")
    })
  }).pipe(Effect.zipRight(Effect.never)))))
}
