/**
 * Running the built `mesh` command as a user does, for tests: a command to its end, or an agent kept running until
 * the test's scope closes. The environment is cleaned of MESH_* settings so the machine's own do not leak in.
 */
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { ensureBin } from "./bin.js"

/** What a finished `mesh` command left. */
export interface Ran {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Plain output and no stray settings from the machine running the tests. */
export const cleanEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
  for (const k of Object.keys(env)) if (k.startsWith("MESH_")) delete env[k]
  return env
}

/** Runs `mesh <args>` to its end without blocking the event loop (a hub under test may be in this process). */
export const runMesh = (args: ReadonlyArray<string>, options: { readonly env?: Record<string, string>; readonly cwd?: string } = {}) =>
  Effect.async<Ran>((resume) => {
    const p = spawn(process.execPath, [ensureBin(), ...args], { cwd: options.cwd ?? process.cwd(), env: { ...cleanEnv(), ...options.env }, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    p.on("close", (status) => resume(Effect.succeed({ status, stdout, stderr })))
  })

/** A running `mesh agent`: its process, its URL (undefined when it exited first) and everything it printed so far. */
export interface RunningMeshAgent {
  readonly proc: ChildProcess
  readonly url: string | undefined
  readonly out: () => string
}

/** Starts `mesh agent <args>`; resolves once it printed its discovery line (or exited). Killed when the scope closes. */
export const startMeshAgent = (args: ReadonlyArray<string>, options: { readonly cwd?: string } = {}) =>
  Effect.acquireRelease(
    Effect.async<RunningMeshAgent>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), "agent", ...args], { cwd: options.cwd ?? process.cwd(), stdio: ["ignore", "pipe", "pipe"], env: cleanEnv() })
      let out = ""
      let done = false
      const finish = (url: string | undefined) => {
        if (done) return
        done = true
        resume(Effect.succeed({ proc, url, out: () => out }))
      }
      proc.stdout!.on("data", (d: Buffer) => {
        out += d.toString()
        const m = /\n {2}discovery +(http:\/\/\S+)\/\.well-known/.exec(out)
        if (m) finish(m[1])
      })
      proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
      proc.on("exit", () => finish(undefined))
    }),
    ({ proc }) => Effect.sync(() => proc.kill("SIGKILL"))
  )
