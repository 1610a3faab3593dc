/**
 * Language-model calls: one chat turn, answered whole or streamed. The agent server uses it when it runs as an LLM
 * chat agent (a provider + model and no handler). Every vendor failure comes out as one `ModelError` with a small
 * closed set of codes, so a caller decides between retrying, backing off and giving up without knowing the vendor.
 *
 * The tag, the types and the scripted test provider live here, free of HTTP, so that any floor can name them; the
 * HTTP providers are `ModelProviderOpenAi` (OpenAI-compatible) and `ModelProviderAnthropic` (the Messages API).
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

/** One message of a conversation, oldest first; a system prompt is the first message with role `system`. */
export const ChatMessage = Schema.Struct({
  role: Schema.Literal("system", "user", "assistant"),
  content: Schema.String
})
/** One message of a conversation. */
export type ChatMessage = typeof ChatMessage.Type

/** A function the model may call: its name, what it does, and the JSON Schema of its input object. */
export interface ToolSpec {
  readonly name: string
  readonly description?: string
  readonly inputSchema: Readonly<Record<string, unknown>>
}

/** A call the model asked for; `arguments` is the JSON text the model wrote (it may not parse). */
export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** An assistant turn that asked for tool calls (with whatever text came with them). */
export interface ToolCallTurn {
  readonly role: "assistant"
  readonly content: string
  readonly toolCalls: ReadonlyArray<ToolCall>
}

/** The result of one tool call, answering the call with the same `toolCallId`. */
export interface ToolResultTurn {
  readonly role: "tool"
  readonly toolCallId: string
  readonly name: string
  readonly content: string
  readonly isError?: boolean
}

/** A turn of a conversation that may call tools: plain messages, calls asked for, and their results. */
export type ChatTurn = ChatMessage | ToolCallTurn | ToolResultTurn

/** One chat turn: the model to ask and the conversation so far; with `tools`, the model may answer with calls. */
export interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatTurn>
  readonly maxTokens?: number
  readonly temperature?: number
  readonly tools?: ReadonlyArray<ToolSpec>
  /** Whether the model may call the tools (`auto`, the default) or must answer in text (`none`). */
  readonly toolChoice?: "auto" | "none"
}

/** Tokens a call consumed, as the provider reported them (or estimated where it reported none). */
export interface ChatUsage {
  readonly inputTokens: number
  readonly outputTokens: number
}

/**
 * A whole answer. `model` is the one that answered (a provider may resolve an alias); `finishReason` is its own
 * word, e.g. `stop`, `length`, `tool_calls`; `toolCalls` the calls it asked for, when the request offered tools.
 */
export interface ChatResult {
  readonly text: string
  readonly usage: ChatUsage
  readonly model: string
  readonly finishReason: string
  readonly toolCalls?: ReadonlyArray<ToolCall>
}

/** A piece of a streamed answer: text deltas in order, then exactly one `Done` with the whole result and its usage. */
export type ChatStreamEvent =
  | { readonly _tag: "Delta"; readonly text: string }
  | { readonly _tag: "Done"; readonly result: ChatResult }

/** Why a model call failed. UNAVAILABLE and RATE_LIMITED are worth retrying; the others are not. */
export const ModelErrorCode = Schema.Literal(
  "PROVIDER_UNAVAILABLE",
  "PROVIDER_AUTH",
  "PROVIDER_RATE_LIMITED",
  "PROVIDER_REJECTED",
  "PROVIDER_BAD_RESPONSE"
)

/** A `ModelErrorCode` value. */
export type ModelErrorCode = typeof ModelErrorCode.Type

/** A model call failed. `status` is the provider's HTTP status when there was one; `retryAfterSeconds` its Retry-After. */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  code: ModelErrorCode,
  message: Schema.String,
  status: Schema.optional(Schema.Number),
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {}

/** The operations of a language-model provider. */
export interface ModelProviderApi {
  /** Names the provider in errors and logs (never holds a secret). */
  readonly name: string
  /** One chat turn, answered whole. */
  readonly chat: (request: ChatRequest) => Effect.Effect<ChatResult, ModelError>
  /** Text deltas as they arrive. */
  readonly stream: (request: ChatRequest) => Stream.Stream<string, ModelError>
  /**
   * Like `stream`, ending with the usage and finish reason (what a budget needs). Optional so that a minimal
   * provider may leave it out; both providers in this package have it.
   */
  readonly streamEvents?: (request: ChatRequest) => Stream.Stream<ChatStreamEvent, ModelError>
}

/** The `ModelProvider` service. */
export class ModelProvider extends Context.Tag("agent-mesh/ModelProvider")<ModelProvider, ModelProviderApi>() {}

/** The text of a `Delta` event, for turning `streamEvents` into `stream`. */
export const deltaText = (event: ChatStreamEvent): Option.Option<string> =>
  event._tag === "Delta" ? Option.some(event.text) : Option.none()

/** True for the codes where the same call may succeed later (after `retryAfterSeconds` when given). */
export const isRetryable = (error: ModelError): boolean =>
  error.code === "PROVIDER_UNAVAILABLE" || error.code === "PROVIDER_RATE_LIMITED"

/**
 * The `ModelError` for a provider's HTTP error status: 401/403 auth, 429 rate limited, 408 and 5xx unavailable
 * (408 is the server's own timeout, as retryable as ours), any other status rejected.
 */
export const fromHttpStatus = (status: number, message: string, retryAfterSeconds?: number): ModelError => {
  const code: ModelErrorCode =
    status === 401 || status === 403
      ? "PROVIDER_AUTH"
      : status === 429
        ? "PROVIDER_RATE_LIMITED"
        : status === 408 || status >= 500
          ? "PROVIDER_UNAVAILABLE"
          : "PROVIDER_REJECTED"
  return new ModelError({ code, message, status, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) })
}

/** Seconds to wait from a Retry-After value: delta-seconds or an HTTP date (read against `nowMs`); undefined when unreadable. */
export const parseRetryAfter = (value: string | undefined, nowMs: number): number | undefined => {
  if (value === undefined) return undefined
  const text = value.trim()
  if (/^\d+(\.\d+)?$/.test(text)) return Math.ceil(Number(text))
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000))
}

/** Longest provider text quoted in an error message; provider bodies can be pages of HTML. */
const MAX_DETAIL = 300

/** The provider's own explanation from an error body (`{error:{message}}`, `{error:"…"}`, `{message}` or text), shortened. */
export const errorDetail = (body: string | undefined): string => {
  if (body === undefined) return ""
  let text = body.trim()
  try {
    const json: unknown = JSON.parse(text)
    const error = Predicate.hasProperty(json, "error") ? json.error : json
    if (typeof error === "string") text = error
    else if (Predicate.hasProperty(error, "message") && typeof error.message === "string") text = error.message
  } catch {
    // Not JSON: quote the text itself.
  }
  return text.length > MAX_DETAIL ? `${text.slice(0, MAX_DETAIL)}…` : text
}

/** Tokens in a text, estimated at 4 characters a token: for usage a provider leaves out, and for budgets before a call. */
export const estimateTokens = (text: string): number => Math.ceil(text.length / 4)

/** Input tokens of a request, estimated from its messages (what a budget reserves before the provider counts). */
export const estimatePromptTokens = (request: ChatRequest): number =>
  estimateTokens(request.messages.map((m) => m.content).join("\n"))

/**
 * One scripted reply: its text and, optionally, its set usage, finish reason (defaults: word counts, `stop`, or
 * `tool_calls` with calls) and the tool calls it asks for.
 */
export interface ScriptedReply {
  readonly text: string
  readonly toolCalls?: ReadonlyArray<ToolCall>
  readonly inputTokens?: number
  readonly outputTokens?: number
  readonly finishReason?: string
}

/** One step of a script: a bare text, a reply, or a `ModelError` that call fails with. */
export type ScriptStep = string | ScriptedReply | ModelError

/** A script: steps taken in order (the last one repeats), or a function of the request and its 0-based call index. */
export type Script = ReadonlyArray<ScriptStep> | ((request: ChatRequest, index: number) => ScriptStep)

/** A scripted provider, with every request it got (chat and stream alike) in arrival order. */
export interface ScriptedProvider extends ModelProviderApi {
  readonly requests: ReadonlyArray<ChatRequest>
  readonly streamEvents: (request: ChatRequest) => Stream.Stream<ChatStreamEvent, ModelError>
}

const wordCount = (text: string): number => text.split(/\s+/).filter((w) => w.length > 0).length

/** Splits a text into word-sized chunks (each word with the spaces before it) whose concatenation is the text. */
export const wordChunks = (text: string): Array<string> => {
  const chunks: Array<string> = [...(text.match(/\s*\S+/g) ?? [])]
  const rest = text.slice(chunks.join("").length)
  if (rest.length === 0) return chunks
  if (chunks.length === 0) return [rest]
  chunks[chunks.length - 1] += rest
  return chunks
}

/**
 * Scripted provider for tests: replies from a list (in order, last one repeats) or a function of the request;
 * streams a reply in word-sized chunks; records every request it got; usage from set per-reply costs or a word count.
 */
export const makeScripted = (script: Script, options: { readonly name?: string } = {}): ScriptedProvider => {
  const requests: Array<ChatRequest> = []
  const name = options.name ?? "scripted"

  // Runs when the call runs (not when its effect is built), so an effect retried is a second request.
  const next = (request: ChatRequest): Effect.Effect<ChatResult, ModelError> =>
    Effect.suspend(() => {
      const index = requests.length
      requests.push({ ...request, messages: [...request.messages] })
      let step: ScriptStep | undefined
      if (typeof script === "function") step = script(request, index)
      else step = script[Math.min(index, script.length - 1)]
      if (step === undefined) return Effect.dieMessage(`${name}: the script is empty`)
      if (step instanceof ModelError) return Effect.fail(step)
      const reply: ScriptedReply = typeof step === "string" ? { text: step } : step
      const inputTokens = reply.inputTokens ?? request.messages.reduce((n, m) => n + wordCount(m.content), 0)
      return Effect.succeed({
        text: reply.text,
        usage: { inputTokens, outputTokens: reply.outputTokens ?? wordCount(reply.text) },
        model: request.model,
        finishReason: reply.finishReason ?? (reply.toolCalls === undefined ? "stop" : "tool_calls"),
        ...(reply.toolCalls === undefined ? {} : { toolCalls: reply.toolCalls })
      })
    })

  const streamEvents = (request: ChatRequest): Stream.Stream<ChatStreamEvent, ModelError> =>
    Stream.unwrap(
      Effect.map(next(request), (result) =>
        Stream.fromIterable<ChatStreamEvent>([
          ...wordChunks(result.text).map((text) => ({ _tag: "Delta" as const, text })),
          { _tag: "Done", result }
        ])
      )
    )

  return {
    name,
    requests,
    chat: next,
    stream: (request) => Stream.filterMap(streamEvents(request), deltaText),
    streamEvents
  }
}

/** A layer serving `makeScripted(script)`; build the provider yourself and `Layer.succeed` it to read its requests. */
export const layerScripted = (script: Script, options: { readonly name?: string } = {}): Layer.Layer<ModelProvider> =>
  Layer.sync(ModelProvider, () => makeScripted(script, options))
