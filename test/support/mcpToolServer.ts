/**
 * A real MCP server for tests, built with `@modelcontextprotocol/sdk`'s own server: tools `add`, `echo` and `broken`
 * (a tool failing with `isError`), served statelessly over Streamable HTTP on 127.0.0.1 port 0, or over stdio when
 * this file is run as a program (`tsx test/support/mcpToolServer.ts`). `calls` records every tool call it ran.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { pathToFileURL } from "node:url"
import { z } from "zod"

/** The SDK server with its three tools (and `crash`, exiting the process, over stdio); `calls` gets `<tool> <args as JSON>` per call. */
export const makeToolServer = (calls: Array<string>, crashable = false) => {
  const server = new McpServer({ name: "calc", version: "1.0.0" })
  server.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
    calls.push(`add ${JSON.stringify({ a, b })}`)
    return { content: [{ type: "text", text: String(a + b) }] }
  })
  server.registerTool("echo", { description: "Echoes a text", inputSchema: { text: z.string() } }, async ({ text }) => {
    calls.push(`echo ${JSON.stringify({ text })}`)
    return { content: [{ type: "text", text }] }
  })
  server.registerTool("broken", { description: "Always fails" }, async () => {
    calls.push("broken {}")
    return { content: [{ type: "text", text: "the disk is on fire" }], isError: true }
  })
  if (crashable) {
    server.registerTool("crash", { description: "Exits the server's process" }, async () => process.exit(1))
  }
  return server
}

/** A running HTTP MCP server; `close` stops it. */
export interface ToolServer {
  readonly url: string
  readonly calls: Array<string>
  readonly close: () => Promise<void>
}

/** Serves the tools over stateless Streamable HTTP at `/mcp` on 127.0.0.1, port 0. */
export const startToolServer = async (): Promise<ToolServer> => {
  const calls: Array<string> = []
  const httpServer = http.createServer((req, res) => {
    // Stateless: a server and a transport per request, as the SDK documents for that mode.
    const server = makeToolServer(calls)
    const transport = new StreamableHTTPServerTransport({})
    res.on("close", () => {
      void transport.close()
      void server.close()
    })
    void server.connect(transport).then(() => transport.handleRequest(req, res))
  })
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve))
  const { port } = httpServer.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections()
        httpServer.close(() => resolve())
      })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await makeToolServer([], true).connect(new StdioServerTransport())
}
