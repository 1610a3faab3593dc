/**
 * What an agent's handler receives and returns, and how its output is run. A handler may answer in five forms (a
 * string, a Promise, an async iterable, an Effect, a Stream); they all go through `consume`, so every form streams,
 * cancels and fails the same way. Only streams and iterables go through `Stream`: a one-element stream costs far
 * more than the reply. An agent without a handler answers through the model router (`RoutedChat`), whose every call
 * goes through `meteredChat` / `meteredStream` here: reserved against the presented task mandate's compute limit
 * before the provider is asked and settled with the usage it reported, so concurrent calls cannot together overrun
 * the limit.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { Caller, ChatMessage, CommitRequest } from "./AgentApi.js"
import type { AgentCallError, CallOptions, CallResult } from "./AgentClient.js"
import { type AgentForbidden, type AgentUnavailable } from "./AgentError.js"
import type { McpError, McpToolInfo, McpToolResult } from "./McpClient.js"
import type { InvalidAmount } from "../core/Money.js"
import {
  type ChatRequest,
  type ChatStreamEvent,
  type ChatUsage,
  deltaText,
  estimatePromptTokens,
  estimateTokens,
  type ModelError,
  type ModelProviderApi
} from "../core/ModelProvider.js"

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

/**
 * Tokens reserved for one model call against the presented task mandate's `computeLimit`. `settle` with what the
 * call really spent (the provider's input + output usage) once it is over: the unused part goes back, an overrun is
 * charged up to the limit. A store failure while settling is logged and leaves the reservation as it was.
 */
export interface ComputeReservation {
  /** Tokens reserved (0 when nothing is metered: no mandate was presented). */
  readonly llmTokens: number
  readonly settle: (spentLlmTokens: number) => Effect.Effect<void>
}

/** Meters the model calls of a run against the task mandate the caller presented. */
export interface ComputeMeter {
  /** Whether a task mandate was presented; without one nothing is charged and every reservation is free. */
  readonly metered: boolean
  /**
   * Reserves an upper bound on a call's tokens before it is made, on every link of the mandate at once: fails with
   * `AgentForbidden` COMPUTE_LIMIT_EXCEEDED (hard stop) when the rest of a limit cannot cover it, or the mandate's
   * own code when it does not verify for this agent.
   */
  readonly reserve: (llmTokens: number) => Effect.Effect<ComputeReservation, AgentForbidden | AgentUnavailable>
}

/** The capability a call of `tool` on the MCP server `server` is guarded as. */
export const mcpCapability = (server: string, tool: string): string => `mcp:${server}/${tool}`

/** The tools of an MCP server as a handler types them: each tool's name and its arguments. */
export type McpToolArgs = Readonly<Record<string, Readonly<Record<string, unknown>>>>

/**
 * A handler's access to one MCP server (a configured name or a registered didHash). Every tool call is first asked
 * of the task guard as capability `mcp:<server>/<tool>`, so the mandate's allowed and blocked lists, human gates
 * and action limits apply to tools; a tool's own failure is a result with `isError`, not a rejection. `Tools` types
 * the calls (`input.mcp<{ add: { a: number; b: number } }>(didHash)`); the server still checks the arguments.
 */
export interface McpAccess<Tools extends McpToolArgs = McpToolArgs> {
  readonly server: string
  readonly listTools: () => Promise<ReadonlyArray<McpToolInfo>>
  /** Guards, then calls; `options` are what the guard is told (default: irreversible, no data scopes). */
  readonly callTool: <K extends keyof Tools & string>(tool: K, args?: Tools[K], options?: GuardOptions) => Promise<McpToolResult>
  readonly listToolsEffect: () => Effect.Effect<ReadonlyArray<McpToolInfo>, McpError>
  readonly callToolEffect: <K extends keyof Tools & string>(tool: K, args?: Tools[K], options?: GuardOptions) => Effect.Effect<McpToolResult, McpError | GuardError>
}

/**
 * The capability a call of the agent `didHash` is guarded as: `agent:<didHash>`, or `agent:<didHash>/<capability>`
 * when the call names the capability it asks for.
 */
export const agentCapability = (didHash: string, capability?: string): string =>
  capability === undefined ? `agent:${didHash}` : `agent:${didHash}/${capability}`

/**
 * What a handler's call to another agent sends beside the message (the `CallOptions` of the same names), and what
 * the task guard is told of it. Nothing else goes: the request is signed as this agent and carries the served
 * request's correlation id and trace context, never the mandate this run was called under.
 */
export interface AgentCallOptions extends Pick<CallOptions, "sessionId" | "history" | "context" | "mandate" | "capability" | "commit" | "idempotencyKey"> {
  /** What the task guard is told (default: irreversible, no data scopes, a description naming the agent called). */
  readonly guard?: GuardOptions
}

/** Why a call to another agent failed: the guard refused or paused it, or the call failed (`AgentCallError`: its own code or the callee's). */
export type AgentCallFailure = AgentCallError | GuardError

/**
 * The request's correlation id and W3C trace context, to pass on to the calls a handler makes (spread into
 * `AgentClient` / `AgentPromise` call options): what an Effect handler's calls carry by themselves.
 */
export interface TraceContext {
  readonly correlationId?: string
  readonly traceparent?: string
}

/**
 * What a handler receives. `signal` and `trace` are made when first read (getters), so a copy of the input made by
 * spreading it (`{ ...input }`) carries neither: pass them on by name.
 */
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
  /** Reserves and settles the tokens of model calls against the mandate's `computeLimit` (the chat agent's calls go through it). */
  readonly compute: ComputeMeter
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
  /**
   * Charges the caller for this run under the spending mandate it presented (a payment or cart mandate granted to this
   * agent): the spending guard verifies the chain, checks the merchant (default this agent's DID) and charges the
   * amount against every link's limit, then the amount is added to the cost reported for the commit token. Rejects
   * with `AgentForbidden` (`MANDATE_REQUIRED`, `MANDATE_INVALID`, `LIMIT_EXCEEDED`, `MERCHANT_NOT_ALLOWED`) or
   * `InvalidAmount`. Charge before the work it pays for.
   */
  readonly charge: (usd: number | string, options?: { readonly merchant?: string }) => Promise<Charge>
  /** `charge` as an Effect. */
  readonly chargeEffect: (usd: number | string, options?: { readonly merchant?: string }) => Effect.Effect<Charge, ChargeError>
  /** Access to an MCP server by configured name or registered didHash, each tool call under the task guard. */
  readonly mcp: <Tools extends McpToolArgs = McpToolArgs>(server: string) => McpAccess<Tools>
  /**
   * Calls the agent registered on the hub as `didHash`, as this agent: signed with mesh-sig by this agent's DID,
   * with the served request's correlation id and trace context; under a task mandate it is first asked of the guard
   * as `agent:<didHash>` (`agent:<didHash>/<capability>` when `capability` is named), and a refusal sends nothing.
   * Resolves with the reply, or the callee's pause at a human gate; rejects with `AgentCallError`
   * (`IDENTITY_NOT_CONFIGURED`, `HUB_NOT_CONFIGURED`, `AGENT_NOT_FOUND`, or the callee's own code) or as `guard` does.
   */
  readonly call: (didHash: string, message: string, options?: AgentCallOptions) => Promise<CallResult>
  /** `call` as an Effect. */
  readonly callEffect: (didHash: string, message: string, options?: AgentCallOptions) => Effect.Effect<CallResult, AgentCallFailure>
  /**
   * `call`, streamed: the reply's chunks as they come (return it to relay them); a pause of the callee at a human
   * gate ends it with `AgentCallError` `APPROVAL_REQUIRED`.
   */
  readonly callStream: (didHash: string, message: string, options?: Omit<AgentCallOptions, "idempotencyKey">) => AsyncIterable<string>
  /** `callStream` as an Effect `Stream`. */
  readonly callStreamEffect: (didHash: string, message: string, options?: Omit<AgentCallOptions, "idempotencyKey">) => Stream.Stream<string, AgentCallFailure>
  /** The correlation id and trace context of the request being served, for the calls the handler makes. */
  readonly trace: TraceContext
}

/** A charge `RunInput.charge` made: the amount in Money's canonical form and the mandate it was charged under. */
export interface Charge {
  readonly amountUsd: string
  readonly mandateJti: string
  readonly mandateKind: "intent" | "cart" | "payment"
}

/** Why `RunInput.charge` refused. */
export type ChargeError = AgentForbidden | AgentUnavailable | InvalidAmount

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

/** Options of the chat agent. */
export interface ChatOptions {
  /**
   * `maxTokens` of every call (at most the model's own bound). Unset, calls carry none, except under a task mandate,
   * whose reservation needs a bound on the answer (there `DEFAULT_METERED_MAX_TOKENS`), or a model-budget mandate
   * (there the router's fit within what is left).
   */
  readonly maxOutputTokens?: number
  /**
   * MCP servers (configured names or registered didHashes) whose tools the model is offered as function tools, each
   * call under the task guard as `mcp:<server>/<tool>` (`ToolLoop`).
   */
  readonly mcpServers?: ReadonlyArray<string>
  /** Model calls with tools one answer may take before the model must answer in text; default 8. */
  readonly maxToolSteps?: number
}

/** The bound on an answer reserved and asked for under a task mandate when the agent sets none. */
export const DEFAULT_METERED_MAX_TOKENS = 1024

const spentOf = (usage: ChatUsage): number => usage.inputTokens + usage.outputTokens

/**
 * A chat call metered against the run's mandate: the prompt estimate plus `maxTokens` is reserved before the
 * provider is asked (a refusal costs no provider call), then settled with the usage it reported. A call the
 * provider refused (a `ModelError` before any answer) spent nothing; one cut off midway keeps its whole
 * reservation, as nobody knows what it spent.
 */
export const meteredChat = (provider: ModelProviderApi, meter: ComputeMeter, request: ChatRequest) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(meter.reserve(estimatePromptTokens(request) + (request.maxTokens ?? 0)), (reservation) =>
      Effect.flatMap(Effect.exit(restore(provider.chat(request))), (exit) =>
        Effect.zipRight(
          Exit.match(exit, {
            onSuccess: (result) => reservation.settle(spentOf(result.usage)),
            onFailure: (cause) => (Cause.isInterrupted(cause) ? Effect.void : reservation.settle(0))
          }),
          exit
        )
      )
    )
  )

/** The same for a streamed answer: settled from the usage of its `Done` event (estimated when the provider gives none). */
export const meteredStream = (provider: ModelProviderApi, meter: ComputeMeter, request: ChatRequest): Stream.Stream<string, ModelError | AgentForbidden | AgentUnavailable> => {
  const events: Stream.Stream<ChatStreamEvent, ModelError> =
    provider.streamEvents?.(request) ??
    Stream.suspend(() => {
      let text = ""
      return Stream.concat(
        Stream.map(provider.stream(request), (delta): ChatStreamEvent => {
          text += delta
          return { _tag: "Delta", text: delta }
        }),
        Stream.suspend(() =>
          Stream.succeed<ChatStreamEvent>({
            _tag: "Done",
            result: { text, usage: { inputTokens: estimatePromptTokens(request), outputTokens: estimateTokens(text) }, model: request.model, finishReason: "stop" }
          })
        )
      )
    })
  return Stream.unwrapScoped(
    Effect.gen(function* () {
      let spent: number | undefined
      let answered = false
      let refused = false
      yield* Effect.acquireRelease(meter.reserve(estimatePromptTokens(request) + (request.maxTokens ?? 0)), (reservation) =>
        spent !== undefined ? reservation.settle(spent) : refused ? reservation.settle(0) : Effect.void
      )
      return events.pipe(
        Stream.tap((event) =>
          Effect.sync(() => {
            answered = true
            if (event._tag === "Done") spent = spentOf(event.result.usage)
          })
        ),
        Stream.tapError(() => Effect.sync(() => void (refused = !answered))),
        Stream.filterMap(deltaText)
      )
    })
  )
}

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
