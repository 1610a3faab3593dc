/**
 * A `mesh hub` process for tests that run several on one database: started from the built binary, ready once it
 * prints its database line, killed (SIGKILL) when the scope closes.
 */
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { ensureBin } from "./bin.js"

/**
 * Starts `mesh hub` as its own process on `db`; resolves once it prints its URL (and admin key on first start). Its log
 * level is `warning`, or `MESH_TEST_HUB_LOG_LEVEL` when a diagnosis needs more.
 */
export const spawnHub = (db: string, ...args: ReadonlyArray<string>) => spawnHubIn(process.cwd(), db, ...args)

/** `spawnHub` run from the directory `cwd`, where relative paths in `args` are read. */
export const spawnHubIn = (cwd: string, db: string, ...args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.async<{ readonly proc: ChildProcess; readonly url: string; readonly adminKey: string | undefined; readonly out: () => string }, Error>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), "hub", "--db", db, "--port", "0", "--log-level", process.env.MESH_TEST_HUB_LOG_LEVEL ?? "warning", ...args], {
        cwd,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      let done = false
      const timer = setTimeout(() => finish(new Error(`hub did not start: ${out}`)), 30_000)
      const finish = (e?: Error) => {
        if (done) return
        done = true
        clearTimeout(timer)
        if (e) return resume(Effect.fail(e))
        const url = /listening on (http:\/\/\S+)/.exec(out)![1]!
        const admin = /admin credential[^\n]*\n(mk_\S+)/.exec(out)?.[1]
        resume(Effect.succeed({ proc, url, adminKey: admin, out: () => out }))
      }
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString()
        if (/\n {2}database [^\n]*\n/.test(out)) finish()
      })
      proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
      proc.on("exit", (code, signal) => {
        // A hub that dies after starting (not killed by the test) says why, so a failure later in the test is explained.
        if (done && signal !== "SIGKILL") console.error(`hub ${proc.pid} exited with ${code ?? signal} after starting:\n${out}`)
        finish(new Error(`hub exited with ${code}: ${out}`))
      })
    }),
    ({ proc }) => Effect.sync(() => proc.kill("SIGKILL"))
  )

