/* eslint-disable @typescript-eslint/no-explicit-any -- JSON-RPC bodies are read loosely, field by field, in assertions */
/**
 * A2A 1.0 `ListTasks` with the official `@a2a-js/sdk` client: each caller sees only its own tasks (bearer tokens, and
 * two agent replicas on one Postgres), pages are stable and bounded, filters apply; and the points found on the way:
 * Invalid Request echoes a readable id, `historyLength` is checked (0 leaves `history` out), a card with no declared
 * skills still lists one, and a 401 carries `WWW-Authenticate`.
 */
import { TaskState } from "@a2a-js/sdk"
import { type Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from "@a2a-js/sdk/client"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { describePostgres, probeNow } from "../support/postgres.js"
import { post } from "./support.js"

await probeNow()

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const echo: AgentServer.AgentServerOptions = {
  name: "lister",
  database: ":memory:",
  handler: async function* ({ message }) {
    yield `you said: ${message}`
  }
}

/** The SDK's 1.0 client for the agent at `url`, sending `Authorization: Bearer <token>` when given. */
const sdkClient = (url: string, token?: string): Effect.Effect<Client> =>
  Effect.promise(() => {
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers)
      if (token !== undefined) headers.set("authorization", `Bearer ${token}`)
      return fetch(input, { ...init, headers })
    }
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }))
    return factory.createFromUrl(url)
  })

const textPart = (value: string) => ({ content: { $case: "text" as const, value }, metadata: undefined, filename: "", mediaType: "" })
const send = (c: Client, text: string, contextId = "") =>
  Effect.promise(() =>
    c.sendMessage({
      tenant: "",
      message: { messageId: crypto.randomUUID(), contextId, taskId: "", role: 1, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [] },
      configuration: undefined,
      metadata: undefined
    }) as Promise<any>
  )

const listAll = (c: Client, params: Record<string, unknown> = {}) =>
  Effect.promise(() => c.listTasks({ tenant: "", contextId: "", status: 0, pageToken: "", ...params } as any))

const V1 = { "a2a-version": "1.0" }
const rpc = (url: string, method: string, params: unknown, headers: Record<string, string> = {}) => post(`${url}/`, { jsonrpc: "2.0", id: 7, method, params }, { ...V1, ...headers })

describe("A2A ListTasks", () => {
  it.live("two bearer callers each list only their own tasks; pages are keyset-stable and bounded; filters apply", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ ...echo, auth: "bearer", bearerTokens: ["alice-token", "bob-token"] })
        const alice = yield* sdkClient(agent.url, "alice-token")
        const bob = yield* sdkClient(agent.url, "bob-token")
        const mine: Array<string> = []
        for (let i = 0; i < 5; i++) mine.push((yield* send(alice, `a${i}`, i < 2 ? "ctx-one" : "")).id)
        const theirs = (yield* send(bob, "b0")).id

        const all = yield* listAll(alice)
        assert.strictEqual(all.totalSize, 5)
        assert.sameMembers(all.tasks.map((t) => t.id), mine)
        assert.notInclude(all.tasks.map((t) => t.id), theirs)
        assert.strictEqual(all.nextPageToken, "")
        // Artifacts only when asked for.
        assert.deepStrictEqual(all.tasks[0]!.artifacts, [])
        const bobs = yield* listAll(bob)
        assert.deepStrictEqual(bobs.tasks.map((t) => t.id), [theirs])

        // Pages of 2: every task once, newest first, then an empty token.
        const seen: Array<string> = []
        let token = ""
        let pages = 0
        do {
          const page = yield* listAll(alice, { pageSize: 2, pageToken: token })
          assert.isAtMost(page.tasks.length, 2)
          assert.strictEqual(page.totalSize, 5)
          seen.push(...page.tasks.map((t) => t.id))
          token = page.nextPageToken
          pages++
        } while (token !== "" && pages < 10)
        assert.strictEqual(pages, 3)
        assert.deepStrictEqual([...seen].sort(), [...mine].sort())
        assert.deepStrictEqual(seen, all.tasks.map((t) => t.id))

        // Bob's tasks never appear, whatever token he sends: the token moves within his own tasks only.
        const bobPage = yield* Effect.promise(() => bob.listTasks({ tenant: "", contextId: "", status: 0, pageToken: (all as any).nextPageToken || "", pageSize: 2 } as any))
        assert.deepStrictEqual(bobPage.tasks.map((t) => t.id), [theirs])

        const ctx = yield* listAll(alice, { contextId: "ctx-one", includeArtifacts: true, historyLength: 0 })
        assert.sameMembers(ctx.tasks.map((t) => t.id), mine.slice(0, 2))
        assert.include(JSON.stringify(ctx.tasks[0]!.artifacts), "you said")
        const completed = yield* listAll(alice, { status: TaskState.TASK_STATE_COMPLETED })
        assert.strictEqual(completed.totalSize, 5)
        const working = yield* listAll(alice, { status: TaskState.TASK_STATE_WORKING })
        assert.strictEqual(working.totalSize, 0)
        const future = yield* listAll(alice, { statusTimestampAfter: "2999-01-01T00:00:00Z" })
        assert.strictEqual(future.totalSize, 0)

        // Raw: bounds and bad parameters are Invalid Params; history 0 leaves the member out.
        const auth = { authorization: "Bearer alice-token" }
        for (const bad of [{ pageSize: 101 }, { pageSize: 0 }, { historyLength: -1 }, { historyLength: "abc" }, { historyLength: 1.5 }, { pageToken: "bm90LWEtdG9rZW4" }, { status: "TASK_STATE_RUNNING" }, { statusTimestampAfter: "yesterday" }]) {
          const res = yield* rpc(agent.url, "ListTasks", bad, auth)
          assert.strictEqual(res.body.error?.code, -32602, JSON.stringify(bad))
        }
        const raw = yield* rpc(agent.url, "ListTasks", { historyLength: 0 }, auth)
        assert.strictEqual(raw.body.result.pageSize, 50)
        assert.strictEqual(raw.body.result.nextPageToken, "")
        assert.isFalse("history" in raw.body.result.tasks[0])
        assert.isFalse("artifacts" in raw.body.result.tasks[0])
      })
    ))

  it.live("GetTask refuses a historyLength of -1, \"abc\" or 1.5 with -32602, and leaves history out at 0", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make(echo)
        const sent = yield* rpc(agent.url, "SendMessage", { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] } })
        const id = sent.body.result.task.id as string
        for (const historyLength of [-1, "abc", 1.5]) {
          const res = yield* rpc(agent.url, "GetTask", { id, historyLength })
          assert.strictEqual(res.body.error?.code, -32602, String(historyLength))
        }
        const none = yield* rpc(agent.url, "GetTask", { id, historyLength: 0 })
        assert.isFalse("history" in none.body.result)
        const one = yield* rpc(agent.url, "GetTask", { id, historyLength: 1 })
        assert.strictEqual(one.body.result.history.length, 1)
      })
    ))

  it.live("an Invalid Request echoes the request's id when it is readable", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make(echo)
        const wrong = yield* post(`${agent.url}/`, { jsonrpc: "1.0", id: 42, method: "GetTask", params: {} })
        assert.strictEqual(wrong.body.error.code, -32600)
        assert.strictEqual(wrong.body.id, 42)
        const noMethod = yield* post(`${agent.url}/`, { jsonrpc: "2.0", id: "abc" })
        assert.strictEqual(noMethod.body.error.code, -32600)
        assert.strictEqual(noMethod.body.id, "abc")
        const badId = yield* post(`${agent.url}/`, { jsonrpc: "2.0", id: { x: 1 }, method: "GetTask" })
        assert.strictEqual(badId.body.error.code, -32600)
        assert.isNull(badId.body.id)
      })
    ))

  it.live("an agent with no declared skills lists one in its card; declared skills are its own", () =>
    provide(
      Effect.gen(function* () {
        const bare = yield* AgentServer.make(echo)
        const card: any = yield* Effect.promise(() => fetch(`${bare.url}/.well-known/agent-card.json`).then((r) => r.json()))
        assert.strictEqual(card.skills.length, 1)
        assert.strictEqual(card.skills[0].id, "run")
        assert.isString(card.skills[0].description)
        const own = yield* AgentServer.make({ ...echo, skills: [{ id: "translate", name: "Translate" }] })
        const ownCard: any = yield* Effect.promise(() => fetch(`${own.url}/.well-known/agent-card.json`).then((r) => r.json()))
        assert.deepStrictEqual(ownCard.skills.map((s: any) => s.id), ["translate"])
      })
    ))

  it.live("a 401 carries WWW-Authenticate: Bearer under bearer, Signature under mesh-sig, on /v1/run and A2A alike", () =>
    provide(
      Effect.gen(function* () {
        const bearer = yield* AgentServer.make({ ...echo, auth: "bearer", bearerTokens: ["t0k3n"] })
        for (const [path, body] of [["/v1/run", { message: "hi" }], ["/", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }]] as const) {
          const missing = yield* post(`${bearer.url}${path}`, body)
          assert.strictEqual(missing.status, 401)
          assert.strictEqual(missing.headers.get("www-authenticate"), `Bearer realm="lister"`)
          const wrong = yield* post(`${bearer.url}${path}`, body, { authorization: "Bearer nope" })
          assert.strictEqual(wrong.status, 401)
          assert.match(wrong.headers.get("www-authenticate") ?? "", /^Bearer realm="lister", error="invalid_token"/)
        }
        const signed = yield* AgentServer.make({ ...echo, auth: "mesh-sig", resolveCallerKey: () => null })
        for (const [path, body] of [["/v1/run", { message: "hi" }], ["/", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }]] as const) {
          const res = yield* post(`${signed.url}${path}`, body)
          assert.strictEqual(res.status, 401)
          assert.match(res.headers.get("www-authenticate") ?? "", /^Signature realm="lister", tag="mesh-sig"/)
          assert.include(res.headers.get("accept-signature") ?? "", `("@method" "@target-uri" "content-digest")`)
        }
      })
    ))
})

describePostgres("A2A ListTasks on two agent replicas on one Postgres", (url) => {
  it.live("each caller lists its own tasks on either replica, whichever replica ran them", () =>
    provide(
      Effect.gen(function* () {
        const options: AgentServer.AgentServerOptions = { ...echo, auth: "bearer", bearerTokens: ["alice-token", "bob-token"] }
        const [a, b] = yield* Effect.all([AgentServer.make({ ...options, database: url() }), AgentServer.make({ ...options, database: url() })])
        const aliceA = yield* sdkClient(a.url, "alice-token")
        const aliceB = yield* sdkClient(b.url, "alice-token")
        const bobB = yield* sdkClient(b.url, "bob-token")
        const onA = (yield* send(aliceA, "on a")).id
        const onB = (yield* send(aliceB, "on b")).id
        const bobs = (yield* send(bobB, "bob")).id
        for (const c of [aliceA, aliceB]) {
          const page = yield* listAll(c)
          assert.sameMembers(page.tasks.map((t) => t.id), [onA, onB])
          assert.strictEqual(page.totalSize, 2)
        }
        const first = yield* listAll(aliceA, { pageSize: 1 })
        const second = yield* listAll(aliceB, { pageSize: 1, pageToken: first.nextPageToken })
        assert.sameMembers([...first.tasks, ...second.tasks].map((t) => t.id), [onA, onB])
        assert.strictEqual(second.nextPageToken, "")
        const bobPage = yield* listAll(yield* sdkClient(a.url, "bob-token"))
        assert.deepStrictEqual(bobPage.tasks.map((t) => t.id), [bobs])
      })
    ))
})
