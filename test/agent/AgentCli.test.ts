import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "../support/bin.js"
import { startFakeAnthropic } from "../support/fakeAnthropic.js"
import { get, post } from "./support.js"

/** Runs `mesh agent <args>` as its own process; resolves with its URL once it listens, or with its output if it exits. */
const spawnAgent = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  Effect.acquireRelease(
    Effect.async<{ readonly proc: ChildProcess; readonly url: string | undefined; readonly out: string }>((resume) => {
      const proc = spawn(process.execPath, [ensureBin(), "agent", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } })
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

  it.live("--provider anthropic --model makes the module an LLM chat agent, with the key from ANTHROPIC_API_KEY", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const fake = yield* startFakeAnthropic({ apiKey: "sk-ant-cli" })
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-agent-cli-"))
        const file = path.join(dir, "llm.mjs")
        fs.writeFileSync(file, 'export default { name: "llm-cli" }\n')
        const agent = yield* spawnAgent([file, "--port", "0", "--db", ":memory:", "--provider", "anthropic", "--model", "claude-cli", "--log-level", "warning"], {
          ANTHROPIC_API_KEY: "sk-ant-cli",
          ANTHROPIC_BASE_URL: fake.url
        })
        assert.isString(agent.url, agent.out)
        const reply = yield* post(`${agent.url}/v1/run`, { message: "hello claude" })
        assert.deepInclude(reply.body, { message: "You said: hello claude" })
        assert.deepInclude(fake.requests[0]?.body, { model: "claude-cli" })
      })
    ))
})
