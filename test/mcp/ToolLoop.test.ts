/** The tool loop alone: naming, arguments the model got wrong, refusals told to the model, pauses that end the run. */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { AgentForbidden } from "../../src/agent/AgentError.js"
import { GatePaused, type McpAccess, type RunInput } from "../../src/agent/Handler.js"
import { McpClient, layerTest, type McpToolResult } from "../../src/agent/McpClient.js"
import * as ToolLoop from "../../src/agent/ToolLoop.js"
import { makeScripted, type ChatRequest, type ToolResultTurn } from "../../src/core/ModelProvider.js"

const ok = (text: string): McpToolResult => ({ content: [{ type: "text", text }], isError: false })
const schema = { type: "object" }

/** A run input whose `mcp` goes to the test client, refusing the capabilities in `refused` with their code. */
const inputWith = (refused: Record<string, AgentForbidden | GatePaused>) =>
  Effect.map(McpClient, (client) => {
    const mcp = (server: string): McpAccess => ({
      server,
      listTools: () => Promise.reject(new Error("unused")),
      callTool: () => Promise.reject(new Error("unused")),
      listToolsEffect: () => client.listTools(server),
      callToolEffect: (tool, args = {}) => {
        const no = refused[`mcp:${server}/${tool}`]
        return no === undefined ? client.callTool(server, tool, args) : Effect.fail(no)
      }
    })
    return { mcp } as unknown as RunInput
  })

const servers = layerTest({
  a: { "get.weather": { inputSchema: schema, call: (args) => ok(`sunny in ${String(args.city)}`) }, send: { inputSchema: schema, call: () => ok("sent") } },
  b: { "get.weather": { inputSchema: schema, call: () => ok("rainy") } }
})

const resultsOf = (request: ChatRequest) => request.messages.filter((m): m is ToolResultTurn => m.role === "tool")

describe("ToolLoop", () => {
  it("names tools for the model, suffixing a name another server took", () => {
    const offered = ToolLoop.offer([
      { server: "a", tools: [{ name: "get.weather", inputSchema: schema }] },
      { server: "b", tools: [{ name: "get.weather", inputSchema: schema }] }
    ])
    assert.deepStrictEqual(offered.map((o) => [o.spec.name, o.server, o.tool]), [["get_weather", "a", "get.weather"], ["get_weather_2", "b", "get.weather"]])
  })

  it.effect("runs each call, tells the model of bad arguments, unknown tools and refusals, and sums the usage", () =>
    Effect.gen(function* () {
      const input = yield* inputWith({ "mcp:a/send": new AgentForbidden({ code: "CAPABILITY_NOT_PERMITTED", message: "mcp:a/send is not allowed" }) })
      const offered = ToolLoop.offer([{ server: "a", tools: [{ name: "get.weather", inputSchema: schema }, { name: "send", inputSchema: schema }] }, { server: "b", tools: [{ name: "get.weather", inputSchema: schema }] }])
      const provider = makeScripted([
        {
          text: "",
          inputTokens: 10,
          outputTokens: 1,
          toolCalls: [
            { id: "1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
            { id: "2", name: "get_weather_2", arguments: "{}" },
            { id: "3", name: "send", arguments: "{}" },
            { id: "4", name: "get_weather", arguments: "{not json" },
            { id: "5", name: "nope", arguments: "{}" },
            { id: "6", name: "get_weather", arguments: "[1]" }
          ]
        },
        { text: "done", inputTokens: 20, outputTokens: 2 }
      ])
      const result = yield* ToolLoop.run({ request: { model: "m", messages: [{ role: "user", content: "go" }] }, offered, input, ask: provider.chat })
      assert.strictEqual(result.text, "done")
      assert.deepStrictEqual(result.usage, { inputTokens: 30, outputTokens: 3 })
      const told = resultsOf(provider.requests[1]!).map((t) => [t.toolCallId, t.content, t.isError === true])
      assert.deepStrictEqual(told, [
        ["1", "sunny in Lisbon", false],
        ["2", "rainy", false],
        ["3", "refused: CAPABILITY_NOT_PERMITTED: mcp:a/send is not allowed", true],
        ["4", "the arguments of get_weather are not JSON", true],
        ["5", "no tool named nope", true],
        ["6", "the arguments of get_weather must be a JSON object", true]
      ])
    }).pipe(Effect.provide(servers)))

  it.effect("a pause at a human gate and a refusal that is not the model's to handle end the run", () =>
    Effect.gen(function* () {
      const offered = ToolLoop.offer([{ server: "a", tools: [{ name: "send", inputSchema: schema }] }])
      const asks = makeScripted([{ text: "", toolCalls: [{ id: "1", name: "send", arguments: "{}" }] }])
      const paused = yield* inputWith({ "mcp:a/send": new GatePaused({ taskId: "t", capability: "mcp:a/send" }) })
      const p = yield* Effect.flip(ToolLoop.run({ request: { model: "m", messages: [] }, offered, input: paused, ask: asks.chat }))
      assert.strictEqual(p._tag, "GatePaused")
      const cancelled = yield* inputWith({ "mcp:a/send": new AgentForbidden({ code: "RUN_CANCELLED", message: "over" }) })
      const c = yield* Effect.flip(ToolLoop.run({ request: { model: "m", messages: [] }, offered, input: cancelled, ask: asks.chat }))
      assert.strictEqual(c._tag === "AgentForbidden" ? c.code : c._tag, "RUN_CANCELLED")
    }).pipe(Effect.provide(servers)))
})
