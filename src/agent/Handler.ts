/**
 * What an agent's handler receives and returns, and how its output is run. A handler may answer in five forms (a
 * string, a Promise, an async iterable, an Effect, a Stream); they all go through `consume`, so every form streams,
 * cancels and fails the same way. Only streams and iterables go through `Stream`: a one-element stream costs far
 * more than the reply. An agent without a handler gets one from its model provider (`layerChat`).
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { Caller, ChatMessage, CommitRequest } from "./AgentApi.js"
import { type AgentForbidden, type AgentUnavailable, ProviderFailed } from "./AgentError.js"
import { type ModelError, ModelProvider } from "../core/ModelProvider.js"

/** What a handler declares about an action it asks the guard for. */
export interface GuardOptions {
  /** Whether the action can be undone (default false: a `reversibleOnly` mandate refuses it unless declared). */
  readonly reversible?: boolean
  /** Data scopes the action touches. */
  readonly dataScopes?: ReadonlyArray<string>
  /** LLM tokens and web requests the action spends, charged against the mandate's compute limits. */
  readonly llmTokens?: number
  readonly webRequests?: number
  /** What is asked, in words, shown to the human at a gate. */
  readonly description?: string
}

/** The run paused at a human gate; thrown (or failed) out of `guard` so the handler stops there. */
export class GatePaused extends Schema.TaggedError<GatePaused>()("GatePaused", {
  taskId: Schema.String,
  capability: Schema.String
}) {}

/** What `guard` may fail with. */
export type GuardError = AgentForbidden | AgentUnavailable | GatePaused

/** What a handler receives. */
export interface RunInput {
  readonly message: string
  readonly sessionId: string
  /** Earlier turns: from the server's memory, or as the caller sent them when the server keeps none. */
  readonly history: ReadonlyArray<ChatMessage>
  readonly context: Readonly<Record<string, unknown>>
  /** Who called (the DID for mesh-sig callers). */
  readonly caller: Caller
  readonly systemPrompt: string | undefined
  /**
   * Asks the task guard before a capability, under the mandate the caller presented: resolves when allowed, rejects
   * with `AgentForbidden` (its `code` says why), or pauses the task at a human gate (rejects with `GatePaused`;
   * let it propagate).
   */
  readonly guard: (capability: string, options?: GuardOptions) => Promise<void>
  /** `guard` as an Effect. */
  readonly guardEffect: (capability: string, options?: GuardOptions) => Effect.Effect<void, GuardError>
  /** Aborted when the run is cancelled (the server stops, or a plain request's client goes away). */
  readonly signal: AbortSignal
  /** The capability the caller asked for, if it named one. */
  readonly capability: string | undefined
  /** The saga step the caller asked a commit token for, if it did. */
  readonly commit: CommitRequest | undefined
  /**
   * Reports what the run used, in USD (a number or a decimal string), for the commit token; the last report counts.
   * Throws `InvalidAmount` for an amount that is not a USD amount or exceeds the step's `commit.amountUsd`: report
   * before the side effect it pays for, as with `guard`.
   */
  readonly reportCost: (usd: number | string) => void
}

/** What a handler returns: the reply, or its chunks. */
export type HandlerOutput =
  | string
  | AsyncIterable<string>
  | Promise<string | AsyncIterable<string>>
  | Effect.Effect<string, unknown>
  | Stream.Stream<string, unknown>

/** An agent's handler. */
export type Handler = (input: RunInput) => HandlerOutput

/** The handler a server runs: the user's, or the chat handler; `streaming` says whether the caller reads a stream. */
export class AgentHandler extends Context.Tag("agent-mesh/agent/AgentHandler")<
  AgentHandler,
  (input: RunInput, streaming: boolean) => HandlerOutput
>() {}

/** A user's handler as the server's. */
export const layerHandler = (handler: Handler): Layer.Layer<AgentHandler> => Layer.succeed(AgentHandler, (input) => handler(input))

const providerFailed = (e: ModelError) =>
  new ProviderFailed({ code: e.code, message: e.message, ...(e.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: e.retryAfterSeconds }) })

/** The LLM chat agent over the `ModelProvider` in context: system prompt, history, message → `model`. */
export const layerChat = (model: string): Layer.Layer<AgentHandler, never, ModelProvider> =>
  Layer.effect(
    AgentHandler,
    Effect.map(ModelProvider, (provider) => (input: RunInput, streaming: boolean): HandlerOutput => {
      const messages: Array<ChatMessage> = [
        ...(input.systemPrompt === undefined ? [] : [{ role: "system" as const, content: input.systemPrompt }]),
        // Only the operator's system prompt: a caller's history may not slip in system turns of its own.
        ...input.history.filter((m) => m.role !== "system"),
        { role: "user", content: input.message }
      ]
      const request = { model, messages }
      return streaming
        ? Stream.mapError(provider.stream(request), providerFailed)
        : Effect.mapError(Effect.map(provider.chat(request), (r) => r.text), providerFailed)
    })
  )

const isStream = (u: unknown): u is Stream.Stream<string, unknown> => typeof u === "object" && u !== null && Stream.StreamTypeId in u
const isAsyncIterable = (u: unknown): u is AsyncIterable<string> =>
  typeof u === "object" && u !== null && Symbol.asyncIterator in u

/**
 * An async iterable whose early release aborts first and does not wait: a generator suspended at an `await` only
 * settles `return()` once that await does, which may be never (an await on the very signal being aborted).
 */
const releasing = (iterable: AsyncIterable<string>, abort: () => void): AsyncIterable<string> => ({
  [Symbol.asyncIterator]: () => {
    const inner = iterable[Symbol.asyncIterator]()
    let finished = false
    return {
      next: () =>
        inner.next().then((r) => {
          if (r.done === true) finished = true
          return r
        }),
      return: () => {
        // The stream releases its iterator after the last item too; only an early release is a cancellation.
        if (!finished) abort()
        void Promise.resolve(inner.return?.()).catch(() => undefined)
        return Promise.resolve({ done: true, value: undefined })
      }
    }
  }
})

/** Runs a handler's output, giving each chunk to `onChunk`; `abort` runs when an async iterable is let go before its end. */
export const consume = (output: HandlerOutput, onChunk: (chunk: unknown) => void, abort: () => void): Effect.Effect<void, unknown> => {
  const iterate = (it: AsyncIterable<string>) =>
    Stream.runForEach(Stream.fromAsyncIterable(releasing(it, abort), (e) => e), (chunk) => Effect.sync(() => onChunk(chunk)))
  if (typeof output === "string") return Effect.sync(() => onChunk(output))
  if (isStream(output)) return Stream.runForEach(output, (chunk) => Effect.sync(() => onChunk(chunk)))
  if (Effect.isEffect(output)) return Effect.map(output, onChunk)
  if (isAsyncIterable(output)) return iterate(output)
  return Effect.flatMap(
    Effect.tryPromise({ try: () => output, catch: (e) => e }),
    (v): Effect.Effect<void, unknown> =>
      typeof v === "string" ? Effect.sync(() => onChunk(v)) : isAsyncIterable(v) ? iterate(v) : Effect.die(new Error("handler resolved to neither a string nor an async iterable"))
  )
}
