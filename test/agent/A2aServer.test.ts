/* eslint-disable @typescript-eslint/no-explicit-any -- JSON-RPC bodies are read loosely, field by field, in assertions */
/**
 * Every agent server speaks A2A: checked with the official `@a2a-js/sdk` client in its 1.0 mode and in its 0.3
 * compatibility mode (send, stream, get, cancel, subscribe after a dropped stream, the input-required round trip of a
 * human gate, a bearer agent), and with raw requests for what a client SDK never sends (malformed JSON-RPC).
 */
import { type AgentCard, Role, TaskState, verifyAgentCardSignature } from "@a2a-js/sdk"
import { type Client, ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client"
import { assert, describe, it } from "@effect/vitest"
import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import { holderOf } from "../../src/agent/A2aTasks.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { toBase64Url } from "../../src/core/internal/bytes.js"
import { post, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

type Mode = "1.0" | "0.3"
const MODES: ReadonlyArray<Mode> = ["1.0", "0.3"]

/** The SDK's client for an agent: from its card URL (1.0), or over the card's 0.3 interface in compatibility mode. */
const clientFor = (url: string, mode: Mode): Promise<Client> => {
  if (mode === "1.0") return new ClientFactory().createFromUrl(url)
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })] })
  return fetch(`${url}/.well-known/agent-card.json`)
    .then((r) => r.json() as Promise<AgentCard>)
    .then((card) => factory.createFromAgentCard({ ...card, supportedInterfaces: card.supportedInterfaces.filter((i) => i.protocolVersion === "0.3") }))
}

const client = (url: string, mode: Mode) =>
  Effect.promise(async () => {
    const c = await clientFor(url, mode)
    assert.strictEqual(c.protocolVersion, mode)
    return c
  })

const textPart = (value: string) => ({ content: { $case: "text" as const, value }, metadata: undefined, filename: "", mediaType: "" })
const dataPart = (value: unknown) => ({ content: { $case: "data" as const, value }, metadata: undefined, filename: "", mediaType: "" })

/** A `SendMessageRequest` of the SDK with one user message. */
const request = (parts: ReadonlyArray<ReturnType<typeof textPart> | ReturnType<typeof dataPart>>, o: { taskId?: string; contextId?: string; metadata?: Record<string, unknown>; returnImmediately?: boolean } = {}) => ({
  tenant: "",
  message: {
    messageId: crypto.randomUUID(),
    contextId: o.contextId ?? "",
    taskId: o.taskId ?? "",
    role: Role.ROLE_USER,
    parts: [...parts],
    metadata: o.metadata,
    extensions: [],
    referenceTaskIds: []
  },
  configuration: o.returnImmediately === true ? { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true } : undefined,
  metadata: undefined
})

const asTask = (r: unknown): any => {
  assert.isTrue(typeof r === "object" && r !== null && "status" in r, `a task, not ${JSON.stringify(r)}`)
  return r
}

const artifactText = (task: any): string =>
  (task.artifacts ?? []).flatMap((a: any) => a.parts).map((p: any) => (p.content?.$case === "text" ? p.content.value : "")).join("")

/** A latch a handler waits on and a test opens. */
const latch = () => {
  let open!: () => void
  const opened = new Promise<void>((r) => (open = r))
  return { open, opened }
}

const echo: AgentServer.AgentServerOptions = {
  name: "echo",
  database: ":memory:",
  capabilities: ["echo"],
  handler: async function* ({ message }) {
    yield "you said: "
    yield message
  }
}

/** The members of the card on the wire that these tests read (the SDK's `AgentCard` type is its protobuf form). */
interface CardJson {
  readonly supportedInterfaces: ReadonlyArray<{ readonly url: string; readonly protocolBinding: string; readonly protocolVersion: string }>
  readonly skills: ReadonlyArray<{ readonly id: string }>
  readonly securitySchemes: Readonly<Record<string, { readonly httpAuthSecurityScheme?: { readonly scheme: string } }>>
  readonly capabilities: { readonly streaming?: boolean }
}

describe("A2A server", () => {
  it.live("the agent card is A2A 1.0: both JSON-RPC interfaces, skills from the capabilities, and a signature the SDK verifies", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ ...echo, auth: "bearer", bearerTokens: ["t0k3n"] })
        const res = yield* Effect.promise(() => fetch(`${agent.url}/.well-known/agent-card.json`))
        assert.strictEqual(res.status, 200)
        const raw: unknown = yield* Effect.promise(() => res.json())
        const card = raw as CardJson
        assert.deepStrictEqual(card.supportedInterfaces, [
          { url: `${agent.url}/`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
          { url: `${agent.url}/`, protocolBinding: "JSONRPC", protocolVersion: "0.3" }
        ])
        assert.deepStrictEqual(card.skills.map((s) => s.id), ["echo"])
        assert.deepStrictEqual(Object.keys(card.securitySchemes), ["bearer"])
        assert.strictEqual(card.securitySchemes.bearer?.httpAuthSecurityScheme?.scheme, "Bearer")
        assert.isTrue(card.capabilities.streaming)
        const jwk = { kty: "OKP", crv: "Ed25519", x: toBase64Url(Buffer.from(agent.publicKeyB64, "base64")) }
        const verify = verifyAgentCardSignature(async (kid) => {
          assert.strictEqual(kid, `${agent.did}#key-1`)
          return jwk
        })
        // The SDK takes the card as it came off the wire.
        yield* Effect.promise(() => verify(raw as AgentCard))
        // A card changed after signing no longer verifies.
        const tampered = { ...card, skills: [{ ...card.skills[0], id: "steal" }] } as unknown as AgentCard
        const refused = yield* Effect.promise(() => verify(tampered).then(() => "verified", () => "refused"))
        assert.strictEqual(refused, "refused")
      })
    ))

  for (const mode of MODES) {
    describe(`with the SDK client in ${mode} mode`, () => {
      it.live("send answers a completed task whose artifact is the reply; get finds it again", () =>
        provide(
          Effect.gen(function* () {
            const agent = yield* AgentServer.make(echo)
            const c = yield* client(agent.url, mode)
            const task = asTask(yield* Effect.promise(() => c.sendMessage(request([textPart("hello")]))))
            assert.strictEqual(task.status.state, TaskState.TASK_STATE_COMPLETED)
            assert.strictEqual(artifactText(task), "you said: hello")
            assert.isString(task.contextId)
            const again = yield* Effect.promise(() => c.getTask({ tenant: "", id: task.id, historyLength: undefined }))
            assert.strictEqual(again.status?.state, TaskState.TASK_STATE_COMPLETED)
            assert.strictEqual(artifactText(again), "you said: hello")
            assert.deepStrictEqual(again.history.map((m) => m.role), [Role.ROLE_USER])
            const missing = yield* Effect.promise(() => c.getTask({ tenant: "", id: "no-such-task", historyLength: undefined }).then(() => undefined, (e: any) => e))
            assert.strictEqual(missing?.name, "TaskNotFoundError")
          })
        ))

      it.live("stream sends the task, the reply chunk by chunk, and the completed status", () =>
        provide(
          Effect.gen(function* () {
            const agent = yield* AgentServer.make(echo)
            const c = yield* client(agent.url, mode)
            const events = yield* Effect.promise(async () => {
              const out: Array<any> = []
              for await (const e of c.sendMessageStream(request([textPart("streams")]))) out.push(e.payload)
              return out
            })
            assert.strictEqual(events[0]?.$case, "task")
            const chunks = events.filter((e) => e.$case === "artifactUpdate").map((e) => e.value.artifact.parts[0].content.value)
            const last = events[events.length - 1]
            assert.strictEqual(last.$case, "statusUpdate")
            assert.strictEqual(last.value.status.state, TaskState.TASK_STATE_COMPLETED)
            // Chunks the run made before the stream was read come in the first task event's artifact.
            assert.strictEqual(artifactText(events[0].value) + chunks.join(""), "you said: streams")
          })
        ))

      it.live("cancel ends a running task as canceled; a canceled task is not cancelable again", () =>
        provide(
          Effect.gen(function* () {
            const gate = latch()
            const agent = yield* AgentServer.make({
              ...echo,
              handler: async function* () {
                yield "working"
                await gate.opened
                yield "never"
              }
            })
            const c = yield* client(agent.url, mode)
            const started = asTask(yield* Effect.promise(() => c.sendMessage(request([textPart("long job")], { returnImmediately: true }))))
            assert.strictEqual(started.status.state, TaskState.TASK_STATE_WORKING)
            const canceled = yield* Effect.promise(() => c.cancelTask({ tenant: "", id: started.id, metadata: undefined }))
            assert.strictEqual(canceled.status?.state, TaskState.TASK_STATE_CANCELED)
            gate.open()
            const got = yield* Effect.promise(() => c.getTask({ tenant: "", id: started.id, historyLength: undefined }))
            assert.strictEqual(got.status?.state, TaskState.TASK_STATE_CANCELED)
            const twice = yield* Effect.promise(() => c.cancelTask({ tenant: "", id: started.id, metadata: undefined }).then(() => undefined, (e: any) => e))
            assert.strictEqual(twice?.name, "TaskNotCancelableError")
          })
        ))

      it.live("a client whose stream dropped subscribes again and receives the rest of the task", () =>
        provide(
          Effect.gen(function* () {
            const gate = latch()
            const agent = yield* AgentServer.make({
              ...echo,
              handler: async function* () {
                yield "one,"
                await gate.opened
                yield "two"
              }
            })
            const c = yield* client(agent.url, mode)
            const controller = new AbortController()
            const first = yield* Effect.promise(async () => {
              const seen: Array<any> = []
              try {
                for await (const e of c.sendMessageStream(request([textPart("go")]), { signal: controller.signal })) {
                  seen.push(e.payload)
                  const text = seen.map((p) => (p.$case === "task" ? artifactText(p.value) : p.$case === "artifactUpdate" ? p.value.artifact.parts[0].content.value : "")).join("")
                  if (text === "one,") controller.abort()
                }
              } catch (e) {
                if (!controller.signal.aborted) throw e
              }
              return seen
            })
            const taskId: string = first[0].value.id
            const rest = yield* Effect.promise(async () => {
              const out: Array<any> = []
              for await (const e of c.resubscribeTask({ tenant: "", id: taskId })) {
                out.push(e.payload)
                // The snapshot came first: only now may the run go on, so the rest is seen live.
                if (out.length === 1) gate.open()
              }
              return out
            })
            assert.strictEqual(rest[0].$case, "task")
            assert.strictEqual(artifactText(rest[0].value), "one,")
            const more = rest.filter((e) => e.$case === "artifactUpdate").map((e) => e.value.artifact.parts[0].content.value)
            assert.deepStrictEqual(more, ["two"])
            assert.strictEqual(rest[rest.length - 1].value.status.state, TaskState.TASK_STATE_COMPLETED)
            const done = yield* Effect.promise(() => c.getTask({ tenant: "", id: taskId, historyLength: undefined }))
            assert.strictEqual(artifactText(done), "one,two")
            const late = yield* Effect.promise(async () => {
              try {
                for await (const _ of c.resubscribeTask({ tenant: "", id: taskId })) return "streamed"
                return "empty"
              } catch (e: any) {
                return e.name === "UnsupportedOperationError" || String(e.cause?.name) === "UnsupportedOperationError" ? "refused" : String(e)
              }
            })
            assert.strictEqual(late, "refused")
          })
        ))

      it.live("a human gate is input-required; the grantor's approval, sent on the task, completes it", () =>
        provide(
          Effect.gen(function* () {
            const user = yield* generateDid("user")
            const assistant = yield* generateDid("assistant")
            const sent: Array<string> = []
            const agent = yield* AgentServer.make({
              name: "assistant",
              did: assistant.did,
              privateKey: assistant.privateKey,
              database: ":memory:",
              resolveCallerKey: (did) => (did === user.did ? user.publicKey : did === assistant.did ? assistant.publicKey : null),
              handler: async function* ({ guard, message }) {
                await guard("send_email", { description: `send ${message}` })
                sent.push(message)
                yield "sent"
              }
            })
            const mandate = (yield* issueTaskMandate({
              grantorDid: user.did,
              granteeDid: assistant.did,
              privateKey: user.privateKey,
              constraints: { allowed: ["send_email"], humanGates: ["send_email"], maxDelegationDepth: 0 }
            })).token
            const c = yield* client(agent.url, mode)
            const paused = asTask(yield* Effect.promise(() => c.sendMessage(request([textPart("lunch?")], { metadata: { mandate } }))))
            assert.strictEqual(paused.status.state, TaskState.TASK_STATE_INPUT_REQUIRED)
            assert.deepStrictEqual(sent, [])
            const asked = paused.status.message.parts.find((p: any) => p.content?.$case === "data").content.value.approvalRequired
            assert.strictEqual(asked.capability, "send_email")
            assert.strictEqual(asked.grantor, user.did)
            // A message without the approval is refused and leaves the task waiting.
            const bare = yield* Effect.promise(() => c.sendMessage(request([textPart("please")], { taskId: paused.id })).then(() => undefined, (e: any) => e))
            assert.strictEqual(bare?.name, "RequestMalformedError")
            const approval = yield* signApproval({ taskId: asked.taskId, capability: "send_email" }, user.did, user.privateKey)
            const done = asTask(yield* Effect.promise(() => c.sendMessage(request([dataPart({ approval })], { taskId: paused.id, contextId: paused.contextId }))))
            assert.strictEqual(done.id, paused.id)
            assert.strictEqual(done.status.state, TaskState.TASK_STATE_COMPLETED)
            assert.strictEqual(artifactText(done), "sent")
            assert.deepStrictEqual(sent, ["lunch?"])
            const over = yield* Effect.promise(() => c.sendMessage(request([dataPart({ approval })], { taskId: paused.id })).then(() => undefined, (e: any) => e))
            assert.strictEqual(over?.name, "UnsupportedOperationError")
          })
        ))

      it.live("a bearer agent refuses a call without its token and answers one with it", () =>
        provide(
          Effect.gen(function* () {
            const agent = yield* AgentServer.make({ ...echo, auth: "bearer", bearerTokens: ["t0k3n"] })
            const c = yield* client(agent.url, mode)
            const refused = yield* Effect.promise(() => c.sendMessage(request([textPart("hi")])).then(() => "answered", (e: any) => String(e.message)))
            assert.include(refused, "401")
            const wrong = yield* Effect.promise(() =>
              c.sendMessage(request([textPart("hi")]), { serviceParameters: { Authorization: "Bearer nope" } }).then(() => "answered", (e: any) => String(e.message))
            )
            assert.include(wrong, "401")
            const task = asTask(yield* Effect.promise(() => c.sendMessage(request([textPart("hi")]), { serviceParameters: { Authorization: "Bearer t0k3n" } })))
            assert.strictEqual(artifactText(task), "you said: hi")
          })
        ))
    })
  }

  it.live("a handler failure ends the task failed with the mesh's code; a guarded action without a mandate is rejected", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          ...echo,
          handler: async ({ guard, message }) => {
            if (message === "boom") throw new Error("secret detail")
            await guard("pay")
            return "paid"
          }
        })
        const c = yield* client(agent.url, "1.0")
        const failed = asTask(yield* Effect.promise(() => c.sendMessage(request([textPart("boom")]))))
        assert.strictEqual(failed.status.state, TaskState.TASK_STATE_FAILED)
        assert.strictEqual(failed.status.message.metadata.code, "HANDLER_FAILED")
        assert.notInclude(JSON.stringify(failed), "secret detail")
        const rejected = asTask(yield* Effect.promise(() => c.sendMessage(request([textPart("pay")]))))
        assert.strictEqual(rejected.status.state, TaskState.TASK_STATE_REJECTED)
        assert.strictEqual(rejected.status.message.metadata.code, "MANDATE_REQUIRED")
      })
    ))

  it.live("malformed JSON-RPC is answered with JSON-RPC errors and their standard codes, never a 500", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ ...echo, maxBodyBytes: 4096 })
        const rpc = (body: unknown, headers: Record<string, string> = {}) => post(`${agent.url}/`, body, headers)
        const send = { jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "x" }] } } }
        const cases: ReadonlyArray<readonly [string, unknown, number, number, Record<string, string>?]> = [
          ["parse error", "{not json", 200, -32700],
          ["not JSON-RPC", { hello: "world" }, 200, -32600],
          ["a batch", [send], 200, -32600],
          ["no id", { jsonrpc: "2.0", method: "GetTask", params: { id: "x" } }, 200, -32600],
          ["unknown method", { jsonrpc: "2.0", id: 2, method: "tasks/explode", params: {} }, 200, -32601],
          ["params not an object", { jsonrpc: "2.0", id: 3, method: "SendMessage", params: [1] }, 200, -32602],
          ["no message", { jsonrpc: "2.0", id: 4, method: "SendMessage", params: {} }, 200, -32602],
          ["an agent's role", { ...send, params: { message: { ...send.params.message, role: "ROLE_AGENT" } } }, 200, -32602],
          ["an unknown task", { jsonrpc: "2.0", id: 5, method: "GetTask", params: { id: "nope" } }, 200, -32001],
          ["push notifications", { jsonrpc: "2.0", id: 6, method: "CreateTaskPushNotificationConfig", params: {} }, 200, -32003],
          ["an unknown version", send, 200, -32009, { "a2a-version": "7.1" }],
          ["not JSON at all", "text", 200, -32005, { "content-type": "text/plain" }],
          ["oversized", { ...send, params: { message: { ...send.params.message, parts: [{ text: "x".repeat(10_000) }] } } }, 200, -32600]
        ]
        for (const [what, body, status, code, headers] of cases) {
          const r = yield* rpc(body, headers)
          assert.strictEqual(r.status, status, `${what}: ${JSON.stringify(r.body)}`)
          assert.strictEqual(r.body.jsonrpc, "2.0", what)
          assert.strictEqual(r.body.error?.code, code, `${what}: ${JSON.stringify(r.body)}`)
          assert.isString(r.body.error.data?.correlationId, what)
          if (what === "oversized") assert.strictEqual(r.body.error.data.code, "PAYLOAD_TOO_LARGE")
        }
        const ok = yield* rpc(send, { "a2a-version": "1.0" })
        assert.strictEqual(ok.body.id, 1)
        assert.strictEqual(ok.headers.get("a2a-version"), "1.0")
        assert.strictEqual(ok.body.result.task.status.state, "TASK_STATE_COMPLETED")
        const legacy = yield* rpc({ jsonrpc: "2.0", id: "L", method: "message/send", params: { message: { kind: "message", messageId: "m2", role: "user", parts: [{ kind: "text", text: "old" }] } } })
        assert.strictEqual(legacy.body.result.kind, "task")
        assert.strictEqual(legacy.body.result.status.state, "completed")
        assert.strictEqual(legacy.body.result.artifacts[0].parts[0].text, "you said: old")
      })
    ))

  for (const where of ["memory", "its database file"] as const) {
    it.live(`kept A2A tasks are bounded by bytes, per caller and in all: big messages let the caller's own old tasks go, and a background task past the bound is AGENT_BUSY (${where})`, () =>
      provide(
        Effect.gen(function* () {
          const release: Array<() => void> = []
          const agent = yield* AgentServer.make({
            ...echo,
            database: where === "memory" ? ":memory:" : tempDatabase(),
            auth: "bearer",
            bearerTokens: ["a", "b"],
            maxA2aTaskBytes: 400_000,
            maxA2aTaskBytesPerCaller: 150_000,
            handler: ({ message }) => (message.startsWith("wait") ? new Promise<string>((r) => void release.push(() => r("done"))) : "ok")
          })
          const part = "p".repeat(40_000)
          const send = (token: string, n: number, configuration: Record<string, unknown> = {}) =>
            post(`${agent.url}/`, { jsonrpc: "2.0", id: n, method: "SendMessage", params: { message: { messageId: `m${n}`, role: "ROLE_USER", parts: [{ text: part }] }, configuration } }, {
              authorization: `Bearer ${token}`
            })
          const getTask = (token: string, id: string) => post(`${agent.url}/`, { jsonrpc: "2.0", id: "g", method: "GetTask", params: { id } }, { authorization: `Bearer ${token}` })
          // 50 blocking sends of 40 KB by one caller: each answered, but only its latest tasks are kept, within its share.
          const ids: Array<string> = []
          for (let n = 0; n < 50; n++) {
            const r = yield* send("a", n)
            assert.strictEqual(r.status, 200)
            ids.push(String((r.body.result as { readonly task: { readonly id: string } }).task.id))
          }
          assert.isAtMost(agent.stats().a2aTaskBytes, 150_000)
          assert.isAtLeast(agent.stats().a2aTaskBytes, 80_000)
          assert.strictEqual((yield* getTask("a", ids[0]!)).body.error?.data?.code, "TASK_NOT_FOUND")
          assert.isDefined((yield* getTask("a", ids[49]!)).body.result)
          // Background tasks that are still running cannot be let go: past the caller's share a new one is refused.
          const waiting: Array<number> = []
          for (let n = 100; n < 106; n++) {
            const r = yield* post(`${agent.url}/`, { jsonrpc: "2.0", id: n, method: "SendMessage", params: { message: { messageId: `w${n}`, role: "ROLE_USER", parts: [{ text: `wait ${part}` }] }, configuration: { blocking: false } } }, { authorization: "Bearer b" })
            waiting.push(r.body.error === undefined ? 0 : Number(r.body.error.code))
          }
          assert.deepStrictEqual(waiting.slice(0, 3), [0, 0, 0])
          assert.isTrue(waiting.slice(3).every((c) => c !== 0), JSON.stringify(waiting))
          const busy = yield* post(`${agent.url}/`, { jsonrpc: "2.0", id: 200, method: "SendMessage", params: { message: { messageId: "w200", role: "ROLE_USER", parts: [{ text: `wait ${part}` }] }, configuration: { blocking: false } } }, { authorization: "Bearer b" })
          assert.strictEqual(busy.body.error?.data?.code, "AGENT_BUSY")
          assert.isAtMost(agent.stats().a2aTaskBytes, 400_000)
          for (const r of release) r()
        })
      ))
  }

  it.live("on its database file, the tasks of concurrent blocking sends are each committed before their answer, and found by GetTask", () =>
    provide(
      Effect.gen(function* () {
        const database = tempDatabase()
        const agent = yield* AgentServer.make({ ...echo, database })
        const sends = Array.from({ length: 40 }, (_, n) =>
          post(`${agent.url}/`, { jsonrpc: "2.0", id: n, method: "SendMessage", params: { message: { messageId: `m${n}`, role: "ROLE_USER", parts: [{ text: `hi ${n}` }] } } }))
        const answered = yield* Effect.all(sends, { concurrency: "unbounded" })
        const ids = answered.map((r) => String(r.body.result?.task?.id))
        assert.strictEqual(new Set(ids).size, 40)
        // Another connection to the file (as another process would open it) already sees every one of them.
        const db = new BetterSqlite3(database, { readonly: true })
        const kept = db.prepare(`SELECT count(*) AS n FROM mesh_a2a_tasks WHERE task_id IN (${ids.map(() => "?").join(", ")})`).get(...ids) as { n: number }
        db.close()
        assert.strictEqual(kept.n, 40)
        for (const [n, id] of ids.entries()) {
          const got = yield* post(`${agent.url}/`, { jsonrpc: "2.0", id: "g", method: "GetTask", params: { id } })
          assert.strictEqual(got.body.result?.status?.state, "TASK_STATE_COMPLETED")
          assert.strictEqual(got.body.result?.history?.[0]?.parts?.[0]?.text, `hi ${n}`)
        }
      })
    ))

  it("task bytes count against the caller's principal, an anonymous caller's against its address (IPv6 by /64)", () => {
    assert.strictEqual(holderOf({ auth: "bearer", principal: "bearer:abc" }, "10.0.0.1"), "bearer:abc")
    assert.strictEqual(holderOf({ auth: "none", principal: "anonymous" }, "10.0.0.1"), "anonymous:10.0.0.1")
    assert.strictEqual(holderOf({ auth: "none", principal: "anonymous" }, "2001:db8:1:2::5"), holderOf({ auth: "none", principal: "anonymous" }, "2001:db8:1:2::9"))
    assert.notStrictEqual(holderOf({ auth: "none", principal: "anonymous" }, "10.0.0.1"), holderOf({ auth: "none", principal: "anonymous" }, "10.0.0.2"))
  })
})
