/**
 * Mesh agents as tools of the Vercel AI SDK (`agent-mesh/ai-sdk`): `meshAgentTool(didHash, options)` is an AI SDK
 * `tool` whose execution calls the agent through the hub (signed with mesh-sig when given an identity, with a task
 * mandate when given one), and `meshTools({ hub, query })` turns the hub's search hits into a tool set for
 * `generateText` / `streamText`.
 *
 * A call's failure is thrown as a `MeshToolError` whose message starts with the mesh's code (kept as `code`), which
 * the AI SDK hands the model as a tool error; a pause at a human gate is an output (`status: "approval_required"`), not an error, so the model can
 * tell the user what to approve. With `stream`, the agent's chunks are preliminary outputs (the AI SDK's
 * async-iterable `execute`), the text so far each time, the whole reply last.
 *
 * `ai` is an optional peer dependency: this module is reached only by its own subpath, never from `agent-mesh/promise`.
 *
 * Floor: promise (docs/architecture.md §3).
 */
import { jsonSchema, tool, type Tool, type ToolSet } from "ai"
import type { ApprovalRequired } from "../agent/AgentApi.js"
import type * as AgentClient from "../agent/AgentClient.js"
import type { PrivateKeyInput } from "../core/Keys.js"
import { createAgentClient, type AgentClientPromise } from "./AgentPromise.js"
import { createMeshClient } from "./MeshClientPromise.js"

/** What a mesh agent tool sends beside the message. */
export interface MeshAgentToolOptions {
  /** The hub that resolves the didHash. */
  readonly hub: string
  /** What the model reads about the tool; default names the agent. */
  readonly description?: string
  /** Sign calls with mesh-sig as this identity. */
  readonly signAs?: { readonly did: string; readonly privateKey: PrivateKeyInput }
  /** A task mandate granted to the agent: a token, or a function giving one per call. */
  readonly mandate?: string | (() => string | Promise<string>)
  /** `Authorization: Bearer` for agents with bearer auth. */
  readonly bearerToken?: string
  /** The capability asked for. */
  readonly capability?: string
  /** Keep one conversation with the agent across calls (its memory, if it keeps one). */
  readonly sessionId?: string
  /** Stream the agent's reply as preliminary tool outputs. */
  readonly stream?: boolean
  /** An agent client to reuse (default: one per hub, made on first use). */
  readonly client?: AgentClientPromise
}

/** What the tool returns to the model. */
export type MeshAgentToolOutput =
  | { readonly status: "completed"; readonly message: string; readonly sessionId: string }
  | { readonly status: "streaming"; readonly message: string }
  | {
    readonly status: "approval_required"
    readonly taskId: string
    readonly capability: string
    readonly grantor: string
    readonly sessionId: string
    readonly note: string
  }

/** The tool's input: the message for the agent. */
export interface MeshAgentToolInput {
  readonly message: string
}

// Checked here, so a malformed call is the AI SDK's invalid tool input (told to the model), never sent to the agent.
const inputSchema = jsonSchema<MeshAgentToolInput>(
  {
    type: "object",
    properties: { message: { type: "string", description: "the message for the agent" } },
    required: ["message"],
    additionalProperties: false
  },
  {
    validate: (value) =>
      typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as { message?: unknown }).message === "string" && Object.keys(value).length === 1
        ? { success: true, value: { message: (value as { message: string }).message } }
        : { success: false, error: new Error("the input must be { message: string }") }
  }
)

/**
 * A failed call as the AI SDK's tool error: the model reads `message`, so it starts with the mesh's code; `code`,
 * `status` and the original error stay on it for code that inspects the step.
 */
export class MeshToolError extends Error {
  readonly code: string
  readonly status: number | undefined
  constructor(readonly error: { readonly code: string; readonly message: string; readonly status?: number | undefined }) {
    super(`${error.code}: ${error.message}`)
    this.name = "MeshToolError"
    this.code = error.code
    this.status = error.status
  }
}

/** Rethrows a coded failure as a `MeshToolError`; anything else as it is. */
const coded = (e: unknown): never => {
  if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" && "message" in e && typeof e.message === "string") {
    throw new MeshToolError(e as { code: string; message: string; status?: number })
  }
  throw e
}

const clients = new Map<string, AgentClientPromise>()
const clientFor = (hub: string): AgentClientPromise => {
  let c = clients.get(hub)
  if (c === undefined) {
    c = createAgentClient({ hubUrl: hub })
    clients.set(hub, c)
  }
  return c
}

const paused = (a: ApprovalRequired): MeshAgentToolOutput => ({
  status: "approval_required",
  taskId: a.approvalRequired.taskId,
  capability: a.approvalRequired.capability,
  grantor: a.approvalRequired.grantor,
  sessionId: a.sessionId,
  note: `the agent waits for ${a.approvalRequired.grantor} to approve ${a.approvalRequired.capability}; ask the user`
})

/** An AI SDK tool calling the mesh agent with this didHash. */
export const meshAgentTool = (didHash: string, options: MeshAgentToolOptions): Tool<MeshAgentToolInput, MeshAgentToolOutput> => {
  const client = options.client ?? clientFor(options.hub)
  const callOptions = async (): Promise<AgentClient.CallOptions> => {
    const mandate = typeof options.mandate === "function" ? await options.mandate() : options.mandate
    return {
      ...(options.signAs === undefined ? {} : { signAs: options.signAs }),
      ...(mandate === undefined ? {} : { mandate }),
      ...(options.bearerToken === undefined ? {} : { bearerToken: options.bearerToken }),
      ...(options.capability === undefined ? {} : { capability: options.capability }),
      ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId })
    }
  }
  const description = options.description ?? `Send a message to the mesh agent ${didHash} and get its reply.`
  if (options.stream === true) {
    return tool({
      description,
      inputSchema,
      execute: async function* ({ message }) {
        let text = ""
        const events = client.stream(didHash, message, await callOptions())[Symbol.asyncIterator]()
        // Let go of the agent's stream when the SDK stops reading (an aborted generation).
        try {
          for (;;) {
            const next = await events.next().catch(coded)
            if (next.done === true) break
            const event = next.value
            if (event.type === "chunk") {
              text += event.text
              yield { status: "streaming", message: text } satisfies MeshAgentToolOutput
            } else if (event.type === "done") {
              yield { status: "completed", message: event.message, sessionId: event.sessionId } satisfies MeshAgentToolOutput
            } else {
              const { type: _, ...a } = event
              yield paused(a)
            }
          }
        } finally {
          await events.return?.()
        }
      }
    })
  }
  return tool({
    description,
    inputSchema,
    execute: async ({ message }) => {
      const r = await client.call(didHash, message, await callOptions()).catch(coded)
      return "approvalRequired" in r ? paused(r) : { status: "completed", message: r.message, sessionId: r.sessionId }
    }
  })
}

/** What `meshTools` searches for, and the options every tool of the set shares. */
export interface MeshToolsOptions extends Omit<MeshAgentToolOptions, "description" | "sessionId"> {
  /** The search words (the hub's `/v1/search`). */
  readonly query: string
  /** Most agents in the set (default 10, at most the hub's own bound). */
  readonly limit?: number
}

// A tool name both the OpenAI-compatible and the Anthropic APIs accept.
const toolName = (name: string): string => name.replace(/^did:mesh:/, "").replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 60) || "agent"

/** A tool set of the agents the hub finds for `query`, one `meshAgentTool` each, named after the agent. */
export const meshTools = async (options: MeshToolsOptions): Promise<ToolSet> => {
  const hub = await createMeshClient({ hubUrl: options.hub })
  try {
    const { items } = await hub.search(options.query, options.limit ?? 10)
    const tools: ToolSet = {}
    for (const hit of items) {
      if (hit.kind !== "agent") continue
      let name = toolName(hit.name)
      for (let i = 2; Object.hasOwn(tools, name); i++) name = `${toolName(hit.name)}_${i}`
      tools[name] = meshAgentTool(hit.didHash, { ...options, description: `The mesh agent ${hit.name} (${hit.did}): send it a message, get its reply.` })
    }
    return tools
  } finally {
    await hub.close()
  }
}
