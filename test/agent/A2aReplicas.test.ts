/* eslint-disable @typescript-eslint/no-explicit-any -- JSON-RPC bodies are read loosely, field by field, in assertions */
/**
 * A2A tasks live in the agent's database (docs/scaling.md): two replicas on one Postgres answer each other's tasks
 * (`GetTask`, `SubscribeToTask` streaming until the task ends on the other, the approval of a task waiting for input,
 * taken exactly once when both are asked), only to the caller that started them, as two `mesh agent` processes and as
 * two servers in one process; and one agent on a SQLite file keeps its tasks across a restart.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe } from "vitest"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { ensureBin } from "../support/bin.js"
import { describePostgres, probeNow } from "../support/postgres.js"
import { post, readSse, tempDatabase } from "./support.js"

await probeNow()

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const V1 = { "a2a-version": "1.0" }

/** A JSON-RPC 1.0 request to the agent at `url`. */
const rpc = (url: string, method: string, params: unknown, headers: Record<string, string> = {}) =>
  post(`${url}/`, { jsonrpc: "2.0", id: 1, method, params }, { ...V1, ...headers })

/** A user message of `parts`. */
const message = (parts: ReadonlyArray<unknown>, o: { readonly taskId?: string; readonly metadata?: Record<string, unknown> } = {}) => ({
  messageId: crypto.randomUUID(),
  role: "ROLE_USER",
  parts,
  ...o
})

const textOf = (task: any): string => (task.artifacts ?? []).flatMap((a: any) => a.parts).map((p: any) => p.text ?? "").join("")

/** A latch a handler waits on and a test opens. */
const latch = () => {
  let open!: () => void
  const opened = new Promise<void>((r) => (open = r))
  return { open, opened }
}

/** An agent whose `send_email` waits for the grantor's approval; what it sent goes to `sent`. */
const gated = (sent: Array<string>) =>
  Effect.gen(function* () {
    const user = yield* generateDid("user")
    const assistant = yield* generateDid("assistant")
    const options: AgentServer.AgentServerOptions = {
      name: "a2a-gated",
      did: assistant.did,
      privateKey: assistant.privateKey,
      resolveCallerKey: (did) => (did === user.did ? user.publicKey : did === assistant.did ? assistant.publicKey : null),
      handler: async function* ({ guard, message }) {
        await guard("send_email", { description: `send ${message}` })
        sent.push(message)
        yield `sent ${message}`
      }
    }
    const mandate = (yield* issueTaskMandate({
      grantorDid: user.did,
      granteeDid: assistant.did,
      privateKey: user.privateKey,
      constraints: { allowed: ["send_email"], humanGates: ["send_email"], maxDelegationDepth: 0 }
    })).token
    /** The grantor's approval of the gate a paused task asks for. */
    const approve = (paused: any) => {
      const asked = paused.status.message.parts.find((p: any) => p.data !== undefined).data.approvalRequired
      return signApproval({ taskId: asked.taskId, capability: "send_email" }, user.did, user.privateKey)
    }
    return { options, mandate, approve }
  })

/** A `mesh agent` process of `module` on the database at `db`; its URL once it listens. Killed when the scope closes. */
const meshAgent = (module: string, db: string) =>
  Effect.gen(function* () {
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
        for (const k of Object.keys(env)) if (k.startsWith("MESH_")) delete env[k]
        return spawn(process.execPath, [ensureBin(), "agent", module, "--port", "0", "--db", db, "--log-level", "warning"], { stdio: ["ignore", "pipe", "pipe"], env })
      }),
      (p) => Effect.sync(() => void p.kill("SIGKILL"))
    )
    return yield* Effect.async<string, Error>((resume) => {
      let out = ""
      const onData = (d: Buffer) => {
        out += d.toString()
        const m = /\n {2}discovery +(http:\/\/\S+)\/\.well-known/.exec(out)
        if (m !== null) {
          proc.stdout!.off("data", onData)
          resume(Effect.succeed(m[1]!))
        }
      }
      proc.stdout!.on("data", onData)
      proc.stderr!.on("data", (d: Buffer) => void (out += d.toString()))
      proc.on("exit", () => resume(Effect.fail(new Error(`mesh agent exited: ${out}`))))
    })
  })

describePostgres("A2A tasks on agent replicas on one Postgres", (url) => {
  it.live("two mesh agent processes: a task streamed on one is read, followed to its end and found finished on the other", () =>
    provide(
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-a2a-replicas-"))
        const go = path.join(dir, "go")
        // The handler waits for a file the test writes once the other replica follows the task.
        const module = path.join(dir, "agent.mjs")
        fs.writeFileSync(module, `import * as fs from "node:fs"
export default {
  name: "a2a-processes",
  handler: async function* () {
    yield "one "
    while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20))
    yield "two"
  }
}
`)
        const [a, b] = yield* Effect.all([meshAgent(module, url()), meshAgent(module, url())], { concurrency: "unbounded" })
        const started = yield* readSse(`${a}/`, { jsonrpc: "2.0", id: 1, method: "SendStreamingMessage", params: { message: message([{ text: "go" }]) } }, V1, (e) => "artifactUpdate" in (e.data.result ?? {}))
        const id: string = started.events[0]!.data.result.task.id
        const got = yield* rpc(b, "GetTask", { id })
        assert.strictEqual(got.body.result?.status.state, "TASK_STATE_WORKING", JSON.stringify(got.body))
        const followed = yield* readSse(`${b}/`, { jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id } }, V1, (_e, all) => {
          if (all.length === 1) fs.writeFileSync(go, "")
          return false
        })
        const results = followed.events.map((e) => e.data.result)
        const streamed = textOf(results[0].task) + results.flatMap((r) => (r.artifactUpdate === undefined ? [] : r.artifactUpdate.artifact.parts.map((p: any) => p.text))).join("")
        assert.strictEqual(streamed, "one two")
        assert.strictEqual(results.at(-1).statusUpdate?.status.state, "TASK_STATE_COMPLETED", JSON.stringify(results))
        const done = yield* rpc(b, "GetTask", { id })
        assert.strictEqual(done.body.result.status.state, "TASK_STATE_COMPLETED")
        assert.strictEqual(textOf(done.body.result), "one two")
      })
    ))

  it.live("a task streamed on one replica is read and followed to its end on the other, only by its caller", () =>
    provide(
      Effect.gen(function* () {
        const gate = latch()
        const options: AgentServer.AgentServerOptions = {
          name: "a2a-replicated",
          auth: "bearer",
          bearerTokens: ["alice-token", "bob-token"],
          database: url(),
          handler: async function* () {
            yield "one "
            await gate.opened
            yield "two"
          }
        }
        const [a, b] = yield* Effect.all([AgentServer.make(options), AgentServer.make(options)])
        const alice = { authorization: "Bearer alice-token" }
        const bob = { authorization: "Bearer bob-token" }
        // Started on A; the stream is dropped after the first chunk (the task runs on).
        const started = yield* readSse(`${a.url}/`, { jsonrpc: "2.0", id: 1, method: "SendStreamingMessage", params: { message: message([{ text: "go" }]) } }, { ...V1, ...alice }, (e) => "artifactUpdate" in (e.data.result ?? {}))
        const id: string = started.events[0]!.data.result.task.id
        const got = yield* rpc(b.url, "GetTask", { id }, alice)
        assert.strictEqual(got.body.result?.status.state, "TASK_STATE_WORKING", JSON.stringify(got.body))
        assert.strictEqual(got.body.result.history[0].parts[0].text, "go")
        // Another caller learns nothing of it, on either replica.
        for (const r of [a, b]) {
          const other = yield* rpc(r.url, "GetTask", { id }, bob)
          assert.strictEqual(other.body.error?.data?.code, "TASK_NOT_FOUND")
          const otherSub = yield* readSse(`${r.url}/`, { jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id } }, { ...V1, ...bob })
          assert.strictEqual(otherSub.body.error?.data?.code, "TASK_NOT_FOUND")
        }
        // Followed on B; the task goes on on A once B has the snapshot.
        const followed = yield* readSse(`${b.url}/`, { jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id } }, { ...V1, ...alice }, (_e, all) => {
          if (all.length === 1) gate.open()
          return false
        })
        const results = followed.events.map((e) => e.data.result)
        assert.strictEqual(results[0].task.id, id)
        const streamed = textOf(results[0].task) + results.flatMap((r) => (r.artifactUpdate === undefined ? [] : r.artifactUpdate.artifact.parts.map((p: any) => p.text))).join("")
        assert.strictEqual(streamed, "one two")
        assert.strictEqual(results.at(-1).statusUpdate?.status.state, "TASK_STATE_COMPLETED", JSON.stringify(results))
        const done = yield* rpc(b.url, "GetTask", { id }, alice)
        assert.strictEqual(done.body.result.status.state, "TASK_STATE_COMPLETED")
        assert.strictEqual(textOf(done.body.result), "one two")
      })
    ))

  it.live("a task waiting for input on one replica is approved on the other; asked on both at once, exactly one resume wins", () =>
    provide(
      Effect.gen(function* () {
        const sent: Array<string> = []
        const { approve, mandate, options } = yield* gated(sent)
        const [a, b] = yield* Effect.all([AgentServer.make({ ...options, database: url() }), AgentServer.make({ ...options, database: url() })])
        const paused = (yield* rpc(a.url, "SendMessage", { message: message([{ text: "lunch?" }], { metadata: { mandate } }) })).body.result.task
        assert.strictEqual(paused.status.state, "TASK_STATE_INPUT_REQUIRED")
        const approval = yield* approve(paused)
        const done = yield* rpc(b.url, "SendMessage", { message: message([{ data: { approval } }], { taskId: paused.id }) })
        assert.strictEqual(done.body.result?.task.status.state, "TASK_STATE_COMPLETED", JSON.stringify(done.body))
        assert.strictEqual(textOf(done.body.result.task), "sent lunch?")
        const seen = yield* rpc(a.url, "GetTask", { id: paused.id })
        assert.strictEqual(seen.body.result.status.state, "TASK_STATE_COMPLETED")
        assert.deepStrictEqual(seen.body.result.history.map((m: any) => m.role), ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"])

        // Paused on B, approved on both at once: one completes it, the other is refused.
        const paused2 = (yield* rpc(b.url, "SendMessage", { message: message([{ text: "dinner?" }], { metadata: { mandate } }) })).body.result.task
        const approval2 = yield* approve(paused2)
        const both = yield* Effect.all(
          [a, b].map((r) => rpc(r.url, "SendMessage", { message: message([{ data: { approval: approval2 } }], { taskId: paused2.id }) })),
          { concurrency: "unbounded" }
        )
        const won = both.filter((r) => r.body.result?.task.status.state === "TASK_STATE_COMPLETED")
        assert.strictEqual(won.length, 1, JSON.stringify(both.map((r) => r.body)))
        const lost = both.find((r) => r.body.error !== undefined)
        assert.include(["TASK_ALREADY_RESUMED", "TASK_NOT_PAUSED"], lost?.body.error.data.code)
        assert.deepStrictEqual(sent, ["lunch?", "dinner?"])
      })
    ))
})

describe("A2A tasks of an agent on a SQLite file", () => {
  it.live("a restart keeps its tasks: a finished one answers GetTask with its history and reply, a waiting one takes its approval", () =>
    provide(
      Effect.gen(function* () {
        const sent: Array<string> = []
        const { approve, mandate, options } = yield* gated(sent)
        const database = tempDatabase()
        const echo = { ...options, database }
        const before = yield* Effect.scoped(
          Effect.gen(function* () {
            const agent = yield* AgentServer.make(echo)
            const paused = (yield* rpc(agent.url, "SendMessage", { message: message([{ text: "lunch?" }], { metadata: { mandate } }) })).body.result.task
            const approval = yield* approve(paused)
            const done = (yield* rpc(agent.url, "SendMessage", { message: message([{ data: { approval } }], { taskId: paused.id }) })).body.result.task
            assert.strictEqual(done.status.state, "TASK_STATE_COMPLETED")
            const waiting = (yield* rpc(agent.url, "SendMessage", { message: message([{ text: "dinner?" }], { metadata: { mandate } }) })).body.result.task
            assert.strictEqual(waiting.status.state, "TASK_STATE_INPUT_REQUIRED")
            return { done: (yield* rpc(agent.url, "GetTask", { id: done.id })).body.result, waiting }
          })
        )
        const agent = yield* AgentServer.make(echo)
        const again = yield* rpc(agent.url, "GetTask", { id: before.done.id })
        assert.deepStrictEqual(again.body.result, before.done)
        assert.strictEqual(textOf(again.body.result), "sent lunch?")
        assert.strictEqual(again.body.result.history.length, 3)
        const approval = yield* approve(before.waiting)
        const resumed = yield* rpc(agent.url, "SendMessage", { message: message([{ data: { approval } }], { taskId: before.waiting.id }) })
        assert.strictEqual(resumed.body.result?.task.status.state, "TASK_STATE_COMPLETED", JSON.stringify(resumed.body))
        assert.deepStrictEqual(sent, ["lunch?", "dinner?"])
      })
    ))
})
