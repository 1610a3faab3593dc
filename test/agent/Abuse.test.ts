/**
 * Abuse resistance of an agent server: a task mandate and a model-budget mandate are each bound to their presenter
 * under mesh-sig, an authentic but unwelcome caller cannot fill the nonce store, and one caller cannot take another's
 * share of it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { issueModelBudgetMandate, issueTaskMandate } from "../../src/core/Mandate.js"
import { makeScripted } from "../../src/core/ModelProvider.js"
import { MANDATE_CONTEXT_KEY } from "../../src/agent/RoutedChat.js"
import { makeMemory } from "../../src/core/NonceStore.js"
import { post } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** POSTs `body` to /v1/run signed with mesh-sig as `as`. */
const signedPost = (url: string, as: MeshIdentity, body: unknown, extra: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const bytes = new TextEncoder().encode(JSON.stringify(body))
    const headers = yield* signRequest({ method: "POST", url: `${url}/v1/run`, body: bytes }, { privateKey: as.privateKey, keyId: verificationMethodId(as.did) })
    return yield* post(`${url}/v1/run`, new TextDecoder().decode(bytes), { ...headers, ...extra })
  })

const keyring = (ids: ReadonlyArray<MeshIdentity>) => (did: string) => ids.find((i) => i.did === did)?.publicKey ?? null

describe("agent server abuse resistance", () => {
  it.live("mesh-sig: a task mandate presented by anyone but its grantor is 403 MANDATE_GRANTOR_MISMATCH before the handler runs", () =>
    provide(
      Effect.gen(function* () {
        const user = yield* generateDid("user")
        const mallory = yield* generateDid("mallory")
        const assistant = yield* generateDid("assistant")
        let ran = 0
        const agent = yield* AgentServer.make({
          name: "assistant",
          did: assistant.did,
          privateKey: assistant.privateKey,
          auth: "mesh-sig",
          database: ":memory:",
          resolveCallerKey: keyring([user, mallory, assistant]),
          handler: async ({ guard }) => {
            ran++
            await guard("read_inbox", { reversible: true })
            return "read"
          }
        })
        const { token } = yield* issueTaskMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { allowed: ["read_inbox"], maxDelegationDepth: 0 }
        })
        const stolen = yield* signedPost(agent.url, mallory, { message: "read", mandate: token })
        assert.strictEqual(stolen.status, 403)
        assert.strictEqual(stolen.body.code, "MANDATE_GRANTOR_MISMATCH")
        assert.strictEqual(ran, 0)

        const own = yield* signedPost(agent.url, user, { message: "read", mandate: token })
        assert.strictEqual(own.status, 200, JSON.stringify(own.body))
        assert.strictEqual(own.body.message, "read")
        assert.strictEqual(ran, 1)
      })
    ))

  it.live("mesh-sig: a model-budget mandate presented by anyone but its grantor is 403 MANDATE_GRANTOR_MISMATCH before a model is asked", () =>
    provide(
      Effect.gen(function* () {
        const user = yield* generateDid("user")
        const mallory = yield* generateDid("mallory")
        const assistant = yield* generateDid("assistant")
        const provider = makeScripted(() => "an answer")
        const agent = yield* AgentServer.make({
          name: "assistant",
          did: assistant.did,
          privateKey: assistant.privateKey,
          auth: "mesh-sig",
          database: ":memory:",
          provider,
          catalogue: { models: [{ id: "m", provider: "local", tier: 1, inputUsdPerMTok: 1, outputUsdPerMTok: 2, contextWindow: 8192, maxOutputTokens: 64 }] },
          resolveCallerKey: keyring([user, mallory, assistant])
        })
        const { token } = yield* issueModelBudgetMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { token_budget: 10_000, cost_budget_usd: 1, quality_threshold: 0, task_type: "REASONING", expected_steps: 1 }
        })
        const body = { message: "spend the user's budget", context: { [MANDATE_CONTEXT_KEY]: token } }
        const stolen = yield* signedPost(agent.url, mallory, body)
        assert.strictEqual(stolen.status, 403, JSON.stringify(stolen.body))
        assert.strictEqual(stolen.body.code, "MANDATE_GRANTOR_MISMATCH")
        // A streamed run with a mandate is answered whole: the refusal is its error event.
        const streamed = yield* signedPost(agent.url, mallory, body, { accept: "text/event-stream" })
        assert.include(String(streamed.body.text), `"code":"MANDATE_GRANTOR_MISMATCH"`)
        assert.strictEqual(provider.requests.length, 0)

        const own = yield* signedPost(agent.url, user, body)
        assert.strictEqual(own.status, 200, JSON.stringify(own.body))
        assert.strictEqual(own.body.message, "an answer")
        assert.strictEqual(provider.requests.length, 1)
      })
    ))

  it.live("a validly signing caller that is not allowed cannot fill the nonce store: its requests are 403 and record nothing", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const flooder = yield* generateDid("flooder")
        const capacity = 8
        const nonceStore = makeMemory({ capacity })
        const agent = yield* AgentServer.make({
          name: "guarded",
          handler: () => "ok",
          auth: "mesh-sig",
          database: ":memory:",
          allowedCallers: [alice.did],
          nonceStore,
          resolveCallerKey: keyring([alice, flooder])
        })
        const statuses = new Set<string>()
        for (let i = 0; i < capacity + 10; i++) {
          const r = yield* signedPost(agent.url, flooder, { message: `flood ${i}` })
          statuses.add(`${r.status} ${r.body.code}`)
        }
        const recorded = nonceStore.size()
        const after = yield* signedPost(agent.url, alice, { message: "hello" })
        assert.strictEqual(`${after.status} ${after.body.code ?? ""}`, "200 ")
        assert.deepStrictEqual([...statuses], ["403 CALLER_NOT_ALLOWED"])
        assert.strictEqual(recorded, 0)
        assert.strictEqual(nonceStore.size(), 1)
      })
    ))

  it.live("an allowed caller past its nonce quota gets 429 NONCE_QUOTA_EXCEEDED; other callers still get through", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const carol = yield* generateDid("carol")
        const nonceStore = makeMemory({ capacity: 8, perSenderQuota: 3 })
        const agent = yield* AgentServer.make({
          name: "quota",
          handler: () => "ok",
          auth: "mesh-sig",
          database: ":memory:",
          nonceStore,
          resolveCallerKey: keyring([alice, carol])
        })
        const codes: Array<number> = []
        for (let i = 0; i < 8; i++) codes.push((yield* signedPost(agent.url, alice, { message: `m${i}` })).status)
        assert.deepStrictEqual(codes, [200, 200, 200, 429, 429, 429, 429, 429])
        const over = yield* signedPost(agent.url, alice, { message: "again" })
        assert.strictEqual(over.body.code, "NONCE_QUOTA_EXCEEDED")
        // Until alice's first signature (60 s, plus the 30 s tolerance) expires.
        const retry = Number(over.headers.get("retry-after"))
        assert.isAtLeast(retry, 85)
        assert.isAtMost(retry, 90)
        assert.strictEqual(over.body.retryAfterSeconds, retry)
        assert.strictEqual(nonceStore.size(), 3)
        const other = yield* signedPost(agent.url, carol, { message: "hi" })
        assert.strictEqual(other.status, 200, JSON.stringify(other.body))
      })
    ))
})
