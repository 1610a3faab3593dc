/**
 * The LLM chat agent charges every model call to the presented task mandate's `computeLimit`: a reservation
 * (prompt estimate + maxTokens) before the provider is asked, settled with the usage the provider reported.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as AgentServer from "../../src/agent/AgentServer.js"
import type { TaskConstraints } from "../../src/core/Constraints.js"
import { generateDid } from "../../src/core/Did.js"
import { issueModelBudgetMandate, issueTaskMandate } from "../../src/core/Mandate.js"
import { type ChatRequest, makeScripted, ModelError, type ModelProviderApi } from "../../src/core/ModelProvider.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { post, readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A user granting a chat agent a task mandate; the agent answers every call with a set usage. */
const setup = (options: {
  readonly provider: ModelProviderApi
  readonly maxOutputTokens?: number
  readonly constraints?: Partial<TaskConstraints>
}) =>
  Effect.gen(function* () {
    const user = yield* generateDid("user")
    const assistant = yield* generateDid("assistant")
    const agent = yield* AgentServer.make({
      name: "assistant",
      did: assistant.did,
      privateKey: assistant.privateKey,
      database: ":memory:",
      provider: options.provider,
      model: "m1",
      ...(options.maxOutputTokens === undefined ? {} : { maxOutputTokens: options.maxOutputTokens }),
      resolveCallerKey: (did) => (did === user.did ? user.publicKey : did === assistant.did ? assistant.publicKey : null)
    })
    const issue = (constraints: Partial<TaskConstraints>) =>
      Effect.map(
        issueTaskMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { allowed: [], maxDelegationDepth: 0, ...constraints }
        }),
        (m) => m.token
      )
    return { agent, user, assistant, mandate: yield* issue(options.constraints ?? { computeLimit: { llmTokens: 1000 } }), issue }
  })

/** A plain run. */
const run = (url: string, body: Record<string, unknown>) => post(`${url}/v1/run`, body)

describe("compute limits of the LLM chat agent", () => {
  it.live("charges accumulate across calls, plain and streamed; the call that no longer fits is refused before the provider is asked", () =>
    provide(
      Effect.gen(function* () {
        // Each call reserves 1 (the prompt "hi") + 300 and spends 100: 7 fit in 1000, not 10 and not 3.
        const provider = makeScripted([{ text: "fine thanks", inputTokens: 40, outputTokens: 60 }])
        const { agent, mandate } = yield* setup({ provider, maxOutputTokens: 300 })
        for (let i = 0; i < 4; i++) assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).status, 200)
        for (let i = 0; i < 3; i++) {
          const s = yield* readSse(`${agent.url}/v1/run`, { message: "hi", mandate })
          assert.strictEqual(s.events.at(-1)?.event, "done", JSON.stringify(s.events.at(-1)))
        }
        assert.strictEqual(provider.requests.length, 7)
        assert.strictEqual(provider.requests[0]?.maxTokens, 300)

        const refused = yield* run(agent.url, { message: "hi", mandate })
        assert.strictEqual(refused.status, 403)
        assert.strictEqual(refused.body.code, "COMPUTE_LIMIT_EXCEEDED")
        const streamed = yield* readSse(`${agent.url}/v1/run`, { message: "hi", mandate })
        const code = streamed.events.length > 0 ? streamed.events.at(-1)?.data.code : streamed.body.code
        assert.strictEqual(code, "COMPUTE_LIMIT_EXCEEDED")
        assert.deepStrictEqual(streamed.events.filter((e) => e.event === "chunk"), [])
        assert.strictEqual(provider.requests.length, 7)
      })
    ))

  it.live("a call is charged what it reported, not what it reserved; a call whose reported usage overruns its reservation is charged up to the limit", () =>
    provide(
      Effect.gen(function* () {
        const provider = makeScripted((_request, index) =>
          index < 3 ? { text: "x", inputTokens: 0, outputTokens: 0 } : { text: "way too long", inputTokens: 10, outputTokens: 5000 }
        )
        const { agent, mandate } = yield* setup({ provider, maxOutputTokens: 300 })
        // Three calls report no usage at all: their reservations all go back.
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).status, 200)
        // This one reports 5010 tokens: more than reserved and more than the limit; the counter stops at the limit.
        assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).status, 200)
        const refused = yield* run(agent.url, { message: "hi", mandate })
        assert.strictEqual(refused.body.code, "COMPUTE_LIMIT_EXCEEDED")
        assert.strictEqual(provider.requests.length, 4)
      })
    ))

  it.live("a provider without streamEvents is settled from estimates: prompt and answer at 4 characters a token", () =>
    provide(
      Effect.gen(function* () {
        const scripted = makeScripted(["fine thanks"])
        const provider: ModelProviderApi = { name: scripted.name, chat: scripted.chat, stream: scripted.stream }
        // Reserves 1 + 300 against 310 and spends 1 + 3 ("fine thanks"): three calls fit, the fourth does not.
        const { agent, mandate } = yield* setup({ provider, maxOutputTokens: 300, constraints: { computeLimit: { llmTokens: 310 } } })
        for (let i = 0; i < 3; i++) {
          const s = yield* readSse(`${agent.url}/v1/run`, { message: "hi", mandate })
          assert.strictEqual(s.events.at(-1)?.event, "done", JSON.stringify(s.events.at(-1)))
        }
        const refused = yield* readSse(`${agent.url}/v1/run`, { message: "hi", mandate })
        assert.strictEqual(refused.events.length > 0 ? refused.events.at(-1)?.data.code : refused.body.code, "COMPUTE_LIMIT_EXCEEDED")
        assert.strictEqual(scripted.requests.length, 3)
      })
    ))

  it.live("a provider failure gives the reservation back", () =>
    provide(
      Effect.gen(function* () {
        const limited = new ModelError({ code: "PROVIDER_RATE_LIMITED", message: "slow down", retryAfterSeconds: 1 })
        // Reservations of 301 against 1000: without the give-back, the fourth call would be refused.
        const provider = makeScripted([limited, limited, limited, { text: "ok", inputTokens: 1, outputTokens: 1 }])
        const { agent, mandate } = yield* setup({ provider, maxOutputTokens: 300 })
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).body.code, "PROVIDER_RATE_LIMITED")
        const s = yield* readSse(`${agent.url}/v1/run`, { message: "hi", mandate })
        assert.strictEqual(s.events.at(-1)?.event, "done")
        assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).status, 200)
      })
    ))

  it.live("concurrent calls never exceed the limit: reservations are taken before any provider call", () =>
    provide(
      Effect.gen(function* () {
        const arrived: Array<ChatRequest> = []
        const open = yield* Deferred.make<void>()
        const fourIn = yield* Deferred.make<void>()
        const scripted = makeScripted([{ text: "done", inputTokens: 80, outputTokens: 100 }])
        // Holds every call until the test opens the gate, so all reservations overlap.
        const provider: ModelProviderApi = {
          ...scripted,
          chat: (request) =>
            Effect.zipRight(
              Effect.zipRight(
                Effect.sync(() => {
                  arrived.push(request)
                  if (arrived.length === 4) Deferred.unsafeDone(fourIn, Effect.void)
                }),
                Deferred.await(open)
              ),
              scripted.chat(request)
            )
        }
        // Each reserves 1 + 200 = 201 against 1000: four at once, the fifth does not fit while they are out.
        const { agent, mandate } = yield* setup({ provider, maxOutputTokens: 200 })
        const finished = { refused: 0 }
        const allRefused = yield* Deferred.make<void>()
        const fibers = yield* Effect.forEach(Array.from({ length: 20 }), () =>
          Effect.fork(
            Effect.tap(run(agent.url, { message: "hi", mandate }), (r) =>
              Effect.sync(() => {
                if (r.status === 403 && ++finished.refused === 16) Deferred.unsafeDone(allRefused, Effect.void)
              })
            )
          )
        )
        yield* Deferred.await(fourIn)
        yield* Deferred.await(allRefused)
        yield* Deferred.succeed(open, undefined)
        const results = yield* Effect.forEach(fibers, Fiber.join)
        const ok = results.filter((r) => r.status === 200)
        const refused = results.filter((r) => r.status === 403)
        assert.strictEqual(ok.length, 4)
        assert.strictEqual(refused.length, 16)
        for (const r of refused) assert.strictEqual(r.body.code, "COMPUTE_LIMIT_EXCEEDED")
        assert.strictEqual(arrived.length, 4)
        // Settled at 180 each (720 of 1000): one more reservation of 201 fits, then none.
        assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).status, 200)
        assert.strictEqual((yield* run(agent.url, { message: "hi", mandate })).body.code, "COMPUTE_LIMIT_EXCEEDED")
        assert.strictEqual(arrived.length, 5)
      })
    ))

  it.live("no mandate, no charge: calls carry no maxTokens and are never refused; a mandate without a token limit charges nothing", () =>
    provide(
      Effect.gen(function* () {
        const provider = makeScripted([{ text: "free", inputTokens: 10_000, outputTokens: 10_000 }])
        const { agent, issue } = yield* setup({ provider })
        for (let i = 0; i < 5; i++) assert.strictEqual((yield* run(agent.url, { message: "hi" })).status, 200)
        assert.isUndefined(provider.requests[0]?.maxTokens)
        const unlimited = yield* issue({ computeLimit: { webRequests: 3 } })
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* run(agent.url, { message: "hi", mandate: unlimited })).status, 200)
        // Under a mandate the answer is bounded, by the default when the agent sets none.
        assert.strictEqual(provider.requests.at(-1)?.maxTokens, 1024)
      })
    ))

  it.live("a mandate that does not verify for this agent refuses the call before the provider is asked", () =>
    provide(
      Effect.gen(function* () {
        const provider = makeScripted(["never"])
        const { agent, user } = yield* setup({ provider })
        const stranger = yield* generateDid("stranger")
        const elsewhere = yield* issueTaskMandate({
          grantorDid: user.did,
          granteeDid: stranger.did,
          privateKey: user.privateKey,
          constraints: { allowed: [], computeLimit: { llmTokens: 1000 }, maxDelegationDepth: 0 }
        })
        const refused = yield* run(agent.url, { message: "hi", mandate: elsewhere.token })
        assert.strictEqual(refused.status, 403)
        assert.strictEqual(refused.body.code, "MANDATE_INVALID")
        assert.strictEqual(provider.requests.length, 0)
      })
    ))

  it.live("a routed escalation is charged too: each model the router asks is a call against computeLimit", () =>
    provide(
      Effect.gen(function* () {
        const user = yield* generateDid("user")
        const assistant = yield* generateDid("assistant")
        // mini hedges (scored below the bar), frontier answers; each reports 100 tokens.
        const provider = makeScripted((r) =>
          r.model === "mini" ? { text: "I'm not sure.", inputTokens: 40, outputTokens: 60 } : { text: "Because of Rayleigh scattering.", inputTokens: 40, outputTokens: 60 }
        )
        const model = { provider: "local", contextWindow: 8192, maxOutputTokens: 64 }
        const agent = yield* AgentServer.make({
          name: "assistant",
          did: assistant.did,
          privateKey: assistant.privateKey,
          database: ":memory:",
          provider,
          catalogue: {
            models: [
              { id: "mini", tier: 1, inputUsdPerMTok: 1, outputUsdPerMTok: 2, ...model },
              { id: "frontier", tier: 2, inputUsdPerMTok: 10, outputUsdPerMTok: 20, ...model }
            ]
          },
          resolveCallerKey: (did) => (did === user.did ? user.publicKey : null)
        })
        const grant = { grantorDid: user.did, granteeDid: assistant.did, privateKey: user.privateKey }
        // 250 tokens: the first run's two calls spend 200, so the next run's first reservation (prompt + 64) no longer fits.
        const mandate = (yield* issueTaskMandate({ ...grant, constraints: { allowed: [], maxDelegationDepth: 0, computeLimit: { llmTokens: 250 } } })).token
        // A share (250 µUSD) below frontier's least call (16 output tokens alone cost 320 µUSD): mini first whatever
        // the THOMPSON draw, then frontier.
        const budget = (yield* issueModelBudgetMandate({
          ...grant,
          constraints: { token_budget: 10_000, cost_budget_usd: 0.002, quality_threshold: 0.7, task_type: "REASONING", expected_steps: 8 }
        })).token
        const first = yield* run(agent.url, { message: "why is the sky blue?", mandate, context: { modelBudgetMandate: budget } })
        assert.strictEqual(first.status, 200)
        assert.deepStrictEqual(provider.requests.map((q) => q.model), ["mini", "frontier"])
        const second = yield* run(agent.url, { message: "why is the sky blue?", mandate, context: { modelBudgetMandate: budget } })
        assert.strictEqual(second.status, 403)
        assert.strictEqual(second.body.code, "COMPUTE_LIMIT_EXCEEDED")
        assert.strictEqual(provider.requests.length, 2)
      })
    ))
})
