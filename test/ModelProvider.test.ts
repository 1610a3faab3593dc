import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import {
  type ChatRequest,
  fromHttpStatus,
  isRetryable,
  layerScripted,
  makeScripted,
  ModelError,
  type ModelErrorCode,
  ModelProvider,
  parseRetryAfter,
  wordChunks
} from "../src/core/ModelProvider.js"
import * as OpenAi from "../src/model/ModelProviderOpenAi.js"
import { type FakeMode, startFakeOpenAi } from "./support/fakeOpenAi.js"
import { providerFailureCases } from "./support/providerFailureCases.js"

const KEY = "sk-test-0123456789abcdef"

const ask = (text: string, model = "tiny"): ChatRequest => ({ model, messages: [{ role: "user", content: text }] })

const collectText = (stream: Stream.Stream<string, ModelError>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Chunk.toReadonlyArray(chunks))

/** A fake server and an OpenAI-compatible provider pointed at it. */
const setup = (options: { readonly serverKey?: string; readonly clientKey?: string | Redacted.Redacted; readonly timeoutMs?: number } = {}) =>
  Effect.gen(function* () {
    const fake = yield* startFakeOpenAi(options.serverKey === undefined ? {} : { apiKey: options.serverKey })
    const provider = yield* OpenAi.make({
      baseUrl: fake.url,
      name: "fake",
      ...(options.clientKey === undefined ? {} : { apiKey: options.clientKey }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
    })
    return { fake, provider }
  })

describe("ModelProvider (scripted)", () => {
  it.effect("answers from a list in order, repeats the last reply, and records every request", () =>
    Effect.gen(function* () {
      const provider = makeScripted(["one", "two words"])
      const a = yield* provider.chat(ask("hello there"))
      const b = yield* provider.chat(ask("again", "big"))
      const c = yield* provider.chat(ask("and again"))
      assert.deepStrictEqual([a.text, b.text, c.text], ["one", "two words", "two words"])
      assert.deepStrictEqual(a.usage, { inputTokens: 2, outputTokens: 1 })
      assert.deepStrictEqual(b.usage, { inputTokens: 1, outputTokens: 2 })
      assert.strictEqual(b.model, "big")
      assert.strictEqual(a.finishReason, "stop")
      assert.deepStrictEqual(provider.requests.map((r) => r.messages[0]?.content), ["hello there", "again", "and again"])
    })
  )

  it.effect("answers from a function of the request and its index", () =>
    Effect.gen(function* () {
      const provider = makeScripted((request, index) => `#${index} ${request.messages.at(-1)?.content.toUpperCase()}`)
      assert.strictEqual((yield* provider.chat(ask("hi"))).text, "#0 HI")
      assert.strictEqual((yield* provider.chat(ask("bye"))).text, "#1 BYE")
    })
  )

  it.effect("uses set per-reply costs and finish reasons", () =>
    Effect.gen(function* () {
      const provider = makeScripted([{ text: "cheap", inputTokens: 100, outputTokens: 7, finishReason: "length" }])
      const result = yield* provider.chat(ask("whatever you like"))
      assert.deepStrictEqual(result.usage, { inputTokens: 100, outputTokens: 7 })
      assert.strictEqual(result.finishReason, "length")
    })
  )

  it.effect("streams a reply in word-sized chunks that add up to it, then the usage", () =>
    Effect.gen(function* () {
      const provider = makeScripted(["The quick  brown fox "])
      const chunks = yield* collectText(provider.stream(ask("go")))
      assert.deepStrictEqual(chunks, ["The", " quick", "  brown", " fox "])
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(provider.streamEvents(ask("go"))))
      const last = events.at(-1)
      assert(last?._tag === "Done")
      assert.strictEqual(last.result.text, "The quick  brown fox ")
      assert.deepStrictEqual(last.result.usage, { inputTokens: 1, outputTokens: 4 })
      assert.strictEqual(provider.requests.length, 2)
    })
  )

  it.effect("fails a call with a scripted ModelError, on chat and on stream", () =>
    Effect.gen(function* () {
      const limited = new ModelError({ code: "PROVIDER_RATE_LIMITED", message: "slow down", retryAfterSeconds: 3 })
      const provider = makeScripted(["fine", limited])
      assert.strictEqual((yield* provider.chat(ask("a"))).text, "fine")
      assert.strictEqual(yield* Effect.flip(provider.chat(ask("b"))), limited)
      assert.strictEqual(yield* Effect.flip(Stream.runDrain(provider.stream(ask("c")))), limited)
      assert.strictEqual(provider.requests.length, 3)
    })
  )

  it.effect("is served as the ModelProvider service by layerScripted", () =>
    Effect.gen(function* () {
      const provider = yield* ModelProvider
      assert.strictEqual(provider.name, "scripted")
      assert.strictEqual((yield* provider.chat(ask("x"))).text, "from the layer")
    }).pipe(Effect.provide(layerScripted(["from the layer"])))
  )

  it("splits words so that the chunks join back to the text", () => {
    for (const text of ["", "   ", "one", " lead", "trail  ", "a\nb\tc"]) assert.strictEqual(wordChunks(text).join(""), text)
    assert.deepStrictEqual(wordChunks(""), [])
  })
})

describe("ModelProvider errors", () => {
  it("maps HTTP statuses to codes", () => {
    const codes = [401, 403, 429, 400, 404, 422, 408, 500, 503].map((s) => fromHttpStatus(s, "m").code)
    assert.deepStrictEqual<ReadonlyArray<ModelErrorCode>>(codes, [
      "PROVIDER_AUTH",
      "PROVIDER_AUTH",
      "PROVIDER_RATE_LIMITED",
      "PROVIDER_REJECTED",
      "PROVIDER_REJECTED",
      "PROVIDER_REJECTED",
      "PROVIDER_UNAVAILABLE",
      "PROVIDER_UNAVAILABLE",
      "PROVIDER_UNAVAILABLE"
    ])
    assert.isTrue(isRetryable(fromHttpStatus(429, "m")))
    assert.isFalse(isRetryable(fromHttpStatus(400, "m")))
  })

  it("reads Retry-After as seconds or as an HTTP date", () => {
    const now = Date.parse("2025-01-01T00:00:00Z")
    assert.strictEqual(parseRetryAfter("12", now), 12)
    assert.strictEqual(parseRetryAfter("1.5", now), 2)
    assert.strictEqual(parseRetryAfter("Wed, 01 Jan 2025 00:00:30 GMT", now), 30)
    assert.strictEqual(parseRetryAfter("Tue, 31 Dec 2024 00:00:00 GMT", now), 0)
    assert.isUndefined(parseRetryAfter("soon", now))
    assert.isUndefined(parseRetryAfter(undefined, now))
  })
})

describe("ModelProviderOpenAi", () => {
  it.scoped("chats: the answer depends on the last user message, with the server's usage, and the key as a bearer token", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup({ serverKey: KEY, clientKey: KEY })
      const result = yield* provider.chat(ask("hello world", "llama3"))
      assert.strictEqual(result.text, "You said: hello world")
      assert.deepStrictEqual(result.usage, { inputTokens: 2, outputTokens: 4 })
      assert.strictEqual(result.model, "llama3")
      assert.strictEqual(result.finishReason, "stop")
      assert.strictEqual(provider.name, "fake")
      const [request] = fake.requests
      assert.strictEqual(request?.path, "/v1/chat/completions")
      assert.strictEqual(request?.headers.authorization, `Bearer ${KEY}`)
      assert.notProperty(request?.body, "stream")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("sends the system prompt and the history in order, with max_tokens and temperature", () =>
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
      const body = fake.requests[0]?.body
      assert.deepStrictEqual(body, { model: "m", messages, max_tokens: 64, temperature: 0.2 })
      assert.isUndefined(fake.requests[0]?.headers.authorization)
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("streams deltas that add up to the whole answer, then the usage from the usage chunk", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup({ serverKey: KEY, clientKey: Redacted.make(KEY) })
      const request = ask("tell me a long story please")
      const whole = yield* provider.chat(request)
      const chunks = yield* collectText(provider.stream(request))
      assert.isAbove(chunks.length, 3)
      assert.strictEqual(chunks.join(""), whole.text)
      const body = fake.requests[1]?.body
      assert.deepInclude(body, { stream: true, stream_options: { include_usage: true } })
      assert(provider.streamEvents !== undefined)
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(provider.streamEvents(request)))
      const last = events.at(-1)
      assert(last?._tag === "Done")
      assert.deepStrictEqual(last.result, whole)
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("accepts a base URL with a trailing slash", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAi()
      const provider = yield* OpenAi.make({ baseUrl: `${fake.url}/` })
      assert.strictEqual((yield* provider.chat(ask("hi"))).text, "You said: hi")
      assert.strictEqual(provider.name, "openai-compatible")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("is served as the ModelProvider service by its layer", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAi()
      const answer = yield* Effect.flatMap(ModelProvider, (p) => p.chat(ask("via layer"))).pipe(
        Effect.provide(OpenAi.layer({ baseUrl: fake.url }).pipe(Layer.provide(FetchHttpClient.layer)))
      )
      assert.strictEqual(answer.text, "You said: via layer")
    })
  )

  providerFailureCases<FakeMode>({
    setup,
    startFake: () => startFakeOpenAi(),
    makeAt: (baseUrl, apiKey) => OpenAi.make({ baseUrl, apiKey }),
    key: KEY,
    wrongKey: "sk-wrong-key-that-must-not-leak",
    statusCases: [
      ["unauthorized", "PROVIDER_AUTH", 401, "API key was refused"],
      ["forbidden", "PROVIDER_AUTH", 403, "API key was refused"],
      ["rate-limited", "PROVIDER_RATE_LIMITED", 429, "Rate limit reached"],
      ["bad-request", "PROVIDER_REJECTED", 400, "does not exist"],
      ["server-error", "PROVIDER_UNAVAILABLE", 500, "server had an error"]
    ],
    retryAfterDate: ["Wed, 01 Jan 2025 00:01:00 GMT", 60],
    streamEnd: "a finish reason",
    streamError: ["frame", "crashed mid-answer"],
    streamPiece: "piece"
  })

  it.scoped("estimates usage a server leaves out (4 characters a token)", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* fake.setMode("no-usage")
      const request = ask("hello")
      const expected = { inputTokens: 2, outputTokens: 4 } // "hello" and "You said: hello"
      assert.deepStrictEqual((yield* provider.chat(request)).usage, expected)
      assert(provider.streamEvents !== undefined)
      const last = Chunk.last(yield* Stream.runCollect(provider.streamEvents(request)))
      assert(last._tag === "Some" && last.value._tag === "Done")
      assert.deepStrictEqual(last.value.result.usage, expected)
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )
})
