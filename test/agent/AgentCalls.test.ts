/**
 * A handler calls another agent as itself (`input.call`, `callEffect`, `callStream`, `callStreamEffect`): resolved
 * through the agent's hub, signed with mesh-sig by the agent's DID, carrying the served request's correlation id
 * and trace context, and under the task mandate's guard when the run has one.
 */
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { AgentCallError } from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { didHash, generateDid, type MeshIdentity } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import type { TaskConstraints } from "../../src/core/Constraints.js"
import * as Telemetry from "../../src/http/Telemetry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { startHub } from "../hub/support.js"
import { post, readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
const CALLER_TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`

/** What the called agent saw of one run. */
interface Seen {
  readonly message: string
  readonly auth: string
  readonly did: string | undefined
  readonly correlationId: string | undefined
  readonly traceparent: string | undefined
}

/**
 * A hub; a user registered as a caller; a callee agent that answers signed callers only (keys from the hub) and
 * records what it saw; and `start(handler)`, the caller agent with its own identity, on the same hub.
 */
const mesh = Effect.gen(function* () {
  const { hub, client } = yield* startHub()
  const user = yield* generateDid("user", undefined, "calls")
  const calleeId = yield* generateDid("callee", undefined, "calls")
  const callerId = yield* generateDid("caller", undefined, "calls")
  yield* client.registerAgent({ identity: user, manifest: { name: user.did, meshProtocolVersion: "1.0", capabilities: [] } })
  const seen: Array<Seen> = []
  const callee = yield* AgentServer.make({
    name: "callee",
    did: calleeId.did,
    privateKey: calleeId.privateKey,
    database: ":memory:",
    auth: "mesh-sig",
    hubUrl: hub.url,
    handler: async function* ({ message, caller, trace }) {
      seen.push({ message, auth: caller.auth, did: caller.did, correlationId: trace.correlationId, traceparent: trace.traceparent })
      for (const word of message.split(" ")) yield `<${word}>`
    }
  })
  const register = (identity: MeshIdentity, endpointUrl: string) =>
    client.registerAgent({ identity, endpointUrl, manifest: { name: identity.did, meshProtocolVersion: "1.0", capabilities: [] } })
  yield* register(calleeId, callee.url)
  const start = (handler: AgentServer.Handler) =>
    Effect.gen(function* () {
      const agent = yield* AgentServer.make({ name: "caller", did: callerId.did, privateKey: callerId.privateKey, database: ":memory:", hubUrl: hub.url, handler })
      yield* register(callerId, agent.url)
      return agent
    })
  const mandate = (constraints: TaskConstraints) =>
    Effect.map(issueTaskMandate({ grantorDid: user.did, granteeDid: callerId.did, privateKey: user.privateKey, constraints }), (m) => m.token)
  return { hub, client, user, callerId, calleeId, callee, calleeHash: didHash(calleeId.did), seen, start, mandate }
})

/** A caller handler that reports a failed call as `<_tag>:<code>` instead of failing its run. */
const reporting = (target: (context: Readonly<Record<string, unknown>>) => string): AgentServer.Handler => async ({ call, context }) => {
  try {
    const r = await call(target(context), "hi")
    return "message" in r ? r.message : "paused"
  } catch (e) {
    const error = e as AgentCallError
    return `${error._tag}:${error.code}:${error.message}`
  }
}

describe("a handler calls another agent as itself", () => {
  it.live("the callee sees the calling agent's DID as the verified mesh-sig signer (Promise and Effect forms)", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const caller = yield* m.start(({ message, call, callEffect, context }) =>
          context.form === "effect"
            ? Effect.map(callEffect(m.calleeHash, message), (r) => ("message" in r ? `effect ${r.message}` : "paused"))
            : call(m.calleeHash, message).then((r) => ("message" in r ? `promise ${r.message}` : "paused"))
        )
        const viaPromise = yield* post(`${caller.url}/v1/run`, { message: "hello there" })
        assert.strictEqual(viaPromise.status, 200, JSON.stringify(viaPromise.body))
        assert.strictEqual(viaPromise.body.message, "promise <hello><there>")
        const viaEffect = yield* post(`${caller.url}/v1/run`, { message: "again", context: { form: "effect" } })
        assert.strictEqual(viaEffect.body.message, "effect <again>")
        assert.deepStrictEqual(m.seen.map((s) => [s.message, s.auth, s.did]), [
          ["hello there", "mesh-sig", m.callerId.did],
          ["again", "mesh-sig", m.callerId.did]
        ])
      })
    ))

  it.live("the call carries the served request's correlation id and traceparent (tracing off: passed on as they came)", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const caller = yield* m.start(({ message, callEffect }) => Effect.map(callEffect(m.calleeHash, message), (r) => ("message" in r ? r.message : "paused")))
        const res = yield* post(`${caller.url}/v1/run`, { message: "traced" }, { "x-correlation-id": "calls-cid-1", traceparent: CALLER_TRACEPARENT })
        assert.strictEqual(res.status, 200, JSON.stringify(res.body))
        assert.strictEqual(m.seen[0]?.correlationId, "calls-cid-1")
        assert.strictEqual(m.seen[0]?.traceparent, CALLER_TRACEPARENT)
      })
    ))

  it.live("with tracing on, the callee's server span descends from the caller's through an agent.call span of the same trace", () => {
    const exporter = new InMemorySpanExporter()
    const telemetry = Telemetry.layer({ serviceName: "calls-test", spanProcessor: new SimpleSpanProcessor(exporter) })
    return Effect.gen(function* () {
      const m = yield* mesh
      // A Promise handler: its call runs outside the request's fiber and still joins the request's trace.
      const caller = yield* m.start(async ({ message, call }) => {
        const r = await call(m.calleeHash, message)
        return "message" in r ? r.message : "paused"
      })
      const res = yield* post(`${caller.url}/v1/run`, { message: "spans" }, { "x-correlation-id": "calls-cid-2", traceparent: CALLER_TRACEPARENT })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.strictEqual(m.seen[0]?.correlationId, "calls-cid-2")
      const spans = exporter.getFinishedSpans()
      const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
      const runs = spans.filter((s) => s.name === "POST /v1/run" && s.kind === 1)
      const serverA = runs.find((s) => s.parentSpanContext?.spanId === "00f067aa0ba902b7")
      const serverB = runs.find((s) => s !== serverA)
      assert.isDefined(serverA)
      assert.isDefined(serverB)
      assert.strictEqual(serverB!.spanContext().traceId, TRACE_ID)
      assert.strictEqual(m.seen[0]?.traceparent?.split("-")[1], TRACE_ID)
      const call = byId.get(serverB!.parentSpanContext!.spanId)
      assert.strictEqual(call?.name, "agent.call")
      let up: ReadableSpan | undefined = call
      while (up !== undefined && up !== serverA) up = up.parentSpanContext === undefined ? undefined : byId.get(up.parentSpanContext.spanId)
      assert.strictEqual(up, serverA, "the callee's server span does not descend from the caller's")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(telemetry, KeysNative.layer)))
  })

  it.live("under a task mandate that does not allow the call it is refused with CAPABILITY_NOT_PERMITTED and nothing is sent", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const caller = yield* m.start(({ message, call }) => call(m.calleeHash, message).then((r) => ("message" in r ? r.message : "paused")))
        const token = yield* m.mandate({ allowed: ["read_inbox"], maxDelegationDepth: 0 })
        const res = yield* post(`${caller.url}/v1/run`, { message: "not allowed", mandate: token })
        assert.strictEqual(res.status, 403, JSON.stringify(res.body))
        assert.strictEqual(res.body.code, "CAPABILITY_NOT_PERMITTED")
        assert.include(res.body.error, `agent:${m.calleeHash}`)
        assert.deepStrictEqual(m.seen, [])
      })
    ))

  it.live("a call is a use of agent:<didHash>[/<capability>] under the mandate: allowed calls go, past the action limit they stop", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const caller = yield* m.start(async ({ call }) => {
          const first = await call(m.calleeHash, "first", { capability: "forecast" })
          const second = await call(m.calleeHash, "second", { capability: "forecast" })
          return ["message" in first ? first.message : "", "message" in second ? second.message : ""].join(" ")
        })
        const capability = AgentServer.agentCapability(m.calleeHash, "forecast")
        assert.strictEqual(capability, `agent:${m.calleeHash}/forecast`)
        const token = yield* m.mandate({ allowed: [capability], actionLimits: { [capability]: 1 }, maxDelegationDepth: 0 })
        const res = yield* post(`${caller.url}/v1/run`, { message: "go", mandate: token })
        assert.strictEqual(res.status, 403, JSON.stringify(res.body))
        assert.strictEqual(res.body.code, "ACTION_LIMIT_EXCEEDED")
        assert.deepStrictEqual(m.seen.map((s) => s.message), ["first"])
      })
    ))

  it.live("the streamed forms yield the callee's chunks as they come, relayed by a handler that returns them", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const caller = yield* m.start(({ message, callStream, callStreamEffect, context }) =>
          context.form === "effect" ? Stream.map(callStreamEffect(m.calleeHash, message), (c) => c.toUpperCase()) : callStream(m.calleeHash, message)
        )
        const iterable = yield* readSse(`${caller.url}/v1/run`, { message: "one two three" })
        assert.deepStrictEqual(iterable.events.filter((e) => e.event === "chunk").map((e) => e.data.text), ["<one>", "<two>", "<three>"])
        assert.strictEqual(iterable.events.at(-1)?.event, "done")
        const effect = yield* readSse(`${caller.url}/v1/run`, { message: "four five", context: { form: "effect" } })
        assert.deepStrictEqual(effect.events.filter((e) => e.event === "chunk").map((e) => e.data.text), ["<FOUR>", "<FIVE>"])
        assert.deepStrictEqual(m.seen.map((s) => s.did), [m.callerId.did, m.callerId.did])
      })
    ))

  it.live("an agent without an identity of its own cannot call as itself: IDENTITY_NOT_CONFIGURED names --identity, and nothing is sent", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const caller = yield* AgentServer.make({ name: "anonymous", database: ":memory:", hubUrl: m.hub.url, handler: reporting(() => m.calleeHash) })
        const res = yield* post(`${caller.url}/v1/run`, { message: "hi" })
        assert.match(res.body.message, /^AgentCallError:IDENTITY_NOT_CONFIGURED:.*--identity <file>/)
        assert.deepStrictEqual(m.seen, [])
      })
    ))

  it.live("typed failures: no hub is HUB_NOT_CONFIGURED, an unknown didHash AGENT_NOT_FOUND, the callee's refusal its own code", () =>
    provide(
      Effect.gen(function* () {
        const m = yield* mesh
        const hubless = yield* AgentServer.make({
          name: "hubless", did: m.callerId.did, privateKey: m.callerId.privateKey, database: ":memory:", handler: reporting(() => m.calleeHash)
        })
        const noHub = yield* post(`${hubless.url}/v1/run`, { message: "hi" })
        assert.match(noHub.body.message, /^AgentCallError:HUB_NOT_CONFIGURED:.*--hub/)
        const caller = yield* m.start(reporting((context) => String(context.target)))
        const ask = (target: string) => Effect.map(post(`${caller.url}/v1/run`, { message: "hi", context: { target } }), (r) => String(r.body.message).split(":").slice(0, 2).join(":"))
        assert.strictEqual(yield* ask("aaaaaaaaaaaaaaaaaaaaaaaa"), "AgentCallError:AGENT_NOT_FOUND")
        assert.strictEqual(yield* ask("http://127.0.0.1:1"), "AgentCallError:AGENT_NOT_FOUND")
        // A callee that admits someone else only: its refusal reaches the handler with its code.
        const picky = yield* generateDid("picky", undefined, "calls")
        const pickyAgent = yield* AgentServer.make({
          name: "picky", did: picky.did, privateKey: picky.privateKey, database: ":memory:", auth: "mesh-sig", hubUrl: m.hub.url, allowedCallers: [m.user.did], handler: () => "never"
        })
        yield* m.client.registerAgent({ identity: picky, endpointUrl: pickyAgent.url, manifest: { name: picky.did, meshProtocolVersion: "1.0", capabilities: [] } })
        assert.strictEqual(yield* ask(didHash(picky.did)), "AgentCallError:CALLER_NOT_ALLOWED")
        assert.deepStrictEqual(m.seen, [])
      })
    ))
})
