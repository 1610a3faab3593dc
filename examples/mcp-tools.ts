/**
 * A mesh agent using an MCP server's tools. An MCP server (built with the official MCP SDK) is registered in a hub;
 * an agent's handler reaches it by its didHash through `input.mcp`, and every tool call is first put to the task
 * guard as the capability `mcp:<didHash>/<tool>`: the user's mandate allows `add` and not `delete_everything`, so
 * the first call reaches the server and the second never does.
 *
 *   npx tsx examples/mcp-tools.ts
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { z } from "zod"
import * as AgentClient from "../src/agent/AgentClient.js"
import * as AgentServer from "../src/agent/AgentServer.js"
import { generateDid } from "../src/core/Did.js"
import { makeStatic } from "../src/core/KeyResolver.js"
import { issueTaskMandate } from "../src/core/Mandate.js"
import * as Hub from "../src/hub/Hub.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"

/** A calculator MCP server on 127.0.0.1 (stateless Streamable HTTP at /mcp); `log` records what it ran. */
const calculator = (log: Array<string>) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const server = http.createServer((req, res) => {
        const mcp = new McpServer({ name: "calculator", version: "1.0.0" })
        mcp.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
          log.push(`add ${a} ${b}`)
          return { content: [{ type: "text", text: String(a + b) }] }
        })
        mcp.registerTool("delete_everything", { description: "Do not call this" }, async () => {
          log.push("delete_everything")
          return { content: [{ type: "text", text: "gone" }] }
        })
        const transport = new StreamableHTTPServerTransport({})
        res.on("close", () => void transport.close())
        void mcp.connect(transport).then(() => transport.handleRequest(req, res))
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp` }
    }),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

/** The whole scene; returns the agent's reply and what the MCP server ran. */
export const program = Effect.gen(function* () {
  const hub = yield* Hub.start({ database: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-example-")), "hub.db") })
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey })
  const log: Array<string> = []
  const calc = yield* calculator(log)
  const record = yield* registry.registerMcp({ name: "calculator", endpointUrl: calc.url, tools: ["add", "delete_everything"] })
  yield* Console.log(`MCP server "calculator" registered as ${record.didHash} (${calc.url})`)

  const user = yield* generateDid("user", undefined, "example")
  const assistant = yield* generateDid("assistant", undefined, "example")
  const agent = yield* AgentServer.make({
    name: "assistant",
    did: assistant.did,
    privateKey: assistant.privateKey,
    database: ":memory:",
    // MCP servers are resolved through the hub; the user's key (a grantor) is known here directly.
    hubUrl: hub.url,
    resolveCallerKey: makeStatic({ [user.did]: { publicKey: user.privateKey.publicKey, keyVersion: 1 } }),
    handler: async ({ mcp }) => {
      const calculator = mcp(record.didHash)
      const names = (await calculator.listTools()).map((t) => t.name)
      const sum = await calculator.callTool("add", { a: 19, b: 23 })
      const refused = await calculator.callTool("delete_everything").then(() => "called", (e: { code: string }) => e.code)
      return `tools ${names.join(", ")}; 19 + 23 = ${sum.content[0]?.text}; delete_everything: ${refused}`
    }
  })
  const mandate = yield* issueTaskMandate({
    grantorDid: user.did,
    granteeDid: assistant.did,
    privateKey: user.privateKey,
    constraints: { allowed: [`mcp:${record.didHash}/add`], maxDelegationDepth: 0 }
  })
  const client = yield* AgentClient.make()
  const reply = yield* client.call(agent.url, "compute", { mandate: mandate.token })
  const text = "message" in reply ? reply.message : "paused"
  yield* Console.log(`assistant: ${text}\ncalculator ran: ${log.join("; ")}`)
  return { reply: text, ran: log }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await Effect.runPromise(program)
