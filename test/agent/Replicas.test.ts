/**
 * Two replicas of one agent on one Postgres database (docs/scaling.md), as behind a load balancer: a mesh-sig request
 * accepted by one is a replay to the other, a streamed run started on one is reconnected on the other with
 * `Last-Event-ID`, and a task paused on one is resumed on the other (exactly once, even when both are asked).
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { describePostgres, probeNow } from "../support/postgres.js"
import { post, readSse } from "./support.js"

await probeNow()

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** The URL both replicas are reached at (and callers sign): the load balancer's. */
const PUBLIC_URL = "http://127.0.0.1:7999"

/** Two replicas of the agent `options` describes, on the database at `url`. */
const replicas = (url: string, options: AgentServer.AgentServerOptions) =>
  Effect.all([AgentServer.make({ ...options, database: url }), AgentServer.make({ ...options, database: url })])

describePostgres("agent replicas on one Postgres", (url) => {
  it.live("a mesh-sig request accepted by one replica is refused as REPLAYED by the other", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const [a, b] = yield* replicas(url(), {
          name: "replicated-signed",
          auth: "mesh-sig",
          publicUrl: PUBLIC_URL,
          resolveCallerKey: (did) => (did === alice.did ? alice.publicKey : null),
          handler: ({ caller }) => `hello ${caller.did}`
        })
        const bytes = new TextEncoder().encode(JSON.stringify({ message: "hi" }))
        const headers = { ...(yield* signRequest({ method: "POST", url: `${PUBLIC_URL}/v1/run`, body: bytes }, { privateKey: alice.privateKey, keyId: verificationMethodId(alice.did) })) }
        const first = yield* post(`${a.url}/v1/run`, new TextDecoder().decode(bytes), headers)
        assert.strictEqual(first.status, 200, JSON.stringify(first.body))
        const replay = yield* post(`${b.url}/v1/run`, new TextDecoder().decode(bytes), headers)
        assert.strictEqual(replay.status, 401)
        assert.strictEqual(replay.body.code, "REPLAYED")
      })
    ))

  it.live("a streamed run started on one replica is reconnected on the other with Last-Event-ID, missing nothing", () =>
    provide(
      Effect.gen(function* () {
        let release: () => void = () => {}
        const gate = new Promise<void>((resolve) => (release = resolve))
        const [a, b] = yield* replicas(url(), {
          name: "replicated-stream",
          handler: async function* () {
            yield "one "
            await gate
            yield "two "
            yield "three"
          }
        })
        const body = { message: "go" }
        const started = yield* readSse(`${a.url}/v1/run`, body, {}, () => true)
        assert.strictEqual(started.status, 200)
        assert.deepStrictEqual(started.events.map((e) => e.data.text), ["one "])
        release()
        const resumed = yield* readSse(`${b.url}/v1/run`, body, { "last-event-id": started.events[0]!.id })
        assert.strictEqual(resumed.status, 200, JSON.stringify(resumed.body))
        assert.deepStrictEqual(resumed.events.map((e) => e.event), ["chunk", "chunk", "done"])
        assert.deepStrictEqual(resumed.events.slice(0, 2).map((e) => e.data.text), ["two ", "three"])
        assert.deepStrictEqual(resumed.events.map((e) => Number(e.id.split(":")[1])), [1, 2, 3])
        // An unknown run is RUN_NOT_FOUND on either replica.
        const unknown = yield* readSse(`${a.url}/v1/run`, body, { "last-event-id": "00000000-0000-4000-8000-000000000000:0" })
        assert.strictEqual(unknown.status, 404)
        assert.strictEqual(unknown.body.code, "RUN_NOT_FOUND")
      })
    ))

  it.live("a task paused on one replica is resumed on the other; asked on both at once, exactly one resume wins", () =>
    provide(
      Effect.gen(function* () {
        const user = yield* generateDid("user")
        const assistant = yield* generateDid("assistant")
        const sent: Array<string> = []
        const [a, b] = yield* replicas(url(), {
          name: "replicated-gates",
          did: assistant.did,
          privateKey: assistant.privateKey,
          resolveCallerKey: (did) => (did === user.did ? user.publicKey : did === assistant.did ? assistant.publicKey : null),
          handler: async function* ({ guard, message }) {
            await guard("read_inbox", { reversible: true })
            yield "read. "
            await guard("send_email", { description: `send ${JSON.stringify(message)}` })
            sent.push(message)
            yield "sent."
          }
        })
        const mandate = (yield* issueTaskMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { allowed: ["read_inbox", "send_email"], humanGates: ["send_email"], actionLimits: { read_inbox: 1, send_email: 2 }, maxDelegationDepth: 0 }
        })).token
        const paused = yield* post(`${a.url}/v1/run`, { message: "first", sessionId: "s1", mandate })
        assert.strictEqual(paused.status, 202, JSON.stringify(paused.body))
        const taskId: string = paused.body.approvalRequired.taskId
        const approval = yield* signApproval({ taskId, capability: "send_email", decision: "approve" }, user.did, user.privateKey)
        const resumed = yield* post(`${b.url}/v1/resume`, { taskId, approval })
        assert.strictEqual(resumed.status, 200, JSON.stringify(resumed.body))
        assert.deepStrictEqual(resumed.body, { message: "read. sent.", sessionId: "s1" })
        const again = yield* post(`${a.url}/v1/resume`, { taskId, approval })
        assert.strictEqual(again.body.code, "TASK_ALREADY_RESUMED")

        // Paused on B, resumed on both at once.
        const mandate2 = (yield* issueTaskMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { allowed: ["read_inbox", "send_email"], humanGates: ["send_email"], actionLimits: { read_inbox: 1, send_email: 1 }, maxDelegationDepth: 0 }
        })).token
        const paused2 = yield* post(`${b.url}/v1/run`, { message: "second", mandate: mandate2 })
        const taskId2: string = paused2.body.approvalRequired.taskId
        const approval2 = yield* signApproval({ taskId: taskId2, capability: "send_email", decision: "approve" }, user.did, user.privateKey)
        const both = yield* Effect.all([post(`${a.url}/v1/resume`, { taskId: taskId2, approval: approval2 }), post(`${b.url}/v1/resume`, { taskId: taskId2, approval: approval2 })], {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(both.map((r) => r.status).sort(), [200, 409])
        assert.deepStrictEqual(sent, ["first", "second"])
      })
    ))
})
