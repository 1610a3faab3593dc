import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { type ChatRequest, type ChatStreamEvent, type ModelError, ModelProvider } from "../src/core/ModelProvider.js"
import * as Anthropic from "../src/model/ModelProviderAnthropic.js"
import { type FakeAnthropicMode, startFakeAnthropic } from "./support/fakeAnthropic.js"
import { providerFailureCases } from "./support/providerFailureCases.js"

const KEY = "sk-ant-test-0123456789abcdef"

const ask = (text: string, model = "claude-test"): ChatRequest => ({ model, messages: [{ role: "user", content: text }] })

const setup = (options: { readonly serverKey?: string; readonly clientKey?: string; readonly timeoutMs?: number } = {}) =>
  Effect.gen(function* () {
    const fake = yield* startFakeAnthropic(options.serverKey === undefined ? {} : { apiKey: options.serverKey })
    const provider = yield* Anthropic.make({
      baseUrl: fake.url,
      name: "fake",
      ...(options.clientKey === undefined ? {} : { apiKey: options.clientKey }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
    })
    return { fake, provider }
  })

const events = (provider: { readonly streamEvents?: (r: ChatRequest) => Stream.Stream<ChatStreamEvent, ModelError> }, request: ChatRequest) => {
  assert(provider.streamEvents !== undefined)
  return Effect.map(Stream.runCollect(provider.streamEvents(request)), Chunk.toReadonlyArray)
}

describe("ModelProviderAnthropic", () => {
  it.scoped("chats: the reply, the usage the server reported, its model and stop reason; key and version headers sent", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup({ serverKey: KEY, clientKey: KEY })
      const result = yield* provider.chat(ask("hello world"))
      assert.strictEqual(result.text, "You said: hello world")
      assert.deepStrictEqual(result.usage, { inputTokens: 2, outputTokens: 4 })
      assert.strictEqual(result.model, "claude-test")
      assert.strictEqual(result.finishReason, "end_turn")
      const [request] = fake.requests
      assert.strictEqual(request?.path, "/v1/messages")
      assert.strictEqual(request?.headers["x-api-key"], KEY)
      assert.strictEqual(request?.headers["anthropic-version"], "2023-06-01")
      assert.notProperty(request?.body, "stream")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("puts system messages in `system`, keeps the turns in order, and sends max_tokens (the default when unset)", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      const messages = [
        { role: "system", content: "You are terse." },
        { role: "user", content: "first question" },
        { role: "assistant", content: "first answer" },
        { role: "user", content: "second question" }
      ] as const
      const result = yield* provider.chat({ model: "m", messages, maxTokens: 64, temperature: 0.2 })
      assert.strictEqual(result.text, "You said: second question")
      assert.deepStrictEqual(fake.requests[0]?.body, {
        model: "m",
        max_tokens: 64,
        system: "You are terse.",
        messages: messages.slice(1),
        temperature: 0.2
      })
      yield* provider.chat(ask("no limit given"))
      assert.deepInclude(fake.requests[1]?.body, { max_tokens: 4096 })
      assert.isUndefined(fake.requests[1]?.headers["x-api-key"])
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("streams deltas that add up to the whole answer, then the usage from message_start and message_delta", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup({ serverKey: KEY, clientKey: KEY })
      const request = ask("tell me a long story please")
      const whole = yield* provider.chat(request)
      const chunks = Chunk.toReadonlyArray(yield* Stream.runCollect(provider.stream(request)))
      assert.isAbove(chunks.length, 3)
      assert.strictEqual(chunks.join(""), whole.text)
      assert.deepInclude(fake.requests[1]?.body, { stream: true })
      const all = yield* events(provider, request)
      const last = all.at(-1)
      assert(last?._tag === "Done")
      assert.deepStrictEqual(last.result, whole)
      assert.strictEqual(all.filter((e) => e._tag === "Done").length, 1)
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("skips event types and content deltas it does not know", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* fake.setMode("unknown-events")
      const all = yield* events(provider, ask("hi there"))
      const last = all.at(-1)
      assert(last?._tag === "Done")
      assert.strictEqual(last.result.text, "You said: hi there")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("counts cache reads and writes as input tokens, on chat and on stream", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* fake.setMode("cached")
      assert.deepStrictEqual((yield* provider.chat(ask("hi"))).usage, { inputTokens: 33, outputTokens: 3 })
      const last = (yield* events(provider, ask("hi"))).at(-1)
      assert(last?._tag === "Done")
      assert.deepStrictEqual(last.result.usage, { inputTokens: 33, outputTokens: 3 })
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  providerFailureCases<FakeAnthropicMode>({
    setup,
    startFake: () => startFakeAnthropic(),
    makeAt: (baseUrl, apiKey) => Anthropic.make({ baseUrl, apiKey }),
    key: KEY,
    wrongKey: "sk-ant-wrong-key-that-must-not-leak",
    statusCases: [
      ["unauthorized", "PROVIDER_AUTH", 401, "API key was refused"],
      ["rate-limited", "PROVIDER_RATE_LIMITED", 429, "rate limit"],
      ["bad-request", "PROVIDER_REJECTED", 400, "not a valid model"],
      ["server-error", "PROVIDER_UNAVAILABLE", 500, "Internal server error"],
      ["overloaded", "PROVIDER_UNAVAILABLE", 529, "Overloaded"]
    ],
    retryAfterDate: ["Wed, 01 Jan 2025 00:00:45 GMT", 45],
    streamEnd: "message_stop",
    streamError: ["event", "Overloaded mid-answer"],
    streamPiece: "event"
  })

  it.scoped("layerConfig reads the key from ANTHROPIC_API_KEY and the root from ANTHROPIC_BASE_URL", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeAnthropic({ apiKey: KEY })
      const config = ConfigProvider.fromMap(new Map([["ANTHROPIC_API_KEY", KEY], ["ANTHROPIC_BASE_URL", fake.url]]))
      const answer = yield* Effect.flatMap(ModelProvider, (p) => p.chat(ask("via config"))).pipe(
        Effect.provide(Anthropic.layerConfig().pipe(Layer.provide(FetchHttpClient.layer))),
        Effect.withConfigProvider(config)
      )
      assert.strictEqual(answer.text, "You said: via config")
      assert.strictEqual(fake.requests[0]?.headers["x-api-key"], KEY)
    })
  )

  it.effect("layerConfig without ANTHROPIC_API_KEY fails to build with a ConfigError", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Layer.build(Anthropic.layerConfig().pipe(Layer.provide(FetchHttpClient.layer))).pipe(
          Effect.scoped,
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map()))
        )
      )
      assert.include(String(error), "ANTHROPIC_API_KEY")
    })
  )
})
