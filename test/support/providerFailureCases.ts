/**
 * The failure cases every HTTP model provider must pass against its fake server, as one table: refused keys, HTTP
 * statuses to codes (with Retry-After), undecodable answers, truncated and failing streams, an absent server and
 * timeouts. A provider's test file calls `providerFailureCases` inside its `describe`.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { type ChatRequest, ModelError, type ModelErrorCode, type ModelProviderApi } from "../../src/core/ModelProvider.js"

/** The part of a fake server the cases drive. */
export interface FakeServer<Mode extends string> {
  readonly url: string
  readonly setMode: (mode: Mode, options?: { readonly retryAfter?: string }) => Effect.Effect<void>
  readonly received: (count: number) => Effect.Effect<void>
}

/** How to set a provider up against its fake, and what its fake says when it fails. */
export interface ProviderFailureCases<Mode extends string> {
  /** A fake (checking `serverKey` when given) and the provider under test, named `fake`, pointed at it. */
  readonly setup: (options?: {
    readonly serverKey?: string
    readonly clientKey?: string
    readonly timeoutMs?: number
  }) => Effect.Effect<{ readonly fake: FakeServer<Mode>; readonly provider: ModelProviderApi }, never, Scope.Scope | HttpClient.HttpClient>
  /** A fake with default options, to learn a URL nothing listens on once it has stopped. */
  readonly startFake: () => Effect.Effect<{ readonly url: string }, never, Scope.Scope>
  /** The provider under test at `baseUrl` with `apiKey`. */
  readonly makeAt: (baseUrl: string, apiKey: string) => Effect.Effect<ModelProviderApi, never, HttpClient.HttpClient>
  /** The key the fake accepts, and a wrong one it quotes back when refusing it. */
  readonly key: string
  readonly wrongKey: string
  /** Fake mode, expected code, HTTP status and a piece of the expected message. */
  readonly statusCases: ReadonlyArray<readonly [Mode, ModelErrorCode, number, string]>
  /** A Retry-After HTTP date 0 to N seconds after 2025-01-01T00:00:00Z, and N. */
  readonly retryAfterDate: readonly [string, number]
  /** What a complete stream ends with, for the truncated-stream case's title. */
  readonly streamEnd: string
  /** What the fake sends to fail mid-stream, for the title, and a piece of its message. */
  readonly streamError: readonly [string, string]
  /** What a stream waits for, for the stream-timeout case's title. */
  readonly streamPiece: string
}

/** The modes every provider's fake has, under the same names. */
type CommonMode = "rate-limited" | "garbage" | "wrong-shape" | "truncated" | "stream-error" | "stall"

const ask = (text: string): ChatRequest => ({ model: "test-model", messages: [{ role: "user", content: text }] })

const expectError = <A>(effect: Effect.Effect<A, ModelError>) =>
  Effect.flip(effect).pipe(Effect.tap((e) => assert.instanceOf(e, ModelError)))

/** The failures of one call and of one stream. */
const chatAndStream = (provider: ModelProviderApi) =>
  Effect.all([expectError(provider.chat(ask("hi"))), expectError(Stream.runDrain(provider.stream(ask("hi"))))])

/** Registers the failure cases in the enclosing `describe`; the fake must have the `CommonMode`s. */
export const providerFailureCases = <Mode extends string>(cases: ProviderFailureCases<Mode | CommonMode>): void => {
  const { key, setup } = cases

  it.scoped("maps a refused key to PROVIDER_AUTH without echoing the key the server quoted", () =>
    Effect.gen(function* () {
      const { provider } = yield* setup({ serverKey: key, clientKey: cases.wrongKey })
      for (const error of yield* chatAndStream(provider)) {
        assert.strictEqual(error.code, "PROVIDER_AUTH")
        assert.strictEqual(error.status, 401)
        assert.notInclude(JSON.stringify(error), cases.wrongKey)
        assert.notInclude(error.message, cases.wrongKey)
        assert.notInclude(String(error), cases.wrongKey)
      }
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  for (const [mode, code, status, detail] of cases.statusCases) {
    it.scoped(`maps HTTP ${status} to ${code}, on chat and on stream`, () =>
      Effect.gen(function* () {
        const { fake, provider } = yield* setup({ serverKey: key, clientKey: key })
        yield* fake.setMode(mode)
        for (const error of yield* chatAndStream(provider)) {
          assert.strictEqual(error.code, code)
          assert.strictEqual(error.status, status)
          assert.include(error.message, detail)
          assert.include(error.message, "fake")
          assert.notInclude(JSON.stringify(error), key)
          if (status === 429) assert.strictEqual(error.retryAfterSeconds, 7)
          else assert.isUndefined(error.retryAfterSeconds)
        }
      }).pipe(Effect.provide(FetchHttpClient.layer))
    )
  }

  it.scoped("reads a Retry-After HTTP date against the Clock", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* TestClock.setTime(Date.parse("2025-01-01T00:00:00Z"))
      yield* fake.setMode("rate-limited", { retryAfter: cases.retryAfterDate[0] })
      assert.strictEqual((yield* expectError(provider.chat(ask("hi")))).retryAfterSeconds, cases.retryAfterDate[1])
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  for (const mode of ["garbage", "wrong-shape"] as const) {
    it.scoped(`maps an undecodable answer (${mode}) to PROVIDER_BAD_RESPONSE, on chat and on stream`, () =>
      Effect.gen(function* () {
        const { fake, provider } = yield* setup()
        yield* fake.setMode(mode)
        for (const error of yield* chatAndStream(provider)) assert.strictEqual(error.code, "PROVIDER_BAD_RESPONSE")
      }).pipe(Effect.provide(FetchHttpClient.layer))
    )
  }

  it.scoped(`fails a stream that ends before ${cases.streamEnd}, after the deltas it did get`, () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* fake.setMode("truncated")
      const got: Array<string> = []
      const error = yield* expectError(Stream.runForEach(provider.stream(ask("one two three four")), (d) => Effect.sync(() => got.push(d))))
      assert.strictEqual(error.code, "PROVIDER_BAD_RESPONSE")
      assert.deepStrictEqual(got, ["You", " said:"])
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped(`maps an error ${cases.streamError[0]} in the middle of a stream to PROVIDER_UNAVAILABLE`, () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* fake.setMode("stream-error")
      const error = yield* expectError(Stream.runDrain(provider.stream(ask("hi"))))
      assert.strictEqual(error.code, "PROVIDER_UNAVAILABLE")
      assert.include(error.message, cases.streamError[1])
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("maps a server that is not there to PROVIDER_UNAVAILABLE", () =>
    Effect.gen(function* () {
      const url = yield* Effect.scoped(Effect.map(cases.startFake(), (fake) => fake.url))
      const provider = yield* cases.makeAt(url, key)
      for (const error of yield* chatAndStream(provider)) {
        assert.strictEqual(error.code, "PROVIDER_UNAVAILABLE")
        assert.isUndefined(error.status)
        assert.notInclude(JSON.stringify(error), key)
      }
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped("times a silent chat out as PROVIDER_UNAVAILABLE (default 60 s)", () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup()
      yield* fake.setMode("stall")
      const fiber = yield* Effect.fork(Effect.either(provider.chat(ask("hi"))))
      yield* fake.received(1)
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(fiber.unsafePoll() === null)
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert(Either.isLeft(result))
      assert.strictEqual(result.left.code, "PROVIDER_UNAVAILABLE")
      assert.include(result.left.message, "no answer within")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.scoped(`times a stream out when the next ${cases.streamPiece} does not come`, () =>
    Effect.gen(function* () {
      const { fake, provider } = yield* setup({ timeoutMs: 5_000 })
      yield* fake.setMode("stall")
      const fiber = yield* Effect.fork(Effect.either(Stream.runDrain(provider.stream(ask("hi")))))
      yield* fake.received(1)
      yield* TestClock.adjust("5 seconds")
      const result = yield* Fiber.join(fiber)
      assert(Either.isLeft(result))
      assert.strictEqual(result.left.code, "PROVIDER_UNAVAILABLE")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )
}
