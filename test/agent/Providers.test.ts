/**
 * How an agent server chooses its model provider: a provider, the settings of an OpenAI-compatible server or of
 * Anthropic's Messages API, or a name whose settings come from the environment.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { startFakeAnthropic } from "../support/fakeAnthropic.js"
import { startFakeOpenAi } from "../support/fakeOpenAi.js"
import { post, readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const env = (entries: ReadonlyArray<readonly [string, string]>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(entries)))

const KEY = "sk-ant-agent-test"

describe("agent server providers", () => {
  it.live("an Anthropic provider from its settings: plain and streamed replies, provider failures as 502 codes", () =>
    provide(
      Effect.gen(function* () {
        const fake = yield* startFakeAnthropic({ apiKey: KEY })
        const agent = yield* AgentServer.make({
          name: "claude",
          provider: { type: "anthropic", baseUrl: fake.url, apiKey: KEY },
          model: "claude-test",
          systemPrompt: "Be brief.",
          database: ":memory:"
        })
        const r = yield* post(`${agent.url}/v1/run`, { message: "ping" })
        assert.deepInclude(r.body, { message: "You said: ping" })
        assert.deepInclude(fake.requests[0]?.body, { model: "claude-test", system: "Be brief.", max_tokens: 4096 })
        const s = yield* readSse(`${agent.url}/v1/run`, { message: "stream me" })
        assert.strictEqual(s.events.filter((e) => e.event === "chunk").map((e) => e.data.text).join(""), "You said: stream me")
        yield* fake.setMode("rate-limited")
        const limited = yield* post(`${agent.url}/v1/run`, { message: "ping" })
        assert.strictEqual(limited.status, 502)
        assert.strictEqual(limited.body.code, "PROVIDER_RATE_LIMITED")
        assert.strictEqual(limited.body.retryAfterSeconds, 7)
        assert.notInclude(JSON.stringify(limited.body), KEY)
      })
    ))

  it.live(`provider "anthropic" takes its key and root from ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL`, () =>
    provide(
      Effect.gen(function* () {
        const fake = yield* startFakeAnthropic({ apiKey: KEY })
        const agent = yield* AgentServer.make({ name: "claude", provider: "anthropic", model: "claude-test", database: ":memory:" }).pipe(
          env([["ANTHROPIC_API_KEY", KEY], ["ANTHROPIC_BASE_URL", fake.url]])
        )
        const r = yield* post(`${agent.url}/v1/run`, { message: "from the environment" })
        assert.deepInclude(r.body, { message: "You said: from the environment" })
        assert.strictEqual(fake.requests[0]?.headers["x-api-key"], KEY)
      })
    ))

  it.live(`provider "openai" takes OPENAI_API_KEY and OPENAI_BASE_URL`, () =>
    provide(
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAi({ apiKey: "sk-openai-test" })
        const agent = yield* AgentServer.make({ name: "gpt", provider: "openai", model: "gpt-test", database: ":memory:" }).pipe(
          env([["OPENAI_API_KEY", "sk-openai-test"], ["OPENAI_BASE_URL", fake.url]])
        )
        const r = yield* post(`${agent.url}/v1/run`, { message: "hello" })
        assert.deepInclude(r.body, { message: "You said: hello" })
        assert.strictEqual(fake.requests[0]?.headers.authorization, "Bearer sk-openai-test")
      })
    ))

  it.live("a provider that cannot be set up fails at start with INVALID_CONFIG: no ANTHROPIC_API_KEY, an unknown name, a bad maxOutputTokens", () =>
    provide(
      Effect.gen(function* () {
        const noKey = yield* Effect.flip(AgentServer.make({ name: "claude", provider: "anthropic", model: "m", database: ":memory:" }).pipe(env([])))
        assert(noKey._tag === "AgentConfigError")
        assert.include(noKey.message, "ANTHROPIC_API_KEY")
        const unknown = yield* Effect.flip(AgentServer.make({ name: "x", provider: "mistral" as "openai", model: "m", database: ":memory:" }))
        assert(unknown._tag === "AgentConfigError")
        assert.include(unknown.message, "mistral")
        const bound = yield* Effect.flip(AgentServer.make({ name: "x", provider: "openai", model: "m", maxOutputTokens: 0, database: ":memory:" }))
        assert(bound._tag === "AgentConfigError")
        assert.include(bound.message, "maxOutputTokens")
      })
    ))
})
