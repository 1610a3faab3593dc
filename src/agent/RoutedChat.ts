/**
 * The LLM chat agent through the `ModelRouter`: an agent served with a provider and a model (a catalogue of one) or
 * with a catalogue answers each message with the router's pick, escalating while the answer scores below the bar.
 *
 * A caller bounds what the agent spends on their behalf by presenting a `model-budget` mandate granted to this
 * agent, as `context.modelBudgetMandate` of the run (the token). Under mesh-sig it is bound to its presenter as a
 * task mandate is (`Auth.presentedByGrantor`: granted by the calling DID, else 403 MANDATE_GRANTOR_MISMATCH before a
 * model is asked), so a token seen once cannot be replayed by someone else to spend its grantor's budget; under
 * bearer and none it is a bearer credential. It is verified (signature chain, expiry, revocation, grantee = this
 * agent) on every run, and its budget is one `ModelBudget` per mandate, kept across runs
 * while the mandate lives, so presenting it again spends what is left rather than a fresh budget. At most
 * `MAX_MANDATE_BUDGETS` live mandates are tracked; beyond that a new one is refused with AGENT_BUSY rather than
 * forgetting what a live one spent (in memory: a restart forgets, so keep mandates short-lived). A run that no model
 * fits in what is left ends with 409 BUDGET_EXHAUSTED. Without a mandate the agent is unbounded: the strongest
 * model answers and nothing escalates (as before routing, for an agent of one model).
 *
 * A streamed run with a mandate is answered whole, as one chunk, because its budget is settled on the whole answer;
 * without one it streams from the pick.
 *
 * Every provider call, escalations included, is also charged to a presented task mandate's `computeLimit`
 * (`RunInput.compute`, docs/agent.md §5): reserved before the call, settled with the usage reported, refused with
 * COMPUTE_LIMIT_EXCEEDED before the provider is asked.
 *
 * With `mcpServers`, the model is offered those servers' tools and each routed call is a bounded tool loop
 * (`ToolLoop`): the router sees one call whose usage is the loop's, every model call in it metered as above. Such an
 * agent answers a streamed run whole, as one chunk.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { KeyResolver } from "../core/KeyResolver.js"
import type { Keys } from "../core/Keys.js"
import { type Mandate, verifyMandateChain } from "../core/Mandate.js"
import { MandateCache } from "../core/MandateCache.js"
import { type ChatMessage, type ChatRequest, type ModelError, type ModelProviderApi } from "../core/ModelProvider.js"
import { usdMicros } from "../core/Constraints.js"
import { make as makeBudget, type ModelBudget, type ModelBudgetExhausted, type Amount, available } from "../model/ModelBudget.js"
import { ModelRouter } from "../model/ModelRouter.js"
import { AgentConflict, AgentForbidden, AgentUnavailable, ProviderFailed } from "./AgentError.js"
import { presentedByGrantor } from "./Auth.js"
import { AgentHandler, type ChatOptions, DEFAULT_METERED_MAX_TOKENS, type HandlerOutput, meteredChat, meteredStream, type RunInput } from "./Handler.js"
import { Identity } from "./Identity.js"
import * as ToolLoop from "./ToolLoop.js"
import { tracedStream } from "../http/Tracing.js"

/** Most live model-budget mandates whose spending one agent tracks. */
export const MAX_MANDATE_BUDGETS = 1024

/** The context key a caller presents a model-budget mandate under. */
export const MANDATE_CONTEXT_KEY = "modelBudgetMandate"

const UNBOUNDED: Amount = { tokens: Number.MAX_SAFE_INTEGER, micros: Number.MAX_SAFE_INTEGER }

const providerFailed = (e: ModelError) =>
  new ProviderFailed({ code: e.code, message: e.message, ...(e.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: e.retryAfterSeconds }) })

const budgetExhausted = (e: ModelBudgetExhausted) => new AgentConflict({ code: "BUDGET_EXHAUSTED", message: e.message })

const withoutMaxTokens = ({ maxTokens: _, ...request }: ChatRequest): ChatRequest => request

interface Tracked {
  readonly budget: ModelBudget
  readonly expiresAt: number
  calls: number
}

/** The routed chat handler over the `ModelRouter` in context; mandates verified with `KeyResolver` and `Keys`. */
export const layer = (options: ChatOptions = {}): Layer.Layer<AgentHandler, never, ModelRouter | Identity | KeyResolver | Keys> => Layer.effect(
  AgentHandler,
  Effect.gen(function* () {
    const router = yield* ModelRouter
    const { did } = yield* Identity
    const context = yield* Effect.context<KeyResolver | Keys>()
    // The verifier parses the same token through this cache: the presenter check costs no second parse.
    const mandateCache = Option.getOrUndefined(yield* Effect.serviceOption(MandateCache))
    const tracked = new Map<string, Tracked>()

    /** The budget of a verified mandate: the one already tracked, or a new one (after dropping expired ones). */
    const budgetOf = (m: Mandate<"model-budget">) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.suspend(() => {
          const known = tracked.get(m.jti)
          if (known !== undefined) return Effect.succeed(known)
          if (tracked.size >= MAX_MANDATE_BUDGETS) {
            for (const [jti, t] of tracked) if (t.expiresAt * 1000 <= now) tracked.delete(jti)
          }
          if (tracked.size >= MAX_MANDATE_BUDGETS) {
            return Effect.fail(new AgentUnavailable({ code: "AGENT_BUSY", message: "too many live model-budget mandates; retry later", retryAfterSeconds: 60 }))
          }
          return Effect.map(makeBudget({ tokens: m.constraints.token_budget, micros: usdMicros(m.constraints.cost_budget_usd) }), (budget) => {
            const t: Tracked = { budget, expiresAt: m.expiresAt, calls: 0 }
            tracked.set(m.jti, t)
            return t
          })
        }))

    /** The bound on an answer: the agent's own, else under a task mandate the one its reservation needs. */
    const outputBound = (compute: RunInput["compute"]) => options.maxOutputTokens ?? (compute.metered ? DEFAULT_METERED_MAX_TOKENS : undefined)

    const servers = options.mcpServers ?? []

    /** The tools of every configured MCP server, listed through the run's guarded access. */
    const toolsOf = (input: RunInput) =>
      Effect.map(
        Effect.forEach(servers, (server) => Effect.map(input.mcp(server).listToolsEffect(), (tools) => ({ server, tools }))),
        ToolLoop.offer
      ).pipe(
        Effect.tapError((e) => Effect.logWarning(`MCP tools not listed: ${e.code}: ${e.message}`)),
        Effect.mapError((e) => new AgentUnavailable({ code: "AGENT_BUSY", message: `an MCP server of this agent cannot be used (${e.code}); retry later`, retryAfterSeconds: 5 }))
      )

    const routed = (messages: ReadonlyArray<ChatMessage>, token: unknown, input: RunInput) =>
      Effect.gen(function* () {
        const compute = input.compute
        const maxOutputTokens = outputBound(compute)
        // Unbounded (no model-budget mandate, no task mandate, no set bound), a call carries no maxTokens: the
        // provider's own default applies, as it would without routing.
        const bare = token === undefined && maxOutputTokens === undefined
        const offered = servers.length === 0 ? [] : yield* toolsOf(input)
        const once = (provider: ModelProviderApi, request: ChatRequest) => meteredChat(provider, compute, bare ? withoutMaxTokens(request) : request)
        const metering = {
          call: offered.length === 0
            ? once
            : (provider: ModelProviderApi, request: ChatRequest) =>
              ToolLoop.run({ request, offered, input, ask: (r) => once(provider, r), ...(options.maxToolSteps === undefined ? {} : { maxSteps: options.maxToolSteps }) }),
          ...(maxOutputTokens === undefined ? {} : { maxOutputTokens })
        }
        if (token === undefined) {
          const budget = yield* makeBudget(UNBOUNDED)
          return yield* router.route({ messages, taskType: "REASONING", qualityThreshold: 0, budget, share: UNBOUNDED, mode: "PROPORTIONAL", ...metering })
        }
        if (typeof token !== "string") {
          return yield* Effect.fail(new AgentForbidden({ code: "MANDATE_INVALID", message: `context.${MANDATE_CONTEXT_KEY} must be a mandate token` }))
        }
        yield* presentedByGrantor(token, input.caller, mandateCache)
        const mandate = (yield* verifyMandateChain(token, { expectedGrantee: did, kinds: ["model-budget"] }).pipe(
          Effect.provide(context),
          Effect.mapError((e) => new AgentForbidden({ code: "MANDATE_INVALID", message: e.message, reason: e.reason }))
        )) as Mandate<"model-budget">
        const t = yield* budgetOf(mandate)
        const steps = Math.max(1, mandate.constraints.expected_steps - t.calls++)
        const left = available(t.budget.unsafeState())
        return yield* router.route({
          messages,
          taskType: mandate.constraints.task_type,
          qualityThreshold: mandate.constraints.quality_threshold,
          budget: t.budget,
          share: { tokens: Math.floor(left.tokens / steps), micros: Math.floor(left.micros / steps) },
          mode: "THOMPSON",
          ...metering
        })
      }).pipe(
        Effect.catchTags({
          ModelError: (e) => Effect.fail(providerFailed(e)),
          ModelBudgetExhausted: (e) => Effect.fail(budgetExhausted(e))
        })
      )

    const streamRequest = (model: string, messages: ReadonlyArray<ChatMessage>, input: RunInput): ChatRequest => {
      const maxTokens = outputBound(input.compute)
      return maxTokens === undefined ? { model, messages } : { model, messages, maxTokens }
    }

    return (input: RunInput, streaming: boolean): HandlerOutput => {
      const messages: Array<ChatMessage> = [
        ...(input.systemPrompt === undefined ? [] : [{ role: "system" as const, content: input.systemPrompt }]),
        // Only the operator's system prompt: a caller's history may not slip in system turns of its own.
        ...input.history.filter((m) => m.role !== "system"),
        { role: "user", content: input.message }
      ]
      const token = input.context[MANDATE_CONTEXT_KEY]
      if (streaming && token === undefined && servers.length === 0) {
        return Stream.unwrap(
          Effect.map(router.choose({ messages, taskType: "REASONING", qualityThreshold: 0, share: UNBOUNDED, mode: "PROPORTIONAL" }), (m) => {
            const provider = router.providerOf(m)
            return provider === undefined
              ? Stream.fail(new ProviderFailed({ code: "PROVIDER_REJECTED", message: `no provider for model ${m.id}` }))
              : Stream.catchTag(
                tracedStream("model.stream", { kind: "client", attributes: { "gen_ai.request.model": m.id, "mesh.model.provider": m.provider } })(
                  meteredStream(provider, input.compute, streamRequest(m.id, messages, input))
                ),
                "ModelError",
                (e) => Stream.fail(providerFailed(e))
              )
          })
        ).pipe(Stream.catchTag("ModelBudgetExhausted", (e) => Stream.fail(budgetExhausted(e))))
      }
      return Effect.map(routed(messages, token, input), (r) => r.content)
    }
  })
)
