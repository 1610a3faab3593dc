/**
 * The mesh as an MCP server, for MCP clients (desktop assistants, IDEs, other agents): tools to search the hub's
 * registry, list its agents, call an agent by didHash and resume a task paused at a human gate. Calls are signed
 * with the server's identity over mesh-sig when it has one; a streamed reply's chunks go to the client as MCP
 * progress notifications (when it sent a progress token); a pause at a human gate is a tool result (not an error)
 * telling the human what to approve and how to resume; every failure is a tool result with `isError` and the mesh's
 * code. `mesh mcp` runs it over stdio, or over Streamable HTTP with `--port` (docs/bridges.md, "MCP: MCP clients use
 * mesh agents").
 *
 * A tool's target is a didHash and nothing else (`parseDidHash`, else INVALID_DID_HASH before anything is sent): the
 * agent client takes a URL as a target too, and a bridge that passed one on would sign requests as its identity to
 * any address an MCP client (or a prompt-injected model) names. A didHash reaches only what the hub registered.
 *
 * Served with `@modelcontextprotocol/sdk`'s server, not `@effect/ai`'s `McpServer`: the latter (0.37) hands a tool
 * handler the arguments only, without the request's `_meta.progressToken`, and its HTTP transport answers each
 * request with one JSON body, so partial results could not be sent while an agent streams.
 *
 * Over HTTP the server is stateless (a server and transport per request, as the SDK documents for that mode), on
 * `/mcp`; a body over `maxBodyBytes` is refused with a JSON-RPC error before it is parsed, unparsable JSON with
 * -32700, and on a loopback address only loopback `Host` headers are accepted (DNS rebinding).
 *
 * Floor: mesh (docs/architecture.md §3).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Cause from "effect/Cause"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { z } from "zod"
import * as AgentClient from "../agent/AgentClient.js"
import type { ApprovalRequired } from "../agent/AgentApi.js"
import { parseDidHash } from "../core/Did.js"
import type { Keys, PrivateKeyInput } from "../core/Keys.js"
import { VERSION } from "../core/Version.js"
import { requireCsprng } from "../core/Entropy.js"
import * as MeshClient from "../hub/MeshClient.js"
import { ServeError } from "../http/Serve.js"

/** How the bridge reaches the mesh. */
export interface MeshMcpOptions {
  /** The hub that resolves agents and answers searches. */
  readonly hubUrl: string
  /** Calls are signed with mesh-sig as this identity; without one they go unsigned (agents with auth none only). */
  readonly identity?: { readonly did: string; readonly privateKey: PrivateKeyInput }
  /** The name the server gives in `initialize`; default `agent-mesh`. */
  readonly name?: string
}

/** Where the HTTP transport listens. */
export interface MeshMcpHttpOptions extends MeshMcpOptions {
  readonly port?: number
  readonly host?: string
  /** Largest request body, in bytes; default 1 MiB. */
  readonly maxBodyBytes?: number
}

/** The HTTP bridge, listening. */
export interface RunningMcpHttp {
  /** The MCP endpoint, e.g. `http://127.0.0.1:7800/mcp`. */
  readonly url: string
  readonly port: number
}

/** The path of the MCP endpoint over HTTP. */
export const MCP_PATH = "/mcp"

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

const text = (t: string, isError = false, structuredContent?: Record<string, unknown>): CallToolResult => ({
  content: [{ type: "text", text: t }],
  ...(isError ? { isError: true } : {}),
  ...(structuredContent === undefined ? {} : { structuredContent })
})

/** A failure as MCP reports a tool's: a result with `isError`, its code first so a model or a human can act on it. */
const failed = (e: { readonly code: string; readonly message: string }): CallToolResult =>
  text(`${e.code}: ${e.message}`, true, { code: e.code, message: e.message })

/** A pause at a human gate as a result the human can act on: what to approve, who signs, and how to resume. */
const approvalResult = (didHash: string, paused: ApprovalRequired): CallToolResult => {
  const a = paused.approvalRequired
  return text(
    [
      `The agent paused for a human approval of "${a.capability}" (task ${a.taskId}).`,
      `What it asks: ${JSON.stringify(a.asked)}.`,
      `${a.grantor} (the mandate's grantor) must sign an approval of this task and capability (agent-mesh signApproval),`,
      `then call resume_task with didHash ${didHash}, taskId ${a.taskId} and the signed approval.`
    ].join(" "),
    false,
    { status: "approval_required", didHash, sessionId: paused.sessionId, ...a }
  )
}

/** The tools of the bridge, registered on an SDK server; effects run on `runtime`. */
const register = (
  server: McpServer,
  options: MeshMcpOptions,
  hub: MeshClient.MeshClientApi,
  agents: AgentClient.AgentClientApi,
  runtime: Runtime.Runtime<never>
) => {
  const signAs = options.identity
  /** Runs `effect`; its typed failure (every one has a code) becomes an `isError` result, a defect a generic one. */
  const settle = <E extends { readonly code: string; readonly message: string }>(effect: Effect.Effect<CallToolResult, E>, signal: AbortSignal) =>
    Runtime.runPromiseExit(runtime)(effect, { signal }).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      const failure = Cause.failureOption(exit.cause)
      if (failure._tag === "Some") return failed(failure.value)
      if (Cause.isInterruptedOnly(exit.cause)) return failed({ code: "CANCELLED", message: "the call was cancelled" })
      return failed({ code: "INTERNAL_ERROR", message: "the bridge failed; see its log" })
    })

  server.registerTool(
    "search_agents",
    {
      description: "Search the mesh's registry (agents, MCP servers, skills) by words; returns each hit's kind, DID, didHash and name.",
      inputSchema: { query: z.string().min(1).max(256), limit: z.number().int().min(1).max(100).optional() },
      annotations: { readOnlyHint: true, openWorldHint: true }
    },
    ({ query, limit }, extra) =>
      settle(Effect.map(hub.search(query, limit), (r) => text(JSON.stringify(r.items), false, { hits: r.items })), extra.signal)
  )

  server.registerTool(
    "list_agents",
    {
      description: "List the agents registered in the mesh's hub, a page at a time (pass nextCursor back as cursor).",
      inputSchema: { limit: z.number().int().min(1).max(100).optional(), cursor: z.string().max(512).optional() },
      annotations: { readOnlyHint: true, openWorldHint: true }
    },
    ({ limit, cursor }, extra) =>
      settle(
        Effect.map(hub.listAgents({ ...(limit === undefined ? {} : { limit }), ...(cursor === undefined ? {} : { cursor }) }), (page) =>
          text(JSON.stringify(page), false, { ...page })
        ),
        extra.signal
      )
  )

  const CallArgs = {
    didHash: z.string().min(1).max(128).describe("the agent's didHash (24 characters, from search_agents or list_agents); never a URL"),
    message: z.string().max(1_000_000),
    sessionId: z.string().max(256).optional().describe("continue a conversation"),
    mandate: z.string().max(16_384).optional().describe("a task mandate granted to the agent"),
    capability: z.string().max(256).optional()
  }
  server.registerTool(
    "call_agent",
    {
      description:
        "Send a message to a mesh agent by didHash and return its reply. The reply streams as progress notifications when a progress token is sent. " +
        "If the agent pauses for a human approval, the result says what to approve and how to resume (resume_task).",
      inputSchema: CallArgs,
      annotations: { openWorldHint: true }
    },
    ({ didHash, message, sessionId, mandate, capability }, extra) => {
      const progressToken = extra._meta?.progressToken
      const call: AgentClient.CallOptions = {
        ...(signAs === undefined ? {} : { signAs }),
        ...(sessionId === undefined ? {} : { sessionId }),
        ...(mandate === undefined ? {} : { mandate }),
        ...(capability === undefined ? {} : { capability })
      }
      if (progressToken === undefined) {
        return settle(
          Effect.flatMap(parseDidHash(didHash), (target) =>
            Effect.map(agents.call(target, message, call), (r) => ("approvalRequired" in r ? approvalResult(target, r) : text(r.message, false, { status: "completed", ...r })))
          ),
          extra.signal
        )
      }
      let progress = 0
      // A stream that ends without its last event is the agent's fault, reported as such.
      const unfinished = failed({ code: "BAD_RESPONSE", message: `the agent ${didHash} ended its stream without a reply` })
      const streamed = (target: string) => Stream.runFoldEffect(agents.stream(target, message, call), unfinished, (last, event) => {
        if (event.type === "chunk") {
          progress += 1
          return Effect.as(
            Effect.promise(() =>
              extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress, message: event.text } }).catch(() => undefined)
            ),
            last
          )
        }
        if (event.type === "done") {
          const { type: _, ...done } = event
          return Effect.succeed(text(event.message, false, { status: "completed", ...done }))
        }
        const { type: _, ...paused } = event
        return Effect.succeed(approvalResult(target, paused))
      })
      return settle(Effect.flatMap(parseDidHash(didHash), streamed), extra.signal)
    }
  )

  server.registerTool(
    "resume_task",
    {
      description: "Resume a task paused at a human gate with the grantor's signed approval (a JSON object from agent-mesh signApproval).",
      inputSchema: { didHash: z.string().min(1).max(128), taskId: z.string().min(1).max(256), approval: z.record(z.string(), z.unknown()) },
      annotations: { openWorldHint: true }
    },
    ({ didHash, taskId, approval }, extra) =>
      settle(
        Effect.flatMap(parseDidHash(didHash), (target) =>
          Effect.map(agents.resume(target, taskId, approval, signAs === undefined ? {} : { signAs }), (r) =>
            "approvalRequired" in r ? approvalResult(target, r) : text(r.message, false, { status: "completed", ...r })
          )
        ),
        extra.signal
      )
  )
}

/** A factory of SDK servers with the bridge's tools, over a hub client and an agent client made once. */
export const make = (options: MeshMcpOptions): Effect.Effect<() => McpServer, never, HttpClient.HttpClient | Keys> =>
  Effect.gen(function* () {
    const hub = yield* MeshClient.make({ hubUrl: options.hubUrl, retry: { times: 2 } })
    const agents = yield* AgentClient.make({ hubUrl: options.hubUrl })
    const runtime = yield* Effect.runtime<never>()
    return () => {
      const server = new McpServer({ name: options.name ?? "agent-mesh", version: VERSION })
      register(server, options, hub, agents, runtime)
      // The SDK advertises `tools.listChanged` once a tool is registered; the tools here never change, and over HTTP
      // a stateless server has no stream to send the notification on, so the capability would be a promise not kept.
      server.server.registerCapabilities({ tools: { listChanged: false } })
      return server
    }
  })

/**
 * Serves the bridge over stdin and stdout until the scope closes; the effect it returns completes when the client
 * closes stdin (it is done with the server). Nothing else may write to stdout meanwhile.
 */
export const serveStdio = (options: MeshMcpOptions): Effect.Effect<Effect.Effect<void>, never, HttpClient.HttpClient | Keys | Scope.Scope> =>
  Effect.gen(function* () {
    const server = (yield* make(options))()
    const ended = Effect.async<void>((resume) => {
      const done = () => resume(Effect.void)
      process.stdin.once("end", done)
      process.stdin.once("close", done)
      return Effect.sync(() => {
        process.stdin.off("end", done)
        process.stdin.off("close", done)
      })
    })
    yield* Effect.acquireRelease(Effect.promise(() => server.connect(new StdioServerTransport())), () => Effect.promise(() => server.close()))
    return ended
  })

/** A JSON-RPC error answer without an id (the request could not be read), with the HTTP status MCP clients expect. */
const rpcError = (res: http.ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}) => {
  if (res.headersSent) return void res.end()
  res.writeHead(status, { ...headers, "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }))
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"])

/** Serves the bridge over Streamable HTTP at `/mcp` until the scope closes. */
export const serveHttp = (options: MeshMcpHttpOptions): Effect.Effect<RunningMcpHttp, ServeError, HttpClient.HttpClient | Keys | Scope.Scope> =>
  Effect.gen(function* () {
    yield* requireCsprng("MeshMcpServer.serveHttp")
    const factory = yield* make(options)
    const host = options.host ?? "127.0.0.1"
    const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
    let allowedHosts: Array<string> | undefined
    const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
      const path = (req.url ?? "/").split("?")[0]
      if (path !== MCP_PATH) return rpcError(res, 404, -32601, `no MCP endpoint here; use ${MCP_PATH}`)
      // Stateless: no session to end (DELETE) and no stream for server-initiated messages (GET), which would be held
      // open forever with nothing to send; only POST is served, as in the SDK's stateless pattern.
      if (req.method !== "POST") return rpcError(res, 405, -32000, `Method not allowed: this MCP server is stateless and answers POST only`, { allow: "POST" })
      let body: unknown
      const declared = Number(req.headers["content-length"] ?? "0")
      if (declared > limit) return rpcError(res, 413, -32600, `the request is larger than ${limit} bytes`)
      const chunks: Array<Buffer> = []
      let size = 0
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length
        if (size > limit) return rpcError(res, 413, -32600, `the request is larger than ${limit} bytes`)
        chunks.push(chunk)
      }
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        return rpcError(res, 400, -32700, "Parse error: the body is not JSON")
      }
      const server = factory()
      const transport = new StreamableHTTPServerTransport({
        // Stateless: a server and a transport per request.
        ...(allowedHosts === undefined ? {} : { enableDnsRebindingProtection: true, allowedHosts })
      })
      res.on("close", () => {
        void transport.close()
        void server.close()
      })
      await server.connect(transport)
      await transport.handleRequest(req, res, body)
    }
    const httpServer = http.createServer((req, res) => {
      handle(req, res).catch((e: unknown) => {
        // Logged here, never sent: the client gets JSON-RPC's internal error.
        Runtime.runFork(Runtime.defaultRuntime)(Effect.logError("MCP request failed", e))
        rpcError(res, 500, -32603, "Internal error")
      })
    })
    const port = yield* Effect.acquireRelease(
      Effect.async<number, ServeError>((resume) => {
        httpServer.once("error", (e) => resume(Effect.fail(new ServeError({ message: `cannot listen on ${host}:${options.port ?? 0}: ${e.message}`, cause: e }))))
        httpServer.listen(options.port ?? 0, host, () => resume(Effect.succeed((httpServer.address() as AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          httpServer.closeAllConnections()
          httpServer.close(() => resume(Effect.void))
        })
    )
    if (LOOPBACK.has(host)) allowedHosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]
    const shown = host.includes(":") ? `[${host}]` : host
    return { url: `http://${shown}:${port}${MCP_PATH}`, port }
  })
