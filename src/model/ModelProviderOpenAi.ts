/**
 * An OpenAI-compatible provider, meaning the Chat Completions API: `POST {baseUrl}/chat/completions`, with SSE
 * `data: {choices:[{delta:{content}}]}` lines up to `data: [DONE]` when `stream: true`. OpenAI, Ollama, vLLM,
 * LM Studio and llama.cpp's server all speak it.
 *
 * Built on `@effect/ai-openai`'s `OpenAiClient` for base URL, bearer auth, header redaction and SSE framing
 * (`streamRequest`, over `@effect/experimental`'s parser), but not on the rest of it:
 * - `OpenAiLanguageModel` only speaks the Responses API (`/responses`), which most local servers lack;
 * - the generated `createChatCompletion` decodes with OpenAI's exact schema (`refusal` and `logprobs` required,
 *   `finish_reason` from a closed set), which rejects Ollama's and llama.cpp's answers.
 * So bodies are posted through the client's configured `HttpClient` and decoded here with lenient schemas asking only
 * for what a `ChatResult` needs.
 *
 * `streamRequest` skips frames that are not JSON (that is how `[DONE]` goes by), so a stream counts as complete
 * only once some chunk gave a `finish_reason`; one that ends before that fails with PROVIDER_BAD_RESPONSE.
 * The timeout bounds a whole `chat` call, and in a stream each wait for the next piece, so a long answer that keeps
 * coming is not cut off. Usage a server leaves out is estimated (4 characters a token) so that budgets still move.
 *
 * Tools (`ChatRequest.tools`) go out as `tools` of type `function`; a whole answer's `tool_calls` come back as
 * `ChatResult.toolCalls`, and the conversation carries them back as `tool_calls` and `tool` messages. A streamed
 * answer carries text only.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as HttpBody from "@effect/platform/HttpBody"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
  ModelProvider,
  type ModelProviderApi
} from "../core/ModelProvider.js"
import * as ProviderFailures from "./internal/providerFailures.js"

/** Where and how to reach an OpenAI-compatible server. */
export interface OpenAiCompatibleOptions {
  /** The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1` (Ollama). */
  readonly baseUrl: string
  /** Sent as a bearer token; absent or empty sends none (local servers usually need none). */
  readonly apiKey?: string | Redacted.Redacted
  /** Names the provider in error messages; default `openai-compatible`. */
  readonly name?: string
  /** Bound on a whole `chat` call and on each wait for the next piece of a stream; default 60 s. */
  readonly timeoutMs?: number
}

const DEFAULT_TIMEOUT_MS = 60_000
const Count = Schema.NullOr(Schema.NonNegativeInt)

const Usage = Schema.Struct({
  prompt_tokens: Schema.optional(Count),
  completion_tokens: Schema.optional(Count)
})

const Completion = Schema.Struct({
  model: Schema.optional(Schema.NullOr(Schema.String)),
  choices: Schema.NonEmptyArray(
    Schema.Struct({
      message: Schema.Struct({
        content: Schema.optional(Schema.NullOr(Schema.String)),
        tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
          id: Schema.String,
          function: Schema.Struct({ name: Schema.String, arguments: Schema.optional(Schema.NullOr(Schema.String)) })
        }))))
      }),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    })
  ),
  usage: Schema.optional(Schema.NullOr(Usage))
})

const CompletionChunk = Schema.Struct({
  model: Schema.optional(Schema.NullOr(Schema.String)),
  choices: Schema.optional(
    Schema.NullOr(
      Schema.Array(
        Schema.Struct({
          delta: Schema.optional(Schema.NullOr(Schema.Struct({ content: Schema.optional(Schema.NullOr(Schema.String)) }))),
          finish_reason: Schema.optional(Schema.NullOr(Schema.String))
        })
      )
    )
  ),
  usage: Schema.optional(Schema.NullOr(Usage)),
  // OpenAI and vLLM report a failure after the 200 as a frame of its own.
  error: Schema.optional(Schema.Unknown)
})

const decodeCompletion = Schema.decodeUnknown(Schema.parseJson(Completion))

const usageOf = (
  usage: typeof Usage.Type | null | undefined,
  request: ChatRequest,
  text: string
): ChatUsage => ({
  inputTokens: usage?.prompt_tokens ?? estimatePromptTokens(request),
  outputTokens: usage?.completion_tokens ?? estimateTokens(text)
})

/** A turn in the Chat Completions shape: calls as `tool_calls`, their results as `tool` messages. */
const wireTurn = (turn: ChatTurn) => {
  if (turn.role === "tool") return { role: "tool", tool_call_id: turn.toolCallId, content: turn.content }
  if ("toolCalls" in turn) {
    return {
      role: "assistant",
      content: turn.content.length > 0 ? turn.content : null,
      tool_calls: turn.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }))
    }
  }
  return { role: turn.role, content: turn.content }
}

const requestBody = (request: ChatRequest, stream: boolean) => ({
  model: request.model,
  messages: request.messages.map(wireTurn),
  ...(request.tools !== undefined && request.tools.length > 0
    ? { tools: request.tools.map((t) => ({ type: "function", function: { name: t.name, ...(t.description === undefined ? {} : { description: t.description }), parameters: t.inputSchema } })), ...(request.toolChoice === undefined ? {} : { tool_choice: request.toolChoice }) }
    : {}),
  // `max_tokens`, not OpenAI's newer `max_completion_tokens`: every compatible server reads the older name.
  ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
  ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
  ...(stream ? { stream: true, stream_options: { include_usage: true } } : {})
})

/** An OpenAI-compatible provider over the `HttpClient` in context. */
export const make = (options: OpenAiCompatibleOptions): Effect.Effect<ModelProviderApi, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const name = options.name ?? "openai-compatible"
    const timeout = Duration.millis(options.timeoutMs ?? DEFAULT_TIMEOUT_MS)
    const apiKey = typeof options.apiKey === "string" ? Redacted.make(options.apiKey) : options.apiKey
    const keyText = apiKey === undefined ? "" : Redacted.value(apiKey)
    // The scope only holds OpenAiClient's widening of the redacted header names to its organization and project
    // headers, which we never send; the Authorization header is redacted by default.
    const openAi = yield* Effect.scoped(
      OpenAiClient.make({
        apiUrl: options.baseUrl.replace(/\/+$/, ""),
        ...(keyText.length > 0 ? { apiKey } : {})
      })
    )

    const { badResponse, callFailures, statusFailure, streamFailures, unavailable } = ProviderFailures.make({
      name,
      secret: keyText,
      timeout,
      undecodableStream: "undecodable stream"
    })

    const post = (request: ChatRequest, stream: boolean) =>
      HttpClientRequest.post("/chat/completions", { body: HttpBody.unsafeJson(requestBody(request, stream)) })

    const readCompletion = (response: HttpClientResponse.HttpClientResponse) =>
      Effect.flatMap(response.text, (text) =>
        response.status < 200 || response.status >= 300
          ? Effect.flatMap(statusFailure(response.status, response.headers, text), Effect.fail)
          : Effect.mapError(decodeCompletion(text), () => badResponse("undecodable chat completion"))
      )

    const chat = (request: ChatRequest): Effect.Effect<ChatResult, ModelError> =>
      openAi.client.httpClient.execute(post(request, false)).pipe(
        Effect.flatMap(readCompletion),
        Effect.map((completion): ChatResult => {
          const choice = completion.choices[0]
          const text = choice.message.content ?? ""
          const calls = choice.message.tool_calls ?? []
          return {
            text,
            usage: usageOf(completion.usage, request, text),
            model: completion.model || request.model,
            finishReason: choice.finish_reason ?? "stop",
            ...(calls.length === 0 ? {} : { toolCalls: calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments ?? "{}" })) })
          }
        }),
        callFailures
      )

    const streamEvents = (request: ChatRequest): Stream.Stream<ChatStreamEvent, ModelError> =>
      Stream.suspend(() => {
        let text = ""
        let finishReason: string | undefined
        let usage: typeof Usage.Type | null | undefined
        let model: string | undefined
        const deltas = openAi.streamRequest(post(request, true), CompletionChunk).pipe(
          streamFailures,
          Stream.mapConcatEffect((chunk) => {
            if (chunk.error !== undefined) return Effect.fail(unavailable(`failed mid-stream: ${errorDetail(JSON.stringify(chunk.error))}`))
            if (chunk.usage) usage = chunk.usage
            if (chunk.model) model = chunk.model
            const choice = chunk.choices?.[0]
            if (choice?.finish_reason) finishReason = choice.finish_reason
            const delta = choice?.delta?.content ?? ""
            text += delta
            return Effect.succeed(delta.length > 0 ? [{ _tag: "Delta" as const, text: delta }] : [])
          })
        )
        const done = Stream.suspend(() =>
          finishReason === undefined
            ? Stream.fail(badResponse("the stream ended before a finish reason"))
            : Stream.succeed<ChatStreamEvent>({
              _tag: "Done",
              result: { text, usage: usageOf(usage, request, text), model: model ?? request.model, finishReason }
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

/** The `ModelProvider` layer for an OpenAI-compatible server. */
export const layer = (options: OpenAiCompatibleOptions): Layer.Layer<ModelProvider, never, HttpClient.HttpClient> =>
  Layer.effect(ModelProvider, make(options))
