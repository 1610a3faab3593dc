import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { signApproval } from "../../src/core/Approval.js"
import { digestResult, verify } from "../../src/core/CommitToken.js"
import { generateDid } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import { fromBase64 } from "../../src/core/internal/bytes.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { post, readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const SEED = new Uint8Array(32).fill(7)

describe("commit tokens on /v1/run", () => {
  it.live("a run asking for a commit gets a token signed by the agent over the step, its capability, amount and result", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "flights",
          did: "did:mesh:flights",
          privateKey: SEED,
          capabilities: ["book-flight", "cancel-flight"],
          database: ":memory:",
          handler: ({ capability, commit, message }) => `${capability} for ${commit?.sagaId}/${commit?.step}: ${message}`
        })
        const r = yield* post(`${agent.url}/v1/run`, {
          message: "LH123",
          capability: "book-flight",
          commit: { sagaId: "saga_1", step: "flight", amountUsd: "250.50" }
        })
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.body.message, "book-flight for saga_1/flight: LH123")
        const receipt = yield* verify(r.body.commitToken, fromBase64(agent.publicKeyB64))
        assert.deepInclude(receipt, { sagaId: "saga_1", step: "flight", capability: "book-flight", amountUsd: "250.5", issuer: "did:mesh:flights" })
        assert.strictEqual(receipt.resultDigest, yield* digestResult(r.body.message))
        assert.match(receipt.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      })
    ))

  it.live("the amount is what the handler reports; without a report and a budget it is 0", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "hotel",
          capabilities: ["book-hotel"],
          database: ":memory:",
          handler: ({ message, reportCost }) => {
            if (message === "charge") reportCost(99.99)
            return "ok"
          }
        })
        const key = fromBase64(agent.publicKeyB64)
        const reported = yield* post(`${agent.url}/v1/run`, { message: "charge", commit: { sagaId: "s", step: "hotel", amountUsd: "120" } })
        assert.strictEqual((yield* verify(reported.body.commitToken, key)).amountUsd, "99.99")
        assert.strictEqual((yield* verify(reported.body.commitToken, key)).capability, "book-hotel", "the only declared capability")
        const budgetOnly = yield* post(`${agent.url}/v1/run`, { message: "free", commit: { sagaId: "s", step: "hotel", amountUsd: "120" } })
        assert.strictEqual((yield* verify(budgetOnly.body.commitToken, key)).amountUsd, "120")
        const none = yield* post(`${agent.url}/v1/run`, { message: "free", commit: { sagaId: "s", step: "hotel" } })
        assert.strictEqual((yield* verify(none.body.commitToken, key)).amountUsd, "0")
      })
    ))

  it.live("a reported cost above the step's amount fails the run (500 HANDLER_FAILED) and signs nothing", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "greedy",
          capabilities: ["book-car"],
          database: ":memory:",
          handler: ({ reportCost }) => {
            reportCost("10.000001")
            return "booked"
          }
        })
        const r = yield* post(`${agent.url}/v1/run`, { message: "car", commit: { sagaId: "s", step: "car", amountUsd: "10" } })
        assert.strictEqual(r.status, 500)
        assert.strictEqual(r.body.code, "HANDLER_FAILED")
        assert.notProperty(r.body, "commitToken")
      })
    ))

  it.live("without commit there is no token; a capability the agent does not declare, or a commit with no capability to name, is 400 before the handler runs", () =>
    provide(
      Effect.gen(function* () {
        let ran = 0
        const agent = yield* AgentServer.make({
          name: "multi",
          capabilities: ["a", "b"],
          database: ":memory:",
          handler: () => {
            ran++
            return "done"
          }
        })
        const plain = yield* post(`${agent.url}/v1/run`, { message: "x" })
        assert.deepStrictEqual(Object.keys(plain.body).sort(), ["message", "sessionId"])
        const unknown = yield* post(`${agent.url}/v1/run`, { message: "x", capability: "c" })
        assert.strictEqual(unknown.status, 400)
        assert.strictEqual(unknown.body.code, "INVALID_REQUEST")
        const unnamed = yield* post(`${agent.url}/v1/run`, { message: "x", commit: { sagaId: "s", step: "one" } })
        assert.strictEqual(unnamed.status, 400)
        assert.strictEqual(unnamed.body.code, "INVALID_REQUEST")
        const badAmount = yield* post(`${agent.url}/v1/run`, { message: "x", capability: "a", commit: { sagaId: "s", step: "one", amountUsd: "-1" } })
        assert.strictEqual(badAmount.status, 400)
        assert.strictEqual(ran, 1)
      })
    ))

  it.live("a streamed run carries the token in its done event", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "streamer",
          capabilities: ["tell"],
          database: ":memory:",
          handler: async function* () {
            yield "once "
            yield "upon"
          }
        })
        const r = yield* readSse(`${agent.url}/v1/run`, { message: "go", commit: { sagaId: "s", step: "tell", amountUsd: "1" } })
        const done = r.events.at(-1)!
        assert.strictEqual(done.event, "done")
        const receipt = yield* verify(done.data.commitToken, fromBase64(agent.publicKeyB64))
        assert.strictEqual(receipt.resultDigest, yield* digestResult("once upon"))
      })
    ))

  it.live("a run paused at a human gate gets its commit token when it completes after /v1/resume", () =>
    provide(
      Effect.gen(function* () {
        const user = yield* generateDid("user")
        const assistant = yield* generateDid("assistant")
        const agent = yield* AgentServer.make({
          name: "assistant",
          did: assistant.did,
          privateKey: assistant.privateKey,
          capabilities: ["send_email"],
          database: ":memory:",
          resolveCallerKey: (did) => (did === user.did ? user.publicKey : null),
          handler: async ({ guard, reportCost }) => {
            await guard("send_email")
            reportCost("0.25")
            return "sent"
          }
        })
        const mandate = yield* issueTaskMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { allowed: ["send_email"], humanGates: ["send_email"], maxDelegationDepth: 0 }
        })
        const paused = yield* post(`${agent.url}/v1/run`, { message: "mail bob", mandate: mandate.token, commit: { sagaId: "s", step: "mail", amountUsd: "1" } })
        assert.strictEqual(paused.status, 202)
        assert.notProperty(paused.body, "commitToken")
        const taskId: string = paused.body.approvalRequired.taskId
        const approval = yield* signApproval({ taskId, capability: "send_email" }, user.did, user.privateKey)
        const resumed = yield* post(`${agent.url}/v1/resume`, { taskId, approval })
        assert.strictEqual(resumed.status, 200, JSON.stringify(resumed.body))
        const receipt = yield* verify(resumed.body.commitToken, fromBase64(agent.publicKeyB64))
        assert.deepInclude(receipt, { sagaId: "s", step: "mail", capability: "send_email", amountUsd: "0.25" })
      })
    ))
})
