/**
 * Mesh agents as clients of MCP servers: a server is named by its didHash in the hub's registry (reached over
 * Streamable HTTP at the endpoint it registered) or by a name the agent's operator configured (a local command over
 * stdio, or a URL). Connections are made on first use with `@modelcontextprotocol/sdk`'s client, loaded only then,
 * kept for the life of the agent server (at most `MAX_CONNECTIONS`, the least recently used closed first) and dropped
 * after a transport failure so the next call reconnects.
 *
 * This module only connects, lists and calls; the task guard over each call (capability `mcp:<server>/<tool>`) is
 * applied where a handler gets its access, in `Execution` (docs/bridges.md, "MCP: mesh agents use MCP servers").
 *
 * Floor: agent (docs/architecture.md §3).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { parseDidHash } from "../core/Did.js"
import { Keys } from "../core/Keys.js"
import * as MeshClient from "../hub/MeshClient.js"
import { VERSION } from "../core/Version.js"
import { isRecord } from "../core/internal/record.js"

/** Why an MCP server could not be used; a tool's own failure is a result with `isError`, not this. */
export class McpError extends Schema.TaggedError<McpError>()("McpError", {
  code: Schema.Literal("MCP_NOT_CONFIGURED", "MCP_NOT_FOUND", "MCP_UNREACHABLE", "MCP_BAD_RESPONSE", "TOOL_NOT_FOUND"),
  message: Schema.String
}) {}

/** A local MCP server the operator configures: a command spoken to over stdio, or a Streamable HTTP URL. */
export type LocalMcpServer =
  | { readonly command: string; readonly args?: ReadonlyArray<string>; readonly env?: Readonly<Record<string, string>>; readonly cwd?: string }
  | { readonly url: string; readonly headers?: Readonly<Record<string, string>> }

/** A tool an MCP server offers, as its `tools/list` described it. */
export interface McpToolInfo {
  readonly name: string
  readonly description?: string
  readonly inputSchema: Readonly<Record<string, unknown>>
}

/** One block of a tool's result (MCP content: text, image, audio, resource, resource link). */
export type McpContent = Readonly<Record<string, unknown>> & { readonly type: string }

/** What a tool call returned; `isError` is the tool's own failure, reported as a result (MCP's convention). */
export interface McpToolResult {
  readonly content: ReadonlyArray<McpContent>
  readonly isError: boolean
  readonly structuredContent?: Readonly<Record<string, unknown>>
}

/** The text of a result: its text blocks joined, other blocks as JSON. */
export const resultText = (result: McpToolResult): string =>
  result.content.map((c) => (c.type === "text" && typeof c.text === "string" ? c.text : JSON.stringify(c))).join("\n")

/** The operations of the MCP client. */
export interface McpClientApi {
  /** The tools of `server` (a configured name or a registered didHash), listed once per connection. */
  readonly listTools: (server: string) => Effect.Effect<ReadonlyArray<McpToolInfo>, McpError>
  /** Calls `tool` on `server`; cancelled with the fiber. */
  readonly callTool: (server: string, tool: string, args: Readonly<Record<string, unknown>>) => Effect.Effect<McpToolResult, McpError>
}

/** The `McpClient` service. */
export class McpClient extends Context.Tag("agent-mesh/agent/McpClient")<McpClient, McpClientApi>() {}

/** Where MCP servers are found. */
export interface McpClientOptions {
  /** The hub whose registry resolves didHashes to MCP servers. */
  readonly hubUrl?: string
  /** Servers by the name handlers use; a name here wins over a didHash. */
  readonly servers?: Readonly<Record<string, LocalMcpServer>>
  /** Bound on one request to a server (list or call), in ms; default 60 s. */
  readonly timeoutMs?: number
}

/** Most MCP servers one agent keeps connected at once. */
export const MAX_CONNECTIONS = 32

interface Connection {
  readonly client: Client
  tools: ReadonlyArray<McpToolInfo> | undefined
}

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const asTool = (t: { readonly name: string; readonly description?: string | undefined; readonly inputSchema: unknown }): McpToolInfo => ({
  name: t.name,
  ...(t.description === undefined ? {} : { description: t.description }),
  inputSchema: isRecord(t.inputSchema) ? t.inputSchema : { type: "object" }
})

/** The client over the hub at `hubUrl` (needs `HttpClient` and `Keys` for it) and the configured servers. */
export const make = (options: McpClientOptions): Effect.Effect<McpClientApi, never, HttpClient.HttpClient | Keys | Scope.Scope> =>
  Effect.gen(function* () {
    const hub = options.hubUrl === undefined ? undefined : yield* MeshClient.make({ hubUrl: options.hubUrl, retry: { times: 2 } })
    const timeout = options.timeoutMs ?? 60_000
    // Insertion order is recency: a hit is moved to the end, the first entry is the least recently used.
    const connections = new Map<string, Promise<Connection>>()
    const closeAll = Effect.promise(() =>
      Promise.allSettled([...connections.values()].map((c) => c.then((x) => x.client.close())))
    )
    yield* Effect.addFinalizer(() => closeAll)

    const local = (server: string): LocalMcpServer | undefined =>
      options.servers !== undefined && Object.hasOwn(options.servers, server) ? options.servers[server] : undefined

    /** The transport settings of a server: the configured ones, else the endpoint the hub registered. */
    const locate = (server: string): Effect.Effect<LocalMcpServer, McpError> => {
      const configured = local(server)
      if (configured !== undefined) return Effect.succeed(configured)
      const notConfigured = () => new McpError({ code: "MCP_NOT_FOUND", message: `no MCP server named ${JSON.stringify(server)} is configured` })
      return Effect.flatMap(Effect.mapError(parseDidHash(server), notConfigured), (h) => {
        if (hub === undefined) return Effect.fail(new McpError({ code: "MCP_NOT_CONFIGURED", message: `MCP server ${server} is not configured and no hub is set to resolve it` }))
        return hub.resolveMcp(h).pipe(
          Effect.map((record): LocalMcpServer => ({ url: record.endpointUrl })),
          Effect.mapError((e) =>
            e.code === "NOT_FOUND"
              ? new McpError({ code: "MCP_NOT_FOUND", message: `no MCP server ${server} in the registry` })
              : new McpError({ code: "MCP_UNREACHABLE", message: `could not resolve MCP server ${server}: ${e.message}` })
          )
        )
      })
    }

    const open = async (where: LocalMcpServer): Promise<Connection> => {
      const { Client } = await import("@modelcontextprotocol/sdk/client/index.js")
      const client = new Client({ name: "agent-mesh", version: VERSION })
      if ("command" in where) {
        const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js")
        await client.connect(
          new StdioClientTransport({
            command: where.command,
            ...(where.args === undefined ? {} : { args: [...where.args] }),
            ...(where.env === undefined ? {} : { env: { ...where.env } }),
            ...(where.cwd === undefined ? {} : { cwd: where.cwd }),
            // Its log goes to ours; a pipe nobody reads would stall a chatty server once full.
            stderr: "inherit"
          }),
          { timeout }
        )
      } else {
        const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js")
        await client.connect(
          new StreamableHTTPClientTransport(new URL(where.url), where.headers === undefined ? {} : { requestInit: { headers: { ...where.headers } } }),
          { timeout }
        )
      }
      return { client, tools: undefined }
    }

    const drop = (server: string, connection: Promise<Connection>) =>
      Effect.sync(() => {
        if (connections.get(server) !== connection) return
        connections.delete(server)
        void connection.then((c) => c.client.close()).catch(() => undefined)
      })

    const connect = (server: string): Effect.Effect<Promise<Connection>, McpError> =>
      Effect.suspend(() => {
        const hit = connections.get(server)
        if (hit !== undefined) {
          connections.delete(server)
          connections.set(server, hit)
          return Effect.succeed(hit)
        }
        return Effect.map(locate(server), (where) => {
          // Another fiber may have connected while this one resolved.
          const raced = connections.get(server)
          if (raced !== undefined) return raced
          if (connections.size >= MAX_CONNECTIONS) {
            const [oldest, c] = connections.entries().next().value!
            connections.delete(oldest)
            void c.then((x) => x.client.close()).catch(() => undefined)
          }
          const connection = open(where)
          // A failed connection is not kept: the next use tries again.
          connection.catch(() => {
            if (connections.get(server) === connection) connections.delete(server)
          })
          connections.set(server, connection)
          return connection
        })
      })

    /** Runs `f` on the server's connection; a failure that is not the server's answer drops the connection. */
    const withConnection = <A>(server: string, what: string, f: (c: Connection, signal: AbortSignal) => Promise<A>): Effect.Effect<A, McpError> =>
      Effect.flatMap(connect(server), (connection) =>
        Effect.tryPromise({
          try: (signal) => connection.then((c) => f(c, signal)),
          catch: (e) => e
        }).pipe(
          Effect.catchAll((e) => {
            if (e instanceof McpError) return Effect.fail(e)
            // A JSON-RPC error the server answered (McpError of the SDK carries a numeric code) leaves the connection usable.
            const answered = isRecord(e) && typeof e.code === "number" && e.code !== -32001 && e.code !== -32000
            const failure = new McpError({ code: answered ? "MCP_BAD_RESPONSE" : "MCP_UNREACHABLE", message: `MCP server ${server}: ${what} failed: ${messageOf(e)}` })
            return answered ? Effect.fail(failure) : Effect.zipRight(drop(server, connection), Effect.fail(failure))
          })
        )
      )

    const listTools: McpClientApi["listTools"] = (server) =>
      withConnection(server, "tools/list", async (c, signal) => {
        if (c.tools !== undefined) return c.tools
        const tools: Array<McpToolInfo> = []
        let cursor: string | undefined
        // Pages are followed to the end, bounded so that a server cannot keep us listing forever.
        for (let page = 0; page < 50; page++) {
          const listed = await c.client.listTools(cursor === undefined ? {} : { cursor }, { signal, timeout })
          tools.push(...listed.tools.map(asTool))
          cursor = listed.nextCursor
          if (cursor === undefined) break
        }
        c.tools = tools
        return tools
      })

    const callTool: McpClientApi["callTool"] = (server, tool, args) =>
      Effect.flatMap(listTools(server), (tools) =>
        tools.some((t) => t.name === tool)
          ? withConnection(server, `tools/call ${tool}`, async (c, signal) => {
            const result = await c.client.callTool({ name: tool, arguments: { ...args } }, undefined, { signal, timeout })
            const content = Array.isArray(result.content) ? (result.content as Array<unknown>).filter((b): b is McpContent => isRecord(b) && typeof b.type === "string") : []
            return {
              content,
              isError: result.isError === true,
              ...(isRecord(result.structuredContent) ? { structuredContent: result.structuredContent } : {})
            }
          })
          : Effect.fail(new McpError({ code: "TOOL_NOT_FOUND", message: `MCP server ${server} has no tool ${JSON.stringify(tool)}` }))
      )

    return { listTools, callTool }
  })

/** The MCP client for an agent server; connections close with the layer. */
export const layer = (options: McpClientOptions): Layer.Layer<McpClient, never, HttpClient.HttpClient | Keys> => Layer.scoped(McpClient, make(options))

/** A tool of the test layer: its description and what a call returns. */
export interface TestTool extends Omit<McpToolInfo, "name"> {
  readonly call: (args: Readonly<Record<string, unknown>>) => McpToolResult
}

/** An in-memory client for tests: servers by name, each a map of tools; nothing is connected. */
export const layerTest = (servers: Readonly<Record<string, Readonly<Record<string, TestTool>>>>): Layer.Layer<McpClient> =>
  Layer.succeed(McpClient, {
    listTools: (server) =>
      Object.hasOwn(servers, server)
        ? Effect.succeed(Object.entries(servers[server]!).map(([name, t]) => ({ name, inputSchema: t.inputSchema, ...(t.description === undefined ? {} : { description: t.description }) })))
        : Effect.fail(new McpError({ code: "MCP_NOT_FOUND", message: `no MCP server ${server}` })),
    callTool: (server, tool, args) => {
      const tools = Object.hasOwn(servers, server) ? servers[server]! : undefined
      if (tools === undefined) return Effect.fail(new McpError({ code: "MCP_NOT_FOUND", message: `no MCP server ${server}` }))
      return Object.hasOwn(tools, tool)
        ? Effect.sync(() => tools[tool]!.call(args))
        : Effect.fail(new McpError({ code: "TOOL_NOT_FOUND", message: `MCP server ${server} has no tool ${tool}` }))
    }
  })
