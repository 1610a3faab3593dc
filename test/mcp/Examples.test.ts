/** The bridge examples run as written: the MCP client, the MCP server and the AI SDK tools. */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program as aiSdkTools } from "../../examples/ai-sdk-tools.js"
import { program as mcpServer } from "../../examples/mcp-server.js"
import { program as mcpTools } from "../../examples/mcp-tools.js"

describe("bridge examples", () => {
  it.live("mcp-tools: the allowed tool runs on the MCP server, the other is refused before it", () =>
    Effect.gen(function* () {
      const { reply, ran } = yield* mcpTools
      assert.strictEqual(reply, "tools add, delete_everything; 19 + 23 = 42; delete_everything: CAPABILITY_NOT_PERMITTED")
      assert.deepStrictEqual(ran, ["add 19 23"])
    }))

  it.live("mcp-server: an MCP client finds the translator, calls it signed and sees its chunks as progress", () =>
    Effect.gen(function* () {
      const { found, reply, progress } = yield* mcpServer
      assert.strictEqual(found, "did:mesh:example.translator")
      assert.strictEqual(reply, "olá mundo ")
      assert.deepStrictEqual(progress, ["olá ", "mundo "])
    }))

  it.live("ai-sdk-tools: generateText calls the weather agent found by meshTools and answers with its reply", () =>
    Effect.gen(function* () {
      const { tools, text } = yield* aiSdkTools
      assert.deepStrictEqual(tools, ["example_weather"])
      assert.strictEqual(text, "According to the mesh: sunny and 24 °C in Lisbon")
    }))
})
