/**
 * Mesh agents use MCP servers: a real MCP server (the official SDK's) registered in a hub, called by an agent's
 * handler through `input.mcp(didHash)` under the task guard, and by an LLM agent through a scripted model's tool
 * calls; a local server over stdio.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as Scope from "effect/Scope"
import * as path from "node:path"
import type { Keys } from "../../src/core/Keys.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import * as AgentClient from "../../src/agent/AgentClient.js"
import type { McpAccess } from "../../src/agent/Handler.js"
import * as McpClient from "../../src/agent/McpClient.js"
import { didHash, generateDid, type MeshIdentity } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import { signApproval } from "../../src/core/Approval.js"
import type { TaskConstraints } from "../../src/core/Constraints.js"
import { makeScripted, type ChatRequest } from "../../src/core/ModelProvider.js"
import { makeStatic } from "../../src/core/KeyResolver.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { startHub } from "../hub/support.js"
import { startToolServer, type ToolServer } from "../support/mcpToolServer.js"

const toolServer = Effect.acquireRelease(Effect.promise(startToolServer), (s) => Effect.promise(s.close))

/** A hub with the tool server registered in it; the user and the agent's identities. */
const scene = Effect.gen(function* () {
  const { hub, client: registry } = yield* startHub()
  const server: ToolServer = yield* toolServer
  const record = yield* registry.registerMcp({ name: "calc", endpointUrl: server.url, tools: ["add", "echo", "broken"] })
  const user = yield* generateDid("user", undefined, "test")
  const agent = yield* generateDid("tools", undefined, "test")
  const client = yield* AgentClient.make()
  return { hub, server, record, user, agent, client }
})

const mandateFor = (user: MeshIdentity, agent: MeshIdentity, constraints: TaskConstraints) =>
  Effect.map(issueTaskMandate({ grantorDid: user.did, granteeDid: agent.did, privateKey: user.privateKey, constraints }), (m) => m.token)

/** Grantor keys come from a static resolver (the user is not registered); MCP servers from the hub. */
const resolverOf = (user: MeshIdentity) => makeStatic({ [user.did]: { publicKey: user.privateKey.publicKey, keyVersion: 1 } })

/** The test server's tools as a handler types them. */
type CalcTools = { readonly add: { readonly a: number; readonly b: number }; readonly echo: { readonly text: string }; readonly broken: Record<string, never> }

/** Compile-time only: typed access refuses an unknown tool and wrong arguments. */
const _typedAccessRefuses = (access: McpAccess<CalcTools>) => [
  // @ts-expect-error no such tool
  access.callTool("subtract", { a: 1, b: 2 }),
  // @ts-expect-error add takes numbers
  access.callTool("add", { a: "1", b: 2 })
]

const textOf = (r: AgentClient.CallResult) => ("message" in r ? r.message : `paused at ${r.approvalRequired.capability}`)

const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope | Keys | HttpClient.HttpClient>) =>
  effect.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

describe("MCP client: mesh agents use MCP servers", () => {
  it.live("a stdio server that dies is MCP_UNREACHABLE once; the next call starts it again", () =>
    Effect.gen(function* () {
      const client = yield* McpClient.make({ servers: { calc: { command: process.execPath, args: ["--import", "tsx", path.resolve("test/support/mcpToolServer.ts")] } } })
      assert.strictEqual((yield* client.callTool("calc", "echo", { text: "one" })).content[0]?.text, "one")
      const died = yield* Effect.flip(client.callTool("calc", "crash", {}))
      assert.strictEqual(died.code, "MCP_UNREACHABLE")
      assert.strictEqual((yield* client.callTool("calc", "echo", { text: "two" })).content[0]?.text, "two")
      const unknown = yield* Effect.flip(client.callTool("calc", "nope", {}))
      assert.strictEqual(unknown.code, "TOOL_NOT_FOUND")
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer)), 30_000)

  it.live("a handler lists and calls the registered server's tools by didHash, each call under the task guard", () =>
    run(Effect.gen(function* () {
      const { hub, server, record, user, agent, client } = yield* scene
      const h = record.didHash
      const served = yield* AgentServer.make({
        name: "tools",
        did: agent.did,
        privateKey: agent.privateKey,
        database: ":memory:",
        hubUrl: hub.url,
        resolveCallerKey: resolverOf(user),
        handler: async ({ mcp, message }) => {
          const calc = mcp<CalcTools>(h)
          const tools = (await calc.listTools()).map((t) => t.name).sort().join(",")
          const sum = await calc.callTool("add", { a: 2, b: 40 })
          const broken = await calc.callTool("broken")
          const refused = await calc.callTool("echo", { text: message }).then(() => "called", (e: { code: string }) => e.code)
          return `${tools} | ${sum.content[0]?.text} | broken isError=${broken.isError} | echo ${refused}`
        }
      })
      const mandate = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`, `mcp:${h}/broken`], maxDelegationDepth: 0 })
      const reply = yield* client.call(served.url, "hello", { mandate })
      assert.strictEqual(textOf(reply), "add,broken,echo | 42 | broken isError=true | echo CAPABILITY_NOT_PERMITTED")
      // The refused call never reached the server.
      assert.deepStrictEqual(server.calls, ['add {"a":2,"b":40}', "broken {}"])
    })))

  it.live("without a mandate a tool call is refused before the server is asked; blocked, limits and human gates apply", () =>
    run(Effect.gen(function* () {
      const { hub, server, record, user, agent, client } = yield* scene
      const h = record.didHash
      const served = yield* AgentServer.make({
        name: "tools",
        did: agent.did,
        privateKey: agent.privateKey,
        database: ":memory:",
        hubUrl: hub.url,
        resolveCallerKey: resolverOf(user),
        handler: async ({ mcp, message }) => {
          const r = await mcp(h).callTool(message === "twice" ? "add" : message, message === "echo" ? { text: "hi" } : { a: 1, b: 1 })
          if (message === "twice") await mcp(h).callTool("add", { a: 2, b: 2 })
          return r.content.map((c) => String(c.text)).join("")
        }
      })
      const noMandate = yield* Effect.flip(client.call(served.url, "add"))
      assert.strictEqual(noMandate.code, "MANDATE_REQUIRED")

      const blocked = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`, `mcp:${h}/echo`], blocked: [`mcp:${h}/echo`], maxDelegationDepth: 0 })
      assert.strictEqual((yield* Effect.flip(client.call(served.url, "echo", { mandate: blocked }))).code, "CAPABILITY_NOT_PERMITTED")

      const limited = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`], actionLimits: { [`mcp:${h}/add`]: 1 }, maxDelegationDepth: 0 })
      assert.strictEqual((yield* Effect.flip(client.call(served.url, "twice", { mandate: limited }))).code, "ACTION_LIMIT_EXCEEDED")

      const gated = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`], humanGates: [`mcp:${h}/add`], maxDelegationDepth: 0 })
      const paused = yield* client.call(served.url, "add", { mandate: gated })
      assert.strictEqual(textOf(paused), `paused at mcp:${h}/add`)
      // Only the one call the limited mandate allowed reached the server.
      assert.deepStrictEqual(server.calls, ['add {"a":1,"b":1}'])
    })))

  it.live("an unknown didHash is MCP_NOT_FOUND to the handler; a local server is reached over stdio", () =>
    run(Effect.gen(function* () {
      const { hub, user, agent, client } = yield* scene
      const served = yield* AgentServer.make({
        name: "tools",
        did: agent.did,
        privateKey: agent.privateKey,
        database: ":memory:",
        hubUrl: hub.url,
        resolveCallerKey: resolverOf(user),
        mcpServers: { calc: { command: process.execPath, args: ["--import", "tsx", path.resolve("test/support/mcpToolServer.ts")] } },
        handler: async ({ mcp, message }) => {
          if (message === "unknown") return mcp("unknownhash0000000000").listTools().then(() => "listed", (e: { code: string }) => e.code)
          const r = await mcp("calc").callTool("echo", { text: "over stdio" })
          return String(r.content[0]?.text)
        }
      })
      assert.strictEqual(textOf(yield* client.call(served.url, "unknown")), "MCP_NOT_FOUND")
      const mandate = yield* mandateFor(user, agent, { allowed: ["mcp:calc/echo"], maxDelegationDepth: 0 })
      assert.strictEqual(textOf(yield* client.call(served.url, "stdio", { mandate })), "over stdio")
    })))

  it.live("an LLM agent gets the tools as function tools: the scripted model calls add, reads 5 and answers; a refused call is told to it", () =>
    run(Effect.gen(function* () {
      const { hub, server, record, user, agent, client } = yield* scene
      const h = record.didHash
      const provider = makeScripted((request: ChatRequest, i: number) => {
        if (i === 0) return { text: "", toolCalls: [{ id: "c1", name: "add", arguments: '{"a":2,"b":3}' }, { id: "c2", name: "echo", arguments: '{"text":"x"}' }] }
        const results = request.messages.filter((m) => m.role === "tool").map((m) => m.content)
        return `the tools said: ${results.join(" / ")}`
      })
      const served = yield* AgentServer.make({
        name: "llm",
        did: agent.did,
        privateKey: agent.privateKey,
        database: ":memory:",
        hubUrl: hub.url,
        resolveCallerKey: resolverOf(user),
        provider,
        model: "scripted-1",
        mcpTools: [h]
      })
      const mandate = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`], maxDelegationDepth: 0 })
      const reply = yield* client.call(served.url, "what is 2+3?", { mandate })
      assert.match(textOf(reply), /^the tools said: 5 \/ refused: CAPABILITY_NOT_PERMITTED: /)
      assert.deepStrictEqual(provider.requests[0]?.tools?.map((t) => t.name).sort(), ["add", "broken", "echo"])
      assert.deepStrictEqual(server.calls, ['add {"a":2,"b":3}'])
      assert.strictEqual(provider.requests.length, 2)
    })))

  it.live("an LLM agent's gated tool call pauses the run; once approved, the resumed run calls the tool once and answers", () =>
    run(Effect.gen(function* () {
      const { hub, server, record, user, agent, client } = yield* scene
      const h = record.didHash
      const provider = makeScripted((request: ChatRequest) => {
        const results = request.messages.filter((m) => m.role === "tool").map((m) => m.content)
        return results.length === 0 ? { text: "", toolCalls: [{ id: "c1", name: "add", arguments: '{"a":20,"b":22}' }] } : `it is ${results.join("")}`
      })
      const served = yield* AgentServer.make({
        name: "llm",
        did: agent.did,
        privateKey: agent.privateKey,
        database: ":memory:",
        hubUrl: hub.url,
        resolveCallerKey: resolverOf(user),
        provider,
        model: "scripted-1",
        mcpTools: [h]
      })
      const mandate = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`], humanGates: [`mcp:${h}/add`], maxDelegationDepth: 0 })
      const paused = yield* client.call(served.url, "what is 20+22?", { mandate })
      assert.strictEqual(textOf(paused), `paused at mcp:${h}/add`)
      assert.deepStrictEqual(server.calls, [])
      if (!("approvalRequired" in paused)) return assert.fail("expected a pause")
      const approval = yield* signApproval({ taskId: paused.approvalRequired.taskId, capability: `mcp:${h}/add` }, user.did, user.privateKey)
      const resumed = yield* client.resume(served.url, paused.approvalRequired.taskId, approval)
      assert.strictEqual(textOf(resumed), "it is 42")
      assert.deepStrictEqual(server.calls, ['add {"a":20,"b":22}'])
    })))

  it.live("the tool loop is bounded: a model that keeps calling tools is made to answer in text", () =>
    run(Effect.gen(function* () {
      const { hub, server, record, user, agent, client } = yield* scene
      const h = record.didHash
      const provider = makeScripted((request: ChatRequest) =>
        request.toolChoice === "none" ? "done asking" : { text: "", toolCalls: [{ id: "c", name: "add", arguments: '{"a":1,"b":1}' }] }
      )
      const served = yield* AgentServer.make({
        name: "llm",
        did: agent.did,
        privateKey: agent.privateKey,
        database: ":memory:",
        hubUrl: hub.url,
        resolveCallerKey: resolverOf(user),
        provider,
        model: "scripted-1",
        mcpTools: [h],
        maxToolSteps: 3
      })
      const mandate = yield* mandateFor(user, agent, { allowed: [`mcp:${h}/add`], maxDelegationDepth: 0 })
      assert.strictEqual(textOf(yield* client.call(served.url, "loop", { mandate })), "done asking")
      assert.strictEqual(server.calls.length, 3)
      assert.strictEqual(provider.requests.length, 4)
      assert.strictEqual(didHash(agent.did), served.didHash)
    })))
})
