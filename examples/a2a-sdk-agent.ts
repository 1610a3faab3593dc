/**
 * A third-party A2A agent, built with the official `@a2a-js/sdk` server on express (JSON-RPC, 1.0 with the 0.3
 * compatibility layer on): its executor answers each message with what `reply` makes of its text, chunk by chunk as
 * artifact updates. `examples/a2a-bridge.ts` calls it from the mesh; the A2A client tests and the A2A bench use it as
 * the other side.
 *
 *   npx tsx examples/a2a-sdk-agent.ts     (serves one on port 7800 until stopped)
 */
import { type AgentCard, Role, TaskState } from "@a2a-js/sdk"
import { type AgentExecutor, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server"
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express"
import express from "express"
import type * as Http from "node:http"
import type * as net from "node:net"
import { pathToFileURL } from "node:url"

/** A running SDK agent. */
export interface SdkAgent {
  readonly url: string
  readonly port: number
  readonly close: () => Promise<void>
}

const textPart = (value: string) => ({ content: { $case: "text" as const, value }, metadata: undefined, filename: "", mediaType: "" })

/** Starts an SDK agent on 127.0.0.1 (port 0: any free one). */
export const startSdkAgent = (options: { readonly name?: string; readonly port?: number; readonly reply: (text: string) => ReadonlyArray<string> }): Promise<SdkAgent> =>
  new Promise((resolve) => {
    const app = express()
    const server: Http.Server = app.listen(options.port ?? 0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      const url = `http://127.0.0.1:${port}`
      const card: AgentCard = {
        name: options.name ?? "sdk-agent",
        description: "An agent on the official A2A SDK.",
        supportedInterfaces: [
          { url: `${url}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
          { url: `${url}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" }
        ],
        provider: undefined,
        version: "1.0.0",
        capabilities: { streaming: true, pushNotifications: false, extensions: [] },
        securitySchemes: {},
        securityRequirements: [],
        defaultInputModes: ["text/plain"],
        defaultOutputModes: ["text/plain"],
        skills: [{ id: "echo", name: "echo", description: "Echoes.", tags: ["echo"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
        signatures: []
      }
      const executor: AgentExecutor = {
        execute: async (ctx, bus) => {
          const text = ctx.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n")
          const chunks = options.reply(text)
          const status = (state: TaskState) => ({ state, message: undefined, timestamp: undefined })
          const artifact = (t: string) => ({ artifactId: "reply", name: "reply", description: "", parts: [textPart(t)], metadata: undefined, extensions: [] })
          bus.publish({
            kind: "task",
            data: { id: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_WORKING), artifacts: [], history: [ctx.userMessage], metadata: undefined }
          })
          for (const [i, chunk] of chunks.entries()) {
            bus.publish({ kind: "artifactUpdate", data: { taskId: ctx.taskId, contextId: ctx.contextId, artifact: artifact(chunk), append: i > 0, lastChunk: i === chunks.length - 1, metadata: undefined } })
          }
          bus.publish({ kind: "statusUpdate", data: { taskId: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined } })
          bus.finished()
        },
        cancelTask: () => Promise.resolve()
      }
      const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor)
      app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }))
      app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }))
      resolve({
        url,
        port,
        close: () => new Promise<void>((done) => {
          server.close(() => done())
          server.closeAllConnections()
        })
      })
    })
  })

/** The role of a user message, for callers that build one. */
export const USER = Role.ROLE_USER

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const agent = await startSdkAgent({ port: 7800, reply: (text) => ["you said: ", text] })
  console.log(`A2A SDK agent on ${agent.url} (card: ${agent.url}/.well-known/agent-card.json)`)
}
