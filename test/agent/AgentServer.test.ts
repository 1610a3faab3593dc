import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { didHash } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { makeScripted } from "../../src/core/ModelProvider.js"
import { verifyMessage } from "../../src/core/Proof.js"
import { fromBase64 } from "../../src/core/internal/bytes.js"
import { startFakeOpenAi } from "../support/fakeOpenAi.js"
import { get, post, readSse, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const echo: AgentServer.Handler = ({ message, history }) => `echo(${history.length}): ${message}`

describe("agent server", () => {
  it.live("POST /v1/run answers { message, sessionId }; a sessionId is made when none is sent and kept when one is", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ name: "echo", handler: echo, database: ":memory:" })
        const a = yield* post(`${agent.url}/v1/run`, { message: "hi" })
        assert.strictEqual(a.status, 200)
        assert.strictEqual(a.body.message, "echo(0): hi")
        assert.match(a.body.sessionId, /^[0-9a-f-]{36}$/)
        const b = yield* post(`${agent.url}/v1/run`, { message: "again", sessionId: "s-1", history: [{ role: "user", content: "x" }] })
        assert.deepStrictEqual(b.body, { message: "echo(1): again", sessionId: "s-1" })
        assert.isString(b.headers.get("x-correlation-id"))
      })
    ))

  it.live("a handler's input: its tools work destructured, a spread copy keeps every field and tool but signal and trace", () =>
    provide(
      Effect.gen(function* () {
        const seen: Array<unknown> = []
        const agent = yield* AgentServer.make({
          name: "shape",
          database: ":memory:",
          handler: (input) => {
            const { message, sessionId, caller, guard, guardEffect, reportCost, mcp, compute, signal, trace } = input
            reportCost("0.01")
            const copy = { ...input }
            seen.push({
              fields: [message, sessionId, caller.principal, typeof guard, typeof guardEffect, typeof mcp, compute.metered, signal.aborted, typeof trace.correlationId],
              mcpServer: mcp("files").server,
              copied: Object.keys(copy).sort(),
              copiedSignal: "signal" in copy,
              sameSignal: input.signal === signal
            })
            return message
          }
        })
        const r = yield* post(`${agent.url}/v1/run`, { message: "hi", sessionId: "s-1" }, { "x-correlation-id": "cid-shape-1" })
        assert.strictEqual(r.status, 200)
        assert.deepStrictEqual(seen, [{
          fields: ["hi", "s-1", "anonymous", "function", "function", "function", false, false, "string"],
          mcpServer: "files",
          copied: ["call", "callEffect", "callStream", "callStreamEffect", "caller", "capability", "charge", "chargeEffect", "commit", "compute", "context", "guard", "guardEffect", "history", "mcp", "message", "reportCost", "sessionId", "systemPrompt"],
          copiedSignal: false,
          sameSignal: true
        }])
      })
    ))

  it.live("bad requests get typed errors: missing message 400, bad JSON 400, a body over the limit 413 before parsing", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ name: "echo", handler: echo, database: ":memory:", maxBodyBytes: 1024 })
        const missing = yield* post(`${agent.url}/v1/run`, { text: "hi" })
        assert.strictEqual(missing.status, 400)
        assert.strictEqual(missing.body.code, "INVALID_REQUEST")
        const notJson = yield* post(`${agent.url}/v1/run`, "{nope")
        assert.strictEqual(notJson.status, 400)
        assert.strictEqual(notJson.body.code, "INVALID_JSON")
        const big = yield* post(`${agent.url}/v1/run`, { message: "x".repeat(2000) })
        assert.strictEqual(big.status, 413)
        assert.strictEqual(big.body.code, "PAYLOAD_TOO_LARGE")
        assert.hasAllKeys(big.body, ["_tag", "error", "code", "correlationId"])
      })
    ))

  it.live("a failing handler answers 500 HANDLER_FAILED without its details", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "broken",
          database: ":memory:",
          handler: () => {
            throw new Error("secret database password in this message")
          }
        })
        const r = yield* post(`${agent.url}/v1/run`, { message: "hi" })
        assert.strictEqual(r.status, 500)
        assert.strictEqual(r.body.code, "HANDLER_FAILED")
        assert.notInclude(JSON.stringify(r.body), "secret")
        const rejected = yield* AgentServer.make({ name: "rejects", database: ":memory:", handler: async () => Promise.reject(new Error("secret")) })
        assert.strictEqual((yield* post(`${rejected.url}/v1/run`, { message: "hi" })).body.code, "HANDLER_FAILED")
      })
    ))

  it.live("handlers may return a string, a Promise, an async generator, an Effect or a Stream", () =>
    provide(
      Effect.gen(function* () {
        const forms: Record<string, AgentServer.Handler> = {
          promise: async ({ message }) => `p:${message}`,
          generator: async function* ({ message }) {
            yield "g:"
            yield message
          },
          effect: ({ message }) => Effect.succeed(`e:${message}`),
          stream: ({ message }) => Stream.make("s:", message)
        }
        for (const [name, handler] of Object.entries(forms)) {
          const agent = yield* AgentServer.make({ name, handler, database: ":memory:" })
          const r = yield* post(`${agent.url}/v1/run`, { message: "x" })
          assert.strictEqual(r.body.message, `${name[0]}:x`, name)
        }
      })
    ))

  it.live("SSE: chunk events then done, each with an id; an error mid-stream is a typed error event", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "streamer",
          database: ":memory:",
          handler: async function* ({ message }) {
            for (const w of message.split(" ")) yield w
            if (message.startsWith("fail")) throw new Error("boom")
          }
        })
        const r = yield* readSse(`${agent.url}/v1/run`, { message: "a b c", sessionId: "s" })
        assert.deepStrictEqual(r.events.map((e) => e.event), ["chunk", "chunk", "chunk", "done"])
        assert.deepStrictEqual(r.events.slice(0, 3).map((e) => e.data.text), ["a", "b", "c"])
        assert.deepStrictEqual(r.events[3]!.data, { message: "abc", sessionId: "s" })
        const runId = r.events[0]!.id.split(":")[0]
        assert.deepStrictEqual(r.events.map((e) => e.id), [0, 1, 2, 3].map((i) => `${runId}:${i}`))
        const failed = yield* readSse(`${agent.url}/v1/run`, { message: "fail now" })
        assert.deepStrictEqual(failed.events.map((e) => e.event), ["chunk", "chunk", "error"])
        assert.strictEqual(failed.events[2]!.data.code, "HANDLER_FAILED")
        assert.hasAllKeys(failed.events[2]!.data, ["_tag", "error", "code", "correlationId"])
      })
    ))

  it.live("a client that drops and reconnects with Last-Event-ID gets every later event once, even those sent while it was away", () =>
    provide(
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const release = () => Effect.runPromise(Deferred.await(gate))
        const agent = yield* AgentServer.make({
          name: "slow",
          database: ":memory:",
          handler: async function* () {
            yield "one"
            yield "two"
            await release()
            yield "three"
            yield "four"
          }
        })
        const first = yield* readSse(`${agent.url}/v1/run`, { message: "go" }, {}, (_e, all) => all.length === 2)
        assert.deepStrictEqual(first.events.map((e) => e.data.text), ["one", "two"])
        // The run goes on without its client.
        yield* Deferred.succeed(gate, undefined)
        const last = first.events[1]!.id
        const again = yield* readSse(`${agent.url}/v1/run`, { message: "go" }, { "last-event-id": last })
        assert.deepStrictEqual(again.events.map((e) => e.event), ["chunk", "chunk", "done"])
        assert.deepStrictEqual(again.events.slice(0, 2).map((e) => e.data.text), ["three", "four"])
        assert.strictEqual(again.events[2]!.data.message, "onetwothreefour")
        // From the very first event on, everything again; an unknown run is 404.
        const all = yield* readSse(`${agent.url}/v1/run`, { message: "go" }, { "last-event-id": `${last.split(":")[0]}:0` })
        assert.strictEqual(all.events.length, 4)
        const unknown = yield* readSse(`${agent.url}/v1/run`, { message: "go" }, { "last-event-id": "00000000-0000-4000-8000-000000000000:1" })
        assert.strictEqual(unknown.status, 404)
        assert.strictEqual(unknown.body.code, "RUN_NOT_FOUND")
      })
    ))

  it.live("memory none: the caller's history; session: kept per sessionId by the server", () =>
    provide(
      Effect.gen(function* () {
        const seen: Array<number> = []
        const handler: AgentServer.Handler = ({ history, message }) => {
          seen.push(history.length)
          return `re:${message}`
        }
        const none = yield* AgentServer.make({ name: "none", handler, database: ":memory:" })
        yield* post(`${none.url}/v1/run`, { message: "1", sessionId: "s" })
        yield* post(`${none.url}/v1/run`, { message: "2", sessionId: "s" })
        assert.deepStrictEqual(seen.splice(0), [0, 0])
        const session = yield* AgentServer.make({ name: "session", handler, memory: "session", database: ":memory:" })
        yield* post(`${session.url}/v1/run`, { message: "1", sessionId: "s" })
        yield* post(`${session.url}/v1/run`, { message: "2", sessionId: "s" })
        yield* post(`${session.url}/v1/run`, { message: "3", sessionId: "other" })
        assert.deepStrictEqual(seen.splice(0), [0, 2, 0])
      })
    ))

  it.live("memory persistent survives a restart of the server", () =>
    provide(
      Effect.gen(function* () {
        const database = tempDatabase()
        const histories: Array<ReadonlyArray<{ role: string; content: string }>> = []
        const options: AgentServer.AgentServerOptions = {
          name: "keeper",
          memory: "persistent",
          database,
          handler: ({ history, message }) => {
            histories.push(history)
            return `re:${message}`
          }
        }
        yield* Effect.scoped(
          Effect.flatMap(AgentServer.make(options), (agent) => post(`${agent.url}/v1/run`, { message: "remember me", sessionId: "s" }))
        )
        const agent = yield* AgentServer.make(options)
        yield* post(`${agent.url}/v1/run`, { message: "well?", sessionId: "s" })
        assert.deepStrictEqual(histories[1], [
          { role: "user", content: "remember me" },
          { role: "assistant", content: "re:remember me" }
        ])
      })
    ))

  it.live("GET /health and a discovery document signed with the agent's key", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ name: "finder", did: "did:mesh:example.finder", handler: echo, database: ":memory:", capabilities: ["echo"] })
        const health = yield* get(`${agent.url}/health`)
        assert.strictEqual(health.status, 200)
        assert.strictEqual(health.body.status, "ok")
        assert.strictEqual(health.body.did, "did:mesh:example.finder")
        assert.isNumber(health.body.uptimeSeconds)
        assert.isString(health.body.version)
        const doc = (yield* get(`${agent.url}/.well-known/mesh-agent.json`)).body
        assert.strictEqual(doc.didHash, didHash(agent.did as never))
        assert.strictEqual(doc.meshProtocolVersion, "1.0")
        assert.strictEqual(doc.endpoints.run, `${agent.url}/v1/run`)
        assert.deepStrictEqual(doc.auth, ["none"])
        assert.strictEqual(doc.streaming, true)
        assert.deepStrictEqual(doc.capabilities, ["echo"])
        yield* verifyMessage(doc, fromBase64(agent.publicKeyB64), { verificationMethod: "did:mesh:example.finder#key-1" })
        const tampered = { ...doc, capabilities: ["everything"] }
        const refused = yield* Effect.flip(verifyMessage(tampered, fromBase64(agent.publicKeyB64)))
        assert.strictEqual(refused.code, "SIGNATURE_INVALID")
      })
    ))

  it.live("with a provider and a model and no handler, it is an LLM chat agent (scripted provider)", () =>
    provide(
      Effect.gen(function* () {
        const provider = makeScripted(["Hello there friend"])
        const agent = yield* AgentServer.make({ name: "chat", provider, model: "m1", systemPrompt: "Be brief.", memory: "session", database: ":memory:" })
        const r = yield* post(`${agent.url}/v1/run`, { message: "hi", sessionId: "s" })
        assert.strictEqual(r.body.message, "Hello there friend")
        const s = yield* readSse(`${agent.url}/v1/run`, { message: "more", sessionId: "s" })
        assert.isAbove(s.events.filter((e) => e.event === "chunk").length, 1)
        assert.strictEqual(s.events.at(-1)!.data.message, "Hello there friend")
        assert.deepStrictEqual(provider.requests[1]!.messages.map((m) => [m.role, m.content]), [
          ["system", "Be brief."],
          ["user", "hi"],
          ["assistant", "Hello there friend"],
          ["user", "more"]
        ])
        assert.strictEqual(provider.requests[1]!.model, "m1")
      })
    ))

  it.live("an OpenAI-compatible provider over HTTP (local fake), with provider failures as 502 codes", () =>
    provide(
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAi({ apiKey: "sk-test" })
        const agent = yield* AgentServer.make({ name: "llm", provider: { baseUrl: fake.url, apiKey: "sk-test" }, model: "llama", database: ":memory:" })
        const r = yield* post(`${agent.url}/v1/run`, { message: "ping" })
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.body.message, "You said: ping")
        const s = yield* readSse(`${agent.url}/v1/run`, { message: "stream me" })
        assert.strictEqual(s.events.filter((e) => e.event === "chunk").map((e) => e.data.text).join(""), "You said: stream me")
        yield* fake.setMode("unauthorized")
        const refused = yield* post(`${agent.url}/v1/run`, { message: "ping" })
        assert.strictEqual(refused.status, 502)
        assert.strictEqual(refused.body.code, "PROVIDER_AUTH")
        assert.notInclude(JSON.stringify(refused.body), "sk-test")
      })
    ))

  it.live("options that cannot run fail at start with INVALID_CONFIG", () =>
    provide(
      Effect.gen(function* () {
        const cases: ReadonlyArray<AgentServer.AgentServerOptions> = [
          { name: "nothing", database: ":memory:" },
          { name: "b", handler: echo, auth: "bearer", database: ":memory:" },
          { name: "m", handler: echo, auth: "mesh-sig", database: ":memory:" }
        ]
        for (const options of cases) {
          const e = yield* Effect.flip(Effect.scoped(AgentServer.make(options)))
          assert.strictEqual(e._tag, "AgentConfigError", options.name)
        }
      })
    ))
})
