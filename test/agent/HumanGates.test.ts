import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid, type MeshIdentity } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import { post, readSse, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A user who grants, an assistant agent that acts, and a stranger. */
const parties = Effect.all({ user: generateDid("user"), assistant: generateDid("assistant"), mallory: generateDid("mallory") })

/** The assistant reads the inbox (once at most), then sends an email only a human may approve. */
const setup = (database = ":memory:") =>
  Effect.gen(function* () {
    const p = yield* parties
    const sent: Array<string> = []
    const options: AgentServer.AgentServerOptions = {
      name: "assistant",
      did: p.assistant.did,
      privateKey: p.assistant.privateKey,
      database,
      resolveCallerKey: (did) => (did === p.user.did ? p.user.publicKey : did === p.assistant.did ? p.assistant.publicKey : null),
      handler: async function* ({ guard, message }) {
        await guard("read_inbox", { reversible: true })
        yield "read. "
        await guard("send_email", { description: `send ${JSON.stringify(message)} to bob` })
        sent.push(message)
        yield "sent."
      }
    }
    const mandate = Effect.map(
      issueTaskMandate({
        grantorDid: p.user.did,
        granteeDid: p.assistant.did,
        privateKey: p.user.privateKey,
        constraints: { allowed: ["read_inbox", "send_email"], humanGates: ["send_email"], actionLimits: { read_inbox: 1, send_email: 1 }, maxDelegationDepth: 0 }
      }),
      (m) => m.token
    )
    return { ...p, sent, options, mandate }
  })

/** The assistant started on `setup`, and a run of `message` under the mandate, paused at the email gate. */
const pausedRun = (message: string) =>
  Effect.gen(function* () {
    const s = yield* setup()
    const agent = yield* AgentServer.make(s.options)
    const paused = yield* post(`${agent.url}/v1/run`, { message, mandate: yield* s.mandate })
    const taskId: string = paused.body.approvalRequired.taskId
    return { s, agent, taskId }
  })

const approve = (by: MeshIdentity, taskId: string, capability = "send_email", decision: "approve" | "deny" = "approve") =>
  signApproval({ taskId, capability, decision }, by.did, by.privateKey)

describe("human gates", () => {
  it.live("a gated action pauses the task; a grantor-signed approval resumes it exactly once, without charging earlier actions again", () =>
    provide(
      Effect.gen(function* () {
        const s = yield* setup()
        const agent = yield* AgentServer.make(s.options)
        const paused = yield* post(`${agent.url}/v1/run`, { message: "lunch at noon?", sessionId: "s1", mandate: yield* s.mandate })
        assert.strictEqual(paused.status, 202, JSON.stringify(paused.body))
        const asked = paused.body.approvalRequired
        assert.strictEqual(paused.body.status, "approval_required")
        assert.strictEqual(asked.capability, "send_email")
        assert.strictEqual(asked.grantor, s.user.did)
        assert.isString(asked.mandateJti)
        assert.strictEqual(asked.asked.description, 'send "lunch at noon?" to bob')
        assert.isFalse(asked.asked.reversible)
        assert.deepStrictEqual(s.sent, [])

        const approval = yield* approve(s.user, asked.taskId)
        const resumed = yield* post(`${agent.url}/v1/resume`, { taskId: asked.taskId, approval })
        assert.strictEqual(resumed.status, 200, JSON.stringify(resumed.body))
        // read_inbox has a limit of 1: the replayed guard call did not charge it again.
        assert.deepStrictEqual(resumed.body, { message: "read. sent.", sessionId: "s1" })
        assert.deepStrictEqual(s.sent, ["lunch at noon?"])

        const again = yield* post(`${agent.url}/v1/resume`, { taskId: asked.taskId, approval })
        assert.strictEqual(again.status, 409)
        assert.strictEqual(again.body.code, "TASK_ALREADY_RESUMED")
        assert.deepStrictEqual(s.sent, ["lunch at noon?"])
        const unknown = yield* post(`${agent.url}/v1/resume`, { taskId: "task_nope", approval })
        assert.strictEqual(unknown.status, 404)
        assert.strictEqual(unknown.body.code, "TASK_NOT_FOUND")
      })
    ))

  it.live("unsigned, forged, wrong-signer, mismatched and expired approvals are refused and leave the task paused", () =>
    provide(
      Effect.gen(function* () {
        const { s, agent, taskId } = yield* pausedRun("hi")
        const good = yield* approve(s.user, taskId)
        const now = yield* Clock.currentTimeMillis
        // Signed two hours ago, for 15 minutes (on a clock of its own, so this test's clock stays real).
        const expired = yield* Effect.promise(() =>
          Effect.runPromise(
            Effect.gen(function* () {
              yield* TestClock.setTime(now - 2 * 3600_000)
              return yield* signApproval({ taskId, capability: "send_email", ttlSeconds: 900 }, s.user.did, s.user.privateKey)
            }).pipe(Effect.provide(TestContext.TestContext), Effect.provide(KeysNative.layer))
          )
        )
        const forged = { ...(yield* approve(s.mallory, taskId)), proof: { ...(yield* approve(s.mallory, taskId)).proof, verificationMethod: `${s.user.did}#key-1` } }
        const cases: ReadonlyArray<readonly [string, unknown]> = [
          ["APPROVAL_UNSIGNED", { type: "MeshApproval", taskId, capability: "send_email", decision: "approve", expiresAt: good.expiresAt }],
          ["APPROVAL_INVALID", forged],
          ["APPROVAL_WRONG_SIGNER", yield* approve(s.assistant, taskId)],
          ["APPROVAL_MISMATCH", yield* approve(s.user, "task_other")],
          ["APPROVAL_MISMATCH", yield* approve(s.user, taskId, "read_inbox")],
          ["APPROVAL_INVALID", { ...good, decision: "deny" }],
          ["APPROVAL_EXPIRED", expired],
          ["APPROVAL_MALFORMED", "yes please"]
        ]
        for (const [code, approval] of cases) {
          const r = yield* post(`${agent.url}/v1/resume`, { taskId, approval })
          assert.strictEqual(r.status, 403, `${code}: ${JSON.stringify(r.body)}`)
          assert.strictEqual(r.body.code, code, JSON.stringify(approval))
        }
        assert.deepStrictEqual(s.sent, [])
        assert.strictEqual((yield* post(`${agent.url}/v1/resume`, { taskId, approval: good })).status, 200)
      })
    ))

  it.live("a signed denial ends the task with HUMAN_GATE_DENIED; without a mandate a guarded action is MANDATE_REQUIRED", () =>
    provide(
      Effect.gen(function* () {
        const { s, agent, taskId } = yield* pausedRun("hi")
        const denied = yield* post(`${agent.url}/v1/resume`, { taskId, approval: yield* approve(s.user, taskId, "send_email", "deny") })
        assert.strictEqual(denied.status, 403)
        assert.strictEqual(denied.body.code, "HUMAN_GATE_DENIED")
        assert.deepStrictEqual(s.sent, [])
        const late = yield* post(`${agent.url}/v1/resume`, { taskId, approval: yield* approve(s.user, taskId) })
        assert.strictEqual(late.body.code, "TASK_ALREADY_RESUMED")

        const none = yield* post(`${agent.url}/v1/run`, { message: "hi" })
        assert.strictEqual(none.status, 403)
        assert.strictEqual(none.body.code, "MANDATE_REQUIRED")
      })
    ))

  it.live("concurrent resumes with valid approvals: exactly one wins", () =>
    provide(
      Effect.gen(function* () {
        const { s, agent, taskId } = yield* pausedRun("once")
        const approvals = yield* Effect.all(Array.from({ length: 6 }, () => approve(s.user, taskId)))
        const results = yield* Effect.all(approvals.map((approval) => post(`${agent.url}/v1/resume`, { taskId, approval })), { concurrency: "unbounded" })
        assert.deepStrictEqual(results.map((r) => r.status).sort(), [200, 409, 409, 409, 409, 409])
        assert.deepStrictEqual(s.sent, ["once"])
      })
    ))

  it.live("streamed: chunks before the gate, then approval_required; the resumed stream sends only what is new", () =>
    provide(
      Effect.gen(function* () {
        const s = yield* setup()
        const agent = yield* AgentServer.make(s.options)
        const first = yield* readSse(`${agent.url}/v1/run`, { message: "hi", sessionId: "s", mandate: yield* s.mandate })
        assert.deepStrictEqual(first.events.map((e) => e.event), ["chunk", "approval_required"])
        assert.strictEqual(first.events[0]!.data.text, "read. ")
        const taskId: string = first.events[1]!.data.approvalRequired.taskId
        const second = yield* readSse(`${agent.url}/v1/resume`, { taskId, approval: yield* approve(s.user, taskId) })
        assert.deepStrictEqual(second.events.map((e) => e.event), ["chunk", "done"])
        assert.strictEqual(second.events[0]!.data.text, "sent.")
        assert.deepStrictEqual(second.events[1]!.data, { message: "read. sent.", sessionId: "s" })
      })
    ))

  it.live("a paused task survives a restart of the server", () =>
    provide(
      Effect.gen(function* () {
        const s = yield* setup(tempDatabase())
        const taskId = yield* Effect.scoped(
          Effect.gen(function* () {
            const agent = yield* AgentServer.make(s.options)
            const paused = yield* post(`${agent.url}/v1/run`, { message: "after restart", mandate: yield* s.mandate })
            return paused.body.approvalRequired.taskId as string
          })
        )
        const agent = yield* AgentServer.make(s.options)
        const resumed = yield* post(`${agent.url}/v1/resume`, { taskId, approval: yield* approve(s.user, taskId) })
        assert.strictEqual(resumed.status, 200, JSON.stringify(resumed.body))
        assert.strictEqual(resumed.body.message, "read. sent.")
        assert.deepStrictEqual(s.sent, ["after restart"])
      })
    ))
})
