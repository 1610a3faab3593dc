import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "../support/bin.js"
import { get, post } from "./support.js"

/** Runs `mesh agent <args>` as its own process; resolves with its URL once it listens, or with its output if it exits. */
const spawnAgent = (args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.async<{ readonly proc: ChildProcess; readonly url: string | undefined; readonly out: string }>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), "agent", ...args], { stdio: ["ignore", "pipe", "pipe"] })
      let out = ""
      let done = false
      const finish = (url: string | undefined) => {
        if (done) return
        done = true
        clearTimeout(timer)
        resume(Effect.succeed({ proc, url, out }))
      }
      const timer = setTimeout(() => finish(undefined), 30_000)
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

describe("mesh agent <module>", () => {
  it.live("serves the module's default export; flags override its options; an identity file sets the DID", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-agent-cli-"))
        const identity = path.join(dir, "echo.identity.json")
        const keygen = spawn(process.execPath, [ensureBin(), "keygen", "echo-cli", "--namespace", "example", "--out", identity])
        yield* Effect.async<void>((resume) => void keygen.on("exit", () => resume(Effect.void)))
        const agent = yield* spawnAgent(["examples/echo-agent.ts", "--port", "0", "--db", path.join(dir, "agent.db"), "--identity", identity, "--log-level", "warning"])
        assert.isString(agent.url, agent.out)
        const reply = yield* post(`${agent.url}/v1/run`, { message: "from the command line", sessionId: "cli" })
        assert.deepStrictEqual(reply.body, { message: "echo: from the command line (session cli)", sessionId: "cli" })
        const health = yield* get(`${agent.url}/health`)
        assert.strictEqual(health.body.did, "did:mesh:example.echo-cli")
        assert.strictEqual(health.body.name, "echo")
      })
    ))

  it.live("a module without agent options is refused with MODULE_INVALID", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-agent-cli-"))
        const file = path.join(dir, "nothing.mjs")
        fs.writeFileSync(file, "export default 42\n")
        const agent = yield* spawnAgent([file, "--port", "0"])
        assert.isUndefined(agent.url)
        assert.include(agent.out, "MODULE_INVALID")
      })
    ))
})
