/**
 * The bounded tool loop of an LLM agent: the model is offered the tools of the agent's MCP servers as function
 * tools; each answer that asks for calls gets their results as tool turns and is asked again, at most `maxSteps`
 * times; then it is asked once more with tool calls forbidden (`toolChoice: "none"`), so the loop ends with an answer whatever the model does.
 *
 * Each call goes through the handler's `mcp` access, so the task guard decides on it as `mcp:<server>/<tool>`. A
 * refusal by the guard (a capability not allowed, an action limit reached) and a tool's failure are told to the
 * model as an error result, so it can answer without that tool; a pause at a human gate, a store failure and the
 * run's cancellation end the run as they would a handler's.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import type { AgentForbidden, AgentUnavailable } from "./AgentError.js"
import type { GatePaused, RunInput } from "./Handler.js"
import { resultText, type McpToolInfo } from "./McpClient.js"
import type { ChatRequest, ChatResult, ChatTurn, ToolCall, ToolSpec } from "../core/ModelProvider.js"
import { isRecord } from "../core/internal/record.js"

/** Model calls with tools a run makes at most before it is asked to answer without them; default of `maxToolSteps`. */
export const DEFAULT_MAX_TOOL_STEPS = 8

/** Longest tool result given back to the model, in characters; the rest is cut (a tool can return megabytes). */
export const MAX_TOOL_RESULT_CHARS = 32_000

/** A tool as the model sees it, and the server tool it stands for. */
export interface OfferedTool {
  readonly spec: ToolSpec
  readonly server: string
  readonly tool: string
}

// Function names the OpenAI-compatible and Anthropic APIs both accept.
const functionName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 60) || "tool"

/** The tools of every server, named for the model; a name taken by an earlier server gets a numeric suffix. */
export const offer = (servers: ReadonlyArray<{ readonly server: string; readonly tools: ReadonlyArray<McpToolInfo> }>): ReadonlyArray<OfferedTool> => {
  const taken = new Set<string>()
  const offered: Array<OfferedTool> = []
  for (const { server, tools } of servers) {
    for (const t of tools) {
      const base = functionName(t.name)
      let name = base
      for (let i = 2; taken.has(name); i++) name = `${base}_${i}`
      taken.add(name)
      offered.push({ server, tool: t.name, spec: { name, inputSchema: t.inputSchema, ...(t.description === undefined ? {} : { description: t.description }) } })
    }
  }
  return offered
}

/** The outcome of one call as the model reads it. */
interface Told {
  readonly content: string
  readonly isError: boolean
}

const cut = (text: string) => (text.length > MAX_TOOL_RESULT_CHARS ? `${text.slice(0, MAX_TOOL_RESULT_CHARS)}…` : text)

/** Guard refusals the model is told of; any other code (the run is over, the mandate is not valid) ends the run. */
const TOLD_REFUSALS = new Set(["CAPABILITY_NOT_PERMITTED", "ACTION_LIMIT_EXCEEDED", "REVERSIBILITY_VIOLATION", "DATA_ACCESS_VIOLATION", "HUMAN_GATE_DENIED"])

/** Runs one call the model asked for, through the handler's guarded MCP access. */
const execute = (input: RunInput, offered: ReadonlyArray<OfferedTool>, call: ToolCall): Effect.Effect<Told, AgentForbidden | AgentUnavailable | GatePaused> => {
  const target = offered.find((o) => o.spec.name === call.name)
  if (target === undefined) return Effect.succeed({ content: `no tool named ${call.name}`, isError: true })
  let args: unknown
  try {
    args = JSON.parse(call.arguments.length === 0 ? "{}" : call.arguments)
  } catch {
    return Effect.succeed({ content: `the arguments of ${call.name} are not JSON`, isError: true })
  }
  if (!isRecord(args)) return Effect.succeed({ content: `the arguments of ${call.name} must be a JSON object`, isError: true })
  return input.mcp(target.server).callToolEffect(target.tool, args).pipe(
    Effect.map((result): Told => ({ content: cut(resultText(result)), isError: result.isError })),
    Effect.catchTags({
      McpError: (e) => Effect.succeed<Told>({ content: `${e.code}: ${e.message}`, isError: true }),
      AgentForbidden: (e) => (TOLD_REFUSALS.has(e.code) ? Effect.succeed<Told>({ content: `refused: ${e.code}: ${e.message}`, isError: true }) : Effect.fail(e))
    })
  )
}

/**
 * Answers `request` with the tools offered: `ask` is one model call (metered by the caller), repeated while the
 * model asks for tools, at most `maxSteps` times. The result's usage is the sum of every call's.
 */
export const run = <E>(options: {
  readonly request: ChatRequest
  readonly offered: ReadonlyArray<OfferedTool>
  readonly input: RunInput
  readonly ask: (request: ChatRequest) => Effect.Effect<ChatResult, E>
  readonly maxSteps?: number
}): Effect.Effect<ChatResult, E | AgentForbidden | AgentUnavailable | GatePaused> =>
  Effect.gen(function* () {
    const maxSteps = options.maxSteps ?? DEFAULT_MAX_TOOL_STEPS
    const tools = options.offered.map((o) => o.spec)
    const turns: Array<ChatTurn> = [...options.request.messages]
    let inputTokens = 0
    let outputTokens = 0
    const total = (r: ChatResult): ChatResult => ({ ...r, usage: { inputTokens: inputTokens + r.usage.inputTokens, outputTokens: outputTokens + r.usage.outputTokens } })
    for (let step = 0; step < maxSteps && tools.length > 0; step++) {
      const result = yield* options.ask({ ...options.request, messages: turns, tools })
      const calls = result.toolCalls ?? []
      if (calls.length === 0) return total(result)
      inputTokens += result.usage.inputTokens
      outputTokens += result.usage.outputTokens
      turns.push({ role: "assistant", content: result.text, toolCalls: calls })
      // In order, one at a time: the guard's journal replays a paused run step by step, which needs a fixed order.
      for (const call of calls) {
        const told = yield* execute(options.input, options.offered, call)
        turns.push({ role: "tool", toolCallId: call.id, name: call.name, content: told.content, ...(told.isError ? { isError: true } : {}) })
      }
    }
    // The tools stay declared (a conversation with calls in it needs them) but may no longer be called.
    return total(yield* options.ask({ ...options.request, messages: turns, ...(tools.length > 0 ? { tools, toolChoice: "none" as const } : {}) }))
  })
