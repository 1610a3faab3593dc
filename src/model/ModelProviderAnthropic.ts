/**
 * An Anthropic provider, meaning the Messages API: `POST {baseUrl}/v1/messages` with the `x-api-key` and
 * `anthropic-version` headers, and with `stream: true` an SSE stream of `message_start` (input usage),
 * `content_block_delta` (text), `message_delta` (stop reason, output usage) and `message_stop`.
 *
 * Built on `@effect/ai-anthropic`'s `AnthropicClient` for the base URL, the key and version headers and SSE framing
 * (`streamRequest`), but not on its typed calls: `createMessage` and `createMessageStream` decode with the exact
 * generated schemas, where one event type or content block newer than the package fails the whole answer, and
 * Anthropic documents that new event types may appear. So bodies are posted through the client's configured
 * `HttpClient` and decoded here with lenient schemas asking only for what a `ChatResult` needs; unknown events are
 * skipped.
 *
 * The Messages API takes the system prompt apart from the turns, so `system` messages are joined into `system`; it
 * requires `max_tokens`, so a request without `maxTokens` gets the provider's default. Input usage counts cache
 * reads and writes too (they are input tokens the call consumed). `finishReason` is Anthropic's own word
 * (`end_turn`, `max_tokens`, `stop_sequence`, …). A stream counts as complete only at `message_stop`; one that ends
 * before fails with PROVIDER_BAD_RESPONSE, and an `error` event in the stream fails with the code of its error type.
 * The timeout bounds a whole `chat` call, and in a stream each wait for the next piece. Failures never carry the
 * request's headers, and any echo of the key in a provider's text is scrubbed. Tools go out as `tools`; a whole
 * answer's `tool_use` blocks come back as `ChatResult.toolCalls`, their results go back as `tool_result` blocks.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as AnthropicClient from "@effect/ai-anthropic/AnthropicClient"
import * as HttpBody from "@effect/platform/HttpBody"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import {
  type ChatRequest,
  type ChatResult,
  type ChatStreamEvent,
  type ChatTurn,
  type ChatUsage,
  deltaText,
  errorDetail,
  estimatePromptTokens,
  estimateTokens,
  type ModelError,
  type ModelErrorCode,
  ModelProvider,
  type ModelProviderApi
} from "../core/ModelProvider.js"
import * as ProviderFailures from "./internal/providerFailures.js"

/** Where and how to reach the Anthropic Messages API. */
export interface AnthropicOptions {
  /** Sent as `x-api-key`. */
  readonly apiKey?: string | Redacted.Redacted
  /** The API root without `/v1`; default `https://api.anthropic.com`. */
  readonly baseUrl?: string
  /** The `anthropic-version` header; default `2023-06-01`. */
  readonly anthropicVersion?: string
  /** Names the provider in error messages; default `anthropic`. */
  readonly name?: string
  /** Bound on a whole `chat` call and on each wait for the next piece of a stream; default 60 s. */
  readonly timeoutMs?: number
  /** `max_tokens` for a request that sets no `maxTokens` (the API requires one); default 4096. */
  readonly defaultMaxTokens?: number
}

/** The default API root. */
export const DEFAULT_BASE_URL = "https://api.anthropic.com"
const DEFAULT_TIMEOUT_MS = 60_000
const DEFAULT_MAX_TOKENS = 4096

const Count = Schema.NullOr(Schema.NonNegativeInt)

const Usage = Schema.Struct({
  input_tokens: Schema.optional(Count),
  output_tokens: Schema.optional(Count),
  cache_creation_input_tokens: Schema.optional(Count),
  cache_read_input_tokens: Schema.optional(Count)
})
type Usage = typeof Usage.Type

const Message = Schema.Struct({
  model: Schema.optional(Schema.NullOr(Schema.String)),
  content: Schema.Array(Schema.Struct({
    type: Schema.String,
    text: Schema.optional(Schema.NullOr(Schema.String)),
    id: Schema.optional(Schema.String),
    name: Schema.optional(Schema.String),
    input: Schema.optional(Schema.Unknown)
  })),
  stop_reason: Schema.optional(Schema.NullOr(Schema.String)),
  usage: Schema.optional(Schema.NullOr(Usage))
})

const StreamEvent = Schema.Struct({
  type: Schema.String,
  message: Schema.optional(
    Schema.NullOr(Schema.Struct({ model: Schema.optional(Schema.NullOr(Schema.String)), usage: Schema.optional(Schema.NullOr(Usage)) }))
  ),
  delta: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        type: Schema.optional(Schema.String),
        text: Schema.optional(Schema.NullOr(Schema.String)),
        stop_reason: Schema.optional(Schema.NullOr(Schema.String))
      })
    )
  ),
  usage: Schema.optional(Schema.NullOr(Usage)),
  error: Schema.optional(Schema.Unknown)
})

const decodeMessage = Schema.decodeUnknown(Schema.parseJson(Message))

/** Input tokens as billed: fresh input plus cache writes and reads; undefined when the server reported none. */
const inputOf = (usage: Usage | null | undefined): number | undefined =>
  usage?.input_tokens == null ? undefined : usage.input_tokens + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0)

const maxOf = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.max(a, b)

/** The code of an `error` event's type (the same types as the HTTP error bodies). */
const codeOfErrorType = (type: unknown): ModelErrorCode => {
  switch (type) {
    case "rate_limit_error":
      return "PROVIDER_RATE_LIMITED"
    case "authentication_error":
    case "permission_error":
      return "PROVIDER_AUTH"
    case "invalid_request_error":
    case "not_found_error":
    case "request_too_large":
      return "PROVIDER_REJECTED"
    default:
      return "PROVIDER_UNAVAILABLE"
  }
}

/** The input of a `tool_use` block: the call's arguments as an object (`{}` when they are not a JSON object). */
const toolInput = (text: string): unknown => {
  try {
    const v: unknown = JSON.parse(text)
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : {}
  } catch {
    return {}
  }
}

/**
 * The turns in the Messages API shape: calls as `tool_use` blocks of an assistant turn, results as `tool_result`
 * blocks of a user turn (consecutive results share one, as the API requires).
 */
const wireTurns = (turns: ReadonlyArray<ChatTurn>) => {
  const out: Array<{ role: "user" | "assistant"; content: string | Array<Record<string, unknown>> }> = []
  for (const turn of turns) {
    if (turn.role === "system") continue
    if (turn.role === "tool") {
      const block = { type: "tool_result", tool_use_id: turn.toolCallId, content: turn.content, ...(turn.isError === true ? { is_error: true } : {}) }
      const last = out[out.length - 1]
      if (last !== undefined && last.role === "user" && Array.isArray(last.content) && last.content.every((b) => b.type === "tool_result")) last.content.push(block)
      else out.push({ role: "user", content: [block] })
    } else if ("toolCalls" in turn) {
      out.push({
        role: "assistant",
        content: [
          ...(turn.content.length > 0 ? [{ type: "text", text: turn.content }] : []),
          ...turn.toolCalls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: toolInput(c.arguments) }))
        ]
      })
    } else out.push({ role: turn.role, content: turn.content })
  }
  return out
}

/** The request body: `system` messages joined into `system`, the turns in order, tools as `tools`. */
const requestBody = (request: ChatRequest, defaultMaxTokens: number, stream: boolean) => {
  const system = request.messages.filter((m) => m.role === "system").map((m) => m.content)
  return {
    model: request.model,
    max_tokens: request.maxTokens ?? defaultMaxTokens,
    ...(system.length > 0 ? { system: system.join("\n\n") } : {}),
    messages: wireTurns(request.messages),
    ...(request.tools !== undefined && request.tools.length > 0
      ? { tools: request.tools.map((t) => ({ name: t.name, ...(t.description === undefined ? {} : { description: t.description }), input_schema: t.inputSchema })), ...(request.toolChoice === undefined ? {} : { tool_choice: { type: request.toolChoice } }) }
      : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(stream ? { stream: true } : {})
  }
}

/** An Anthropic provider over the `HttpClient` in context. */
export const make = (options: AnthropicOptions): Effect.Effect<ModelProviderApi, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const name = options.name ?? "anthropic"
    const timeout = Duration.millis(options.timeoutMs ?? DEFAULT_TIMEOUT_MS)
    const defaultMaxTokens = options.defaultMaxTokens ?? DEFAULT_MAX_TOKENS
    const apiKey = typeof options.apiKey === "string" ? Redacted.make(options.apiKey) : options.apiKey
    const keyText = apiKey === undefined ? "" : Redacted.value(apiKey)
    // The scope only holds the client's widening of the redacted header names for its own logging; our failures
    // never carry request headers, so nothing is lost when it closes.
    const anthropic = yield* Effect.scoped(
      AnthropicClient.make({
        apiUrl: (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, ""),
        ...(keyText.length > 0 ? { apiKey } : {}),
        ...(options.anthropicVersion === undefined ? {} : { anthropicVersion: options.anthropicVersion })
      })
    )

    const { badResponse, callFailures, failure, statusFailure, streamFailures } = ProviderFailures.make({
      name,
      secret: keyText,
      timeout,
      undecodableStream: "undecodable stream event"
    })

    const post = (request: ChatRequest, stream: boolean) =>
      HttpClientRequest.post("/v1/messages", { body: HttpBody.unsafeJson(requestBody(request, defaultMaxTokens, stream)) })

    const readMessage = (response: HttpClientResponse.HttpClientResponse) =>
      Effect.flatMap(response.text, (text) =>
        response.status < 200 || response.status >= 300
          ? Effect.flatMap(statusFailure(response.status, response.headers, text), Effect.fail)
          : Effect.mapError(decodeMessage(text), () => badResponse("undecodable message"))
      )

    const usageOf = (input: number | undefined, output: number | null | undefined, request: ChatRequest, text: string): ChatUsage => ({
      inputTokens: input ?? estimatePromptTokens(request),
      outputTokens: output ?? estimateTokens(text)
    })

    const chat = (request: ChatRequest): Effect.Effect<ChatResult, ModelError> =>
      anthropic.client.httpClient.execute(post(request, false)).pipe(
        Effect.flatMap(readMessage),
        Effect.map((message): ChatResult => {
          const text = message.content.map((block) => (block.type === "text" ? (block.text ?? "") : "")).join("")
          const calls = message.content.filter((block) => block.type === "tool_use" && block.id !== undefined && block.name !== undefined)
          return {
            text,
            usage: usageOf(inputOf(message.usage), message.usage?.output_tokens, request, text),
            model: message.model || request.model,
            finishReason: message.stop_reason ?? "end_turn",
            ...(calls.length === 0 ? {} : { toolCalls: calls.map((b) => ({ id: b.id!, name: b.name!, arguments: JSON.stringify(b.input ?? {}) })) })
          }
        }),
        callFailures
      )

    const streamEvents = (request: ChatRequest): Stream.Stream<ChatStreamEvent, ModelError> =>
      Stream.suspend(() => {
        let text = ""
        let finishReason: string | undefined
        let input: number | undefined
        let output: number | undefined
        let model: string | undefined
        let stopped = false
        const deltas = anthropic.streamRequest(post(request, true), StreamEvent).pipe(
          streamFailures,
          Stream.takeUntil((event) => event.type === "message_stop"),
          Stream.mapConcatEffect((event): Effect.Effect<ReadonlyArray<ChatStreamEvent>, ModelError> => {
            switch (event.type) {
              case "message_start":
                input = inputOf(event.message?.usage) ?? input
                if (event.message?.model) model = event.message.model
                return Effect.succeed([])
              case "content_block_delta": {
                const delta = event.delta?.type === "text_delta" ? (event.delta.text ?? "") : ""
                text += delta
                return Effect.succeed(delta.length > 0 ? [{ _tag: "Delta", text: delta }] : [])
              }
              case "message_delta":
                if (event.delta?.stop_reason) finishReason = event.delta.stop_reason
                // Counts here are cumulative, and may leave out what message_start gave (cache counts): keep the larger.
                input = maxOf(input, inputOf(event.usage))
                output = maxOf(output ?? undefined, event.usage?.output_tokens ?? undefined)
                return Effect.succeed([])
              case "message_stop":
                stopped = true
                return Effect.succeed([])
              case "error": {
                const type = Predicate.hasProperty(event.error, "type") ? event.error.type : undefined
                return Effect.fail(failure(codeOfErrorType(type), `failed mid-stream: ${errorDetail(JSON.stringify({ error: event.error }))}`))
              }
              default:
                return Effect.succeed([])
            }
          })
        )
        const done = Stream.suspend(() =>
          !stopped
            ? Stream.fail(badResponse("the stream ended before message_stop"))
            : Stream.succeed<ChatStreamEvent>({
              _tag: "Done",
              result: { text, usage: usageOf(input, output, request, text), model: model ?? request.model, finishReason: finishReason ?? "end_turn" }
            })
        )
        return Stream.concat(deltas, done)
      })

    return {
      name,
      chat,
      stream: (request) => Stream.filterMap(streamEvents(request), deltaText),
      streamEvents
    }
  })

/** The `ModelProvider` layer for the Anthropic Messages API. */
export const layer = (options: AnthropicOptions): Layer.Layer<ModelProvider, never, HttpClient.HttpClient> =>
  Layer.effect(ModelProvider, make(options))

/** The same, with the key from `ANTHROPIC_API_KEY` (and the root from `ANTHROPIC_BASE_URL` when set) unless given. */
export const layerConfig = (
  options: AnthropicOptions = {}
): Layer.Layer<ModelProvider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(
    ModelProvider,
    Effect.gen(function* () {
      const apiKey = options.apiKey ?? (yield* Config.redacted("ANTHROPIC_API_KEY"))
      const baseUrl = options.baseUrl ?? Option.getOrUndefined(yield* Config.option(Config.string("ANTHROPIC_BASE_URL")))
      return yield* make({ ...options, apiKey, ...(baseUrl === undefined ? {} : { baseUrl }) })
    })
  )
