import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Http from "node:http"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import type { TaskConstraints } from "../../src/core/Constraints.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import { post, readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A promise and the function that settles it. */
const signal = <A = void>() => {
  let settle!: (a: A) => void
  const promise = new Promise<A>((resolve) => (settle = resolve))
  return { promise, settle }
}

const aborted = (s: AbortSignal) => new Promise<void>((resolve) => (s.aborted ? resolve() : s.addEventListener("abort", () => resolve())))

/** A plain POST whose client goes away once `started` resolves. */
const abandon = (url: string, body: unknown, started: Promise<void>) =>
  Effect.promise(async () => {
    const c = new AbortController()
    const p = fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: c.signal }).catch(() => undefined)
    await started
    c.abort()
    await p
  })

/** A raw POST with a Host header of our choosing. */
const rawPost = (url: string, host: string, body: Uint8Array, headers: Record<string, string>) =>
  Effect.async<{ status: number; body: Record<string, unknown> }>((resume) => {
    const u = new URL(url)
    const req = Http.request({ host: u.hostname, port: u.port, path: u.pathname, method: "POST", headers: { ...headers, host, "content-type": "application/json" } }, (res) => {
      let text = ""
      res.on("data", (d) => (text += d))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> })))
    })
    req.end(Buffer.from(body))
  })

/**
 * A user, and an assistant agent serving `options` under the assistant's DID, which resolves the user's key; with the
 * task mandate the user grants the assistant under `constraints`.
 */
const granted = (constraints: Omit<TaskConstraints, "maxDelegationDepth">, options: Omit<AgentServer.AgentServerOptions, "name" | "did" | "privateKey" | "resolveCallerKey">) =>
  Effect.gen(function* () {
    const user = yield* generateDid("user")
    const assistant = yield* generateDid("assistant")
    const agent = yield* AgentServer.make({
      name: "assistant",
      did: assistant.did,
      privateKey: assistant.privateKey,
      database: ":memory:",
      resolveCallerKey: (did) => (did === user.did ? user.publicKey : null),
      ...options
    })
    const mandate = (yield* issueTaskMandate({
      grantorDid: user.did,
      granteeDid: assistant.did,
      privateKey: user.privateKey,
      constraints: { ...constraints, maxDelegationDepth: 0 }
    })).token
    return { user, agent, mandate }
  })

describe("agent server hardening", () => {
  it.live("mesh-sig: a request signed for another agent is refused even with that agent's Host header", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const b = yield* AgentServer.make({
          name: "agent-b",
          handler: ({ message }) => message,
          auth: "mesh-sig",
          database: ":memory:",
          resolveCallerKey: (did) => (did === alice.did ? alice.publicKey : null),
          // Past the Host check (which alone would refuse it with 421), so the signature binding is what refuses.
          serving: { allowedHosts: ["agent-a.example"] }
        })
        const bytes = new TextEncoder().encode(JSON.stringify({ message: "transfer everything" }))
        const headers = yield* signRequest({ method: "POST", url: "http://agent-a.example/v1/run", body: bytes }, { privateKey: alice.privateKey, keyId: verificationMethodId(alice.did) })
        const r = yield* rawPost(`${b.url}/v1/run`, "agent-a.example", bytes, { ...headers })
        assert.strictEqual(r.status, 401)
        assert.strictEqual(r.body.code, "SIGNATURE_INVALID")
        // On an address others reach, the URL callers sign must be configured.
        const open = yield* Effect.flip(AgentServer.make({ name: "open", handler: () => "", auth: "mesh-sig", host: "0.0.0.0", resolveCallerKey: () => null, database: ":memory:" }))
        assert.strictEqual(open._tag, "AgentConfigError")
      })
    ))

  it.live("memory is per caller: another caller naming the same sessionId starts a session of its own", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "mem",
          auth: "bearer",
          bearerTokens: ["alice-token", "bob-token"],
          memory: "session",
          database: ":memory:",
          handler: ({ history }) => JSON.stringify(history)
        })
        yield* post(`${agent.url}/v1/run`, { message: "my card is 4111-1111", sessionId: "support" }, { authorization: "Bearer alice-token" })
        const bob = yield* post(`${agent.url}/v1/run`, { message: "hi", sessionId: "support" }, { authorization: "Bearer bob-token" })
        assert.strictEqual(bob.body.message, "[]")
        const alice = yield* post(`${agent.url}/v1/run`, { message: "again", sessionId: "support" }, { authorization: "Bearer alice-token" })
        assert.include(alice.body.message, "4111-1111")
      })
    ))

  it.live("a resume replays only identical guard calls, and the approval covers only the call the human was shown", () =>
    provide(
      Effect.gen(function* () {
        let execution = 0
        const log: Array<string> = []
        const { user, agent, mandate } = yield* granted(
          { allowed: ["read", "send_email"], humanGates: ["send_email"], dataAccess: ["inbox"] },
          {
            // Steps that depend on something besides the input, as an LLM's choices do.
            handler: async ({ guard }) => {
              const first = execution++ === 0
              await guard("read", { reversible: true, dataScopes: first ? ["inbox"] : ["hr-records"] })
              log.push(`read ${first ? "inbox" : "hr-records"}`)
              await guard("send_email", { description: first ? "email bob: lunch?" : "email everyone: hr records" })
              log.push("emailed")
              return "ok"
            }
          }
        )
        const paused = yield* post(`${agent.url}/v1/run`, { message: "m", mandate })
        const taskId = paused.body.approvalRequired.taskId
        const resumed = yield* post(`${agent.url}/v1/resume`, { taskId, approval: yield* signApproval({ taskId, capability: "send_email" }, user.did, user.privateKey) })
        assert.strictEqual(resumed.status, 403)
        assert.strictEqual(resumed.body.code, "DATA_ACCESS_VIOLATION")
        assert.deepStrictEqual(log, ["read inbox"])
      })
    ))

  it.live("only the caller who started a task (or its grantor) may resume it", () =>
    provide(
      Effect.gen(function* () {
        const { user, agent, mandate } = yield* granted(
          { allowed: ["send_email"], humanGates: ["send_email"] },
          {
            auth: "bearer",
            bearerTokens: ["alice", "mallory"],
            handler: async ({ guard }) => {
              await guard("send_email")
              return "the secret summary"
            }
          }
        )
        const paused = yield* post(`${agent.url}/v1/run`, { message: "m", mandate }, { authorization: "Bearer alice" })
        const taskId = paused.body.approvalRequired.taskId
        const approval = yield* signApproval({ taskId, capability: "send_email" }, user.did, user.privateKey)
        const stolen = yield* post(`${agent.url}/v1/resume`, { taskId, approval }, { authorization: "Bearer mallory" })
        assert.strictEqual(stolen.status, 403)
        assert.strictEqual(stolen.body.code, "NOT_TASK_OWNER")
        const own = yield* post(`${agent.url}/v1/resume`, { taskId, approval }, { authorization: "Bearer alice" })
        assert.strictEqual(own.body.message, "the secret summary")
      })
    ))

  it.live("a cancelled run's handler is aborted (async generators too) and its guard allows nothing more", () =>
    provide(
      Effect.gen(function* () {
        const started = signal()
        const after = signal<string>()
        const { agent, mandate } = yield* granted(
          { allowed: ["pay"] },
          {
            handler: async function* ({ guard, signal: s }) {
              yield "thinking "
              started.settle()
              await aborted(s)
              await guard("pay").then(
                () => after.settle("paid"),
                (e: { code?: string }) => after.settle(`refused ${e.code}`)
              )
            }
          }
        )
        yield* abandon(`${agent.url}/v1/run`, { message: "m", mandate }, started.promise)
        assert.strictEqual(yield* Effect.promise(() => after.promise), "refused RUN_CANCELLED")
      })
    ))

  it.live("closing the server does not wait on a streamed run's generator stuck on its signal", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const agent = yield* AgentServer.make({
        name: "stuck",
        database: ":memory:",
        handler: async function* ({ signal: s }) {
          yield "a"
          await aborted(s)
        }
      }).pipe(Scope.extend(scope))
      yield* readSse(`${agent.url}/v1/run`, { message: "x" }, {}, (_e, all) => all.length === 1)
      const closed = yield* Scope.close(scope, Exit.void).pipe(Effect.timeout(Duration.seconds(10)), Effect.option)
      assert.strictEqual(closed._tag, "Some")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.live("a throwing key resolver is 503 RESOLVER_UNAVAILABLE; Last-Event-ID without SSE, or past the run's end, is 400", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const agent = yield* AgentServer.make({
          name: "resolver",
          handler: () => "x",
          auth: "mesh-sig",
          database: ":memory:",
          resolveCallerKey: async () => {
            throw new Error("directory down")
          }
        })
        const bytes = new TextEncoder().encode(JSON.stringify({ message: "hi" }))
        const headers = yield* signRequest({ method: "POST", url: `${agent.url}/v1/run`, body: bytes }, { privateKey: alice.privateKey, keyId: verificationMethodId(alice.did) })
        const r = yield* post(`${agent.url}/v1/run`, new TextDecoder().decode(bytes), { ...headers })
        assert.strictEqual(r.status, 503)
        assert.strictEqual(r.body.code, "RESOLVER_UNAVAILABLE")

        let runs = 0
        const counter = yield* AgentServer.make({ name: "counter", database: ":memory:", handler: () => `run ${++runs}` })
        const noStream = yield* post(`${counter.url}/v1/run`, { message: "pay" }, { "last-event-id": "00000000-0000-4000-8000-000000000000:3" })
        assert.strictEqual(noStream.status, 400)
        assert.strictEqual(runs, 0)
        const first = yield* readSse(`${counter.url}/v1/run`, { message: "pay" })
        const runId = first.events[0]!.id.split(":")[0]
        const past = yield* readSse(`${counter.url}/v1/run`, { message: "pay" }, { "last-event-id": `${runId}:7` })
        assert.strictEqual(past.status, 400)
        assert.strictEqual(runs, 1)
      })
    ))

  it.live("a long streamed run keeps only its latest events for reconnects; a live client still gets everything", () =>
    provide(
      Effect.gen(function* () {
        const chunk = "x".repeat(10_000)
        const agent = yield* AgentServer.make({
          name: "long",
          database: ":memory:",
          handler: async function* () {
            for (let i = 0; i < 600; i++) yield chunk
          }
        })
        const live = yield* readSse(`${agent.url}/v1/run`, { message: "go" })
        assert.strictEqual(live.events.length, 601)
        assert.strictEqual(live.events[600]!.data.message.length, 6_000_000)
        const runId = live.events[0]!.id.split(":")[0]
        const early = yield* readSse(`${agent.url}/v1/run`, { message: "go" }, { "last-event-id": `${runId}:0` })
        assert.strictEqual(early.status, 404)
        assert.strictEqual(early.body.code, "RUN_NOT_FOUND")
        // The final event alone (it holds the whole 6 MB reply) fills what is kept.
        const late = yield* readSse(`${agent.url}/v1/run`, { message: "go" }, { "last-event-id": `${runId}:599` })
        assert.deepStrictEqual(late.events.map((e) => e.event), ["done"])
      })
    ))
})
