/**
 * MCP clients use mesh agents: the bridge (`MeshMcpServer`, `mesh mcp`) tested with the official SDK's client over
 * Streamable HTTP and over stdio (the `mesh` command spawned): search, list, a signed call whose streamed chunks
 * arrive as progress notifications, a pause at a human gate surfaced as a result and resumed, failures as `isError`
 * results, bad input answered as JSON-RPC errors, never a 500, and a target that is not a didHash (a URL above all)
 * refused before anything is sent, so the bridge signs for no address a client names.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as Scope from "effect/Scope"
import type { AddressInfo } from "node:net"
import type { Keys } from "../../src/core/Keys.js"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Option from "effect/Option"
import * as AgentServer from "../../src/agent/AgentServer.js"
import * as Cli from "../../src/cli/Cli.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid, type MeshIdentity } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import * as MeshMcpServer from "../../src/mesh/MeshMcpServer.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, startHub } from "../hub/support.js"
import { ensureBin } from "../support/bin.js"

interface TextBlock {
  readonly type: string
  readonly text?: string
}
interface ToolResult {
  readonly content: ReadonlyArray<TextBlock>
  readonly isError?: boolean
  readonly structuredContent?: Record<string, unknown>
}
const textOf = (r: unknown) => (r as ToolResult).content.map((c) => c.text ?? "").join("")

/** A hub with two mesh-sig agents: `story` streams three chunks, `mailer` pauses at a human gate. */
const mesh = Effect.gen(function* () {
  const { hub, client } = yield* startHub()
  const caller = yield* registeredAgent(client, "bridge")
  const story = yield* registeredAgent(client, "story")
  const mailer = yield* registeredAgent(client, "mailer")
  const serveAgent = (a: typeof story, handler: AgentServer.Handler) =>
    Effect.tap(
      AgentServer.make({ name: a.identity.did, did: a.identity.did, privateKey: a.identity.privateKey, database: ":memory:", auth: "mesh-sig", hubUrl: hub.url, handler }),
      (served) => client.updateAgent(a.record.didHash, { endpointUrl: served.url }, { identity: a.identity, apiKey: a.apiKey })
    )
  yield* serveAgent(story, async function* ({ message, caller: who }) {
    yield "once "
    yield "upon "
    yield `${message} (for ${who.did})`
  })
  const sent: Array<string> = []
  yield* serveAgent(mailer, async ({ message, guard }) => {
    await guard("send_email", { description: `send: ${message}` })
    sent.push(message)
    return `sent ${message}`
  })
  const mandate = (yield* issueTaskMandate({
    // The bridge's identity is the human's: it grants the mandate and signs the approval.
    grantorDid: caller.identity.did,
    granteeDid: mailer.identity.did,
    privateKey: caller.identity.privateKey,
    constraints: { allowed: ["send_email"], humanGates: ["send_email"], maxDelegationDepth: 0 }
  })).token
  return { hub, caller: caller.identity, story: story.record.didHash, mailer: mailer.record.didHash, mandate, sent }
})

type Mesh = Effect.Effect.Success<typeof mesh>

const connected = (transport: Transport) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "test", version: "1.0.0" })
      await client.connect(transport)
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

/** The same conversation over either transport. */
const conversation = (m: Mesh, client: Client) =>
  Effect.promise(async () => {
    const capabilities = client.getServerCapabilities()
    const tools = (await client.listTools()).tools.map((t) => t.name).sort()
    const search = (await client.callTool({ name: "search_agents", arguments: { query: "story" } })) as ToolResult
    const listed = (await client.callTool({ name: "list_agents", arguments: { limit: 10 } })) as ToolResult
    const progress: Array<string> = []
    const called = await client.callTool({ name: "call_agent", arguments: { didHash: m.story, message: "a time" } }, undefined, {
      onprogress: (p) => void progress.push(String(p.message))
    })
    const plain = await client.callTool({ name: "call_agent", arguments: { didHash: m.story, message: "plain" } })
    const paused = (await client.callTool({ name: "call_agent", arguments: { didHash: m.mailer, message: "hi bob", mandate: m.mandate } })) as ToolResult
    const missing = (await client.callTool({ name: "call_agent", arguments: { didHash: "a".repeat(24), message: "x" } })) as ToolResult
    const badArgs = (await client.callTool({ name: "call_agent", arguments: { message: 42 } }).catch((e: { code?: number }) => ({ code: e.code }))) as ToolResult | { code: number }
    return { capabilities, tools, search, listed, progress, called, plain, paused, missing, badArgs }
  })

const checkConversation = (m: Mesh, r: Effect.Effect.Success<ReturnType<typeof conversation>>) => {
  // Only what the server honours: its tools never change, so no list_changed is ever sent (and over stateless HTTP
  // it could not be).
  assert.deepStrictEqual(r.capabilities?.tools, { listChanged: false })
  assert.deepStrictEqual(Object.keys(r.capabilities ?? {}).sort(), ["tools"])
  assert.deepStrictEqual(r.tools, ["call_agent", "list_agents", "resume_task", "search_agents"])
  assert.include(JSON.stringify(r.search.structuredContent), m.story)
  assert.include(textOf(r.listed), m.mailer)
  assert.strictEqual(textOf(r.called), `once upon a time (for ${m.caller.did})`)
  // Each streamed chunk arrived as a progress notification before the result.
  assert.deepStrictEqual(r.progress, ["once ", "upon ", `a time (for ${m.caller.did})`])
  assert.strictEqual(textOf(r.plain), `once upon plain (for ${m.caller.did})`)
  assert.notStrictEqual(r.paused.isError, true, textOf(r.paused))
  assert.strictEqual(r.paused.structuredContent?.status, "approval_required")
  assert.strictEqual(r.paused.structuredContent?.capability, "send_email")
  assert.include(textOf(r.paused), "resume_task")
  assert.strictEqual(r.missing.isError, true)
  assert.match(textOf(r.missing), /^AGENT_NOT_FOUND: /)
  // Arguments that do not match the tool's schema: an error result or JSON-RPC invalid params, never a crash.
  assert.isTrue("isError" in r.badArgs ? r.badArgs.isError === true : (r.badArgs as { code: number }).code === -32602)
  assert.deepStrictEqual(m.sent, [])
}

/** The human approves the paused task and the client resumes it through the bridge. */
const approveAndResume = (m: Mesh, client: Client, paused: ToolResult) =>
  Effect.gen(function* () {
    const taskId = String(paused.structuredContent?.taskId)
    const approval = yield* signApproval({ taskId, capability: "send_email" }, m.caller.did, m.caller.privateKey)
    const resumed = (yield* Effect.promise(() => client.callTool({ name: "resume_task", arguments: { didHash: m.mailer, taskId, approval } }))) as ToolResult
    assert.strictEqual(textOf(resumed), "sent hi bob")
    assert.deepStrictEqual(m.sent, ["hi bob"])
  })

const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope | Keys | HttpClient.HttpClient>) =>
  effect.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

/** An identity file as `mesh keygen` writes it. */
const identityFile = (identity: MeshIdentity) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-mcp-")), "bridge.identity.json")
  fs.writeFileSync(file, JSON.stringify(Cli.identityFileOf(identity)), { mode: 0o600 })
  return file
}

describe("MCP server: MCP clients use mesh agents", () => {
  it.live("over Streamable HTTP with the SDK's client: search, list, signed streamed call, human gate, errors", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const bridge = yield* MeshMcpServer.serveHttp({ hubUrl: m.hub.url, identity: { did: m.caller.did, privateKey: m.caller.privateKey } })
      const client = yield* connected(new StreamableHTTPClientTransport(new URL(bridge.url)))
      const r = yield* conversation(m, client)
      checkConversation(m, r)
      yield* approveAndResume(m, client, r.paused)
    })))

  it.live("over HTTP, bad input is a JSON-RPC error with a 4xx: not JSON, too large, unknown method, wrong path, foreign Host", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const bridge = yield* MeshMcpServer.serveHttp({ hubUrl: m.hub.url, maxBodyBytes: 4096 })
      const post = (body: string, url = bridge.url, headers: Record<string, string> = {}) =>
        Effect.promise(async () => {
          const res = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } })
          const text = await res.text()
          const json = text.startsWith("{") ? text : text.split("\n").find((l) => l.startsWith("data: "))?.slice(6) ?? "{}"
          return { status: res.status, body: JSON.parse(json) as { error?: { code: number } } }
        })
      const notJson = yield* post("{nope")
      assert.deepStrictEqual([notJson.status, notJson.body.error?.code], [400, -32700])
      const large = yield* post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { pad: "x".repeat(5000) } }))
      assert.deepStrictEqual([large.status, large.body.error?.code], [413, -32600])
      const unknown = yield* post(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "no/such/method" }))
      assert.isBelow(unknown.status, 500)
      assert.strictEqual(unknown.body.error?.code, -32601)
      const wrongPath = yield* post("{}", bridge.url.replace("/mcp", "/other"))
      assert.deepStrictEqual([wrongPath.status, wrongPath.body.error?.code], [404, -32601])
      // fetch will not send a Host of our choosing; node:http will.
      const foreign = yield* Effect.promise(() =>
        new Promise<number>((resolve, reject) => {
          const body = JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" })
          const req = http.request(bridge.url, { method: "POST", headers: { host: "evil.example", "content-type": "application/json", accept: "application/json, text/event-stream" } }, (res) => {
            res.resume()
            resolve(res.statusCode ?? 0)
          })
          req.on("error", reject)
          req.end(body)
        })
      )
      assert.isAtLeast(foreign, 400)
      assert.isBelow(foreign, 500)
    })))

  it.live("over HTTP, GET and DELETE /mcp are 405 with Allow: POST and end at once (stateless: no stream is held open)", () =>
    run(Effect.gen(function* () {
      const { hub } = yield* startHub()
      const bridge = yield* MeshMcpServer.serveHttp({ hubUrl: hub.url })
      const answers = yield* Effect.promise(() =>
        Promise.all(
          ["GET", "DELETE"].map(async (method) => {
            // A stream held open would never let text() resolve; the test's timeout would fail it.
            const res = await fetch(bridge.url, { method, headers: { accept: "text/event-stream", "mcp-protocol-version": "2025-11-25" } })
            const body = JSON.parse(await res.text()) as { error?: { code: number } }
            return [method, res.status, res.headers.get("allow"), res.headers.get("content-type"), body.error?.code]
          })
        )
      )
      assert.deepStrictEqual(answers, [
        ["GET", 405, "POST", "application/json", -32000],
        ["DELETE", 405, "POST", "application/json", -32000]
      ])
      // The SDK's client treats a 405 on its optional GET stream as "none offered" and goes on over POST.
      const client = yield* connected(new StreamableHTTPClientTransport(new URL(bridge.url)))
      const tools = yield* Effect.promise(() => client.listTools())
      assert.strictEqual(tools.tools.length, 4)
    })))

  it.live("a target that is not a didHash (a URL, a path) is refused INVALID_DID_HASH by call_agent and resume_task; nothing is sent", () =>
    run(Effect.gen(function* () {
      const { hub } = yield* startHub()
      const me = yield* generateDid("bridge")
      // Whatever reaches this listener would carry a request signed as the bridge's identity.
      const reached: Array<string> = []
      const listener = http.createServer((req, res) => {
        reached.push(`${req.method} ${req.url} ${req.headers["signature-input"] ?? "unsigned"}`)
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ message: "served", sessionId: "s" }))
      })
      const port = yield* Effect.acquireRelease(
        Effect.async<number>((resume) => void listener.listen(0, "127.0.0.1", () => resume(Effect.succeed((listener.address() as AddressInfo).port)))),
        () => Effect.async<void>((resume) => void listener.close(() => resume(Effect.void)))
      )
      const bridge = yield* MeshMcpServer.serveHttp({ hubUrl: hub.url, identity: { did: me.did, privateKey: me.privateKey } })
      const client = yield* connected(new StreamableHTTPClientTransport(new URL(bridge.url)))
      const targets = [`http://127.0.0.1:${port}/anything#`, `HTTPS://127.0.0.1:${port}/x`, `127.0.0.1:${port}`, "../../v1/agents", "a".repeat(23), `${"a".repeat(24)}#`]
      const results = yield* Effect.promise(async () => {
        const all: Array<ToolResult> = []
        for (const didHash of targets) {
          all.push((await client.callTool({ name: "call_agent", arguments: { didHash, message: "hi" } })) as ToolResult)
          all.push((await client.callTool({ name: "call_agent", arguments: { didHash, message: "hi" } }, undefined, { onprogress: () => undefined })) as ToolResult)
          all.push((await client.callTool({ name: "resume_task", arguments: { didHash, taskId: "task_1", approval: {} } })) as ToolResult)
        }
        return all
      })
      assert.deepStrictEqual(reached, [])
      assert.strictEqual(results.length, targets.length * 3)
      for (const r of results) {
        assert.strictEqual(r.isError, true, textOf(r))
        assert.strictEqual(r.structuredContent?.code, "INVALID_DID_HASH", textOf(r))
      }
    })))

  it.live("mesh mcp refuses to serve HTTP with an identity on a non-loopback address", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const refused = yield* Effect.flip(
        Cli.runMcp({ hubUrl: m.hub.url, identity: Option.some(identityFile(m.caller)), port: Option.some(0), host: "0.0.0.0" }).pipe(Effect.provide(NodeContext.layer))
      )
      assert.strictEqual(refused._tag === "CliError" ? refused.code : refused._tag, "INVALID_ARGUMENT")
    })))

  it.live("over stdio with the SDK's client, spawning the built `mesh mcp --hub … --identity …`", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [ensureBin(), "mcp", "--hub", m.hub.url, "--identity", identityFile(m.caller)],
        stderr: "pipe"
      })
      const client = yield* connected(transport)
      const r = yield* conversation(m, client)
      checkConversation(m, r)
      yield* approveAndResume(m, client, r.paused)
    })), 60_000)
})
