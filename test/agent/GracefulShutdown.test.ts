/**
 * SIGTERM to `mesh agent` (a real process): the server stops accepting, a request and a streamed run already in
 * flight finish and are answered, then the process exits cleanly. The handler's work takes 3 s; the test asserts on
 * what the clients receive, never on how long anything took.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "../support/bin.js"

// The handler says on stdout when each run starts, so the test sends SIGTERM only once both are in flight.
const SLOW_AGENT = `
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
export default {
  name: "slow",
  handler: ({ message }) => {
    console.log("started " + message)
    if (message !== "stream") return pause(3000).then(() => "finished " + message)
    return (async function* () {
      for (let i = 1; i <= 3; i++) {
        await pause(1000)
        yield "part " + i + "; "
      }
    })()
  }
}
`

const env = (): NodeJS.ProcessEnv => {
  const e: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
  for (const k of Object.keys(e)) if (k.startsWith("MESH_")) delete e[k]
  return e
}

/** Starts the agent and collects its output; `waitFor` resolves once the output holds a line matching the pattern. */
const startAgent = (args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const proc = spawn(process.execPath, [ensureBin(), "agent", ...args], { stdio: ["ignore", "pipe", "pipe"], env: env() })
      let out = ""
      const waiting = new Set<() => void>()
      const onData = (d: Buffer) => {
        out += d.toString()
        for (const check of [...waiting]) check()
      }
      proc.stdout!.on("data", onData)
      proc.stderr!.on("data", onData)
      const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)))
      const waitFor = (pattern: RegExp) =>
        Effect.async<RegExpExecArray | undefined>((resume) => {
          const check = () => {
            const m = pattern.exec(out)
            if (m) {
              waiting.delete(check)
              resume(Effect.succeed(m))
            }
          }
          waiting.add(check)
          void exited.then(() => {
            if (waiting.delete(check)) resume(Effect.succeed(pattern.exec(out) ?? undefined))
          })
          check()
        })
      return { proc, waitFor, exited, out: () => out }
    }),
    ({ proc }) => Effect.sync(() => void proc.kill("SIGKILL"))
  )

const readAll = (res: Response) => Effect.promise(() => res.text())

describe("graceful shutdown", () => {
  it.live("SIGTERM lets a request and a streamed run started before it finish, then the agent exits", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-shutdown-"))
      const module = path.join(dir, "slow.mjs")
      fs.writeFileSync(module, SLOW_AGENT)
      const agent = yield* startAgent([module, "--port", "0", "--db", ":memory:", "--log-level", "warning"])
      const listening = yield* agent.waitFor(/\n {2}discovery +(http:\/\/\S+)\/\.well-known/)
      assert.isDefined(listening, agent.out())
      const url = listening![1]!

      const call = (message: string, headers: Record<string, string> = {}) =>
        Effect.promise(() => fetch(`${url}/v1/run`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ message, sessionId: "s" }) }))
      const plain = yield* Effect.fork(Effect.flatMap(call("slow"), (res) => Effect.map(readAll(res), (text) => ({ status: res.status, text }))))
      const streamed = yield* Effect.fork(Effect.flatMap(call("stream", { accept: "text/event-stream" }), (res) => Effect.map(readAll(res), (text) => ({ status: res.status, text }))))
      assert.isDefined(yield* agent.waitFor(/started slow/), agent.out())
      assert.isDefined(yield* agent.waitFor(/started stream/), agent.out())

      agent.proc.kill("SIGTERM")
      assert.isDefined(yield* agent.waitFor(/agent stopping/), agent.out())

      const reply = yield* plain
      assert.strictEqual(reply.status, 200)
      assert.deepStrictEqual(JSON.parse(reply.text), { message: "finished slow", sessionId: "s" })
      const stream = yield* streamed
      assert.strictEqual(stream.status, 200)
      assert.include(stream.text, "part 3; ")
      assert.match(stream.text, /event: done/)

      assert.strictEqual(yield* Effect.promise(() => agent.exited), 0)
      assert.include(agent.out(), "agent stopped")
      // Gone: nothing answers at its address.
      const after = yield* Effect.promise(() => fetch(`${url}/health`).then(() => "answered", () => "refused"))
      assert.strictEqual(after, "refused")
    }).pipe(Effect.scoped))

  it.live("with --shutdown-timeout 0 a request in flight is cut off and the agent exits at once", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-shutdown-"))
      const module = path.join(dir, "slow.mjs")
      fs.writeFileSync(module, SLOW_AGENT)
      const agent = yield* startAgent([module, "--port", "0", "--db", ":memory:", "--log-level", "warning", "--shutdown-timeout", "0"])
      const listening = yield* agent.waitFor(/\n {2}discovery +(http:\/\/\S+)\/\.well-known/)
      const url = listening![1]!
      const plain = yield* Effect.fork(
        Effect.promise(() =>
          fetch(`${url}/v1/run`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message: "slow" }) }).then(
            (res) => res.text().then(() => "answered", () => "cut off"),
            () => "cut off"
          )
        )
      )
      assert.isDefined(yield* agent.waitFor(/started slow/), agent.out())
      agent.proc.kill("SIGTERM")
      assert.strictEqual(yield* plain, "cut off")
      assert.strictEqual(yield* Effect.promise(() => agent.exited), 0)
    }).pipe(Effect.scoped))
})
