/**
 * Tool calling on the wire: the OpenAI-compatible provider sends `tools` and `tool_calls`/`tool` turns and reads
 * `tool_calls`; the Anthropic provider sends `tools` and `tool_use`/`tool_result` blocks and reads `tool_use`.
 * A node:http peer on 127.0.0.1 records each body and answers a canned reply.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { ChatRequest } from "../../src/core/ModelProvider.js"
import * as ModelProviderAnthropic from "../../src/model/ModelProviderAnthropic.js"
import * as ModelProviderOpenAi from "../../src/model/ModelProviderOpenAi.js"

/** A peer answering `reply` to every POST and keeping the parsed bodies. */
const peer = (reply: unknown) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const bodies: Array<Record<string, unknown>> = []
      const server = http.createServer((req, res) => {
        let text = ""
        req.on("data", (c: Buffer) => (text += c.toString("utf8")))
        req.on("end", () => {
          bodies.push(JSON.parse(text) as Record<string, unknown>)
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(reply))
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies, server }
    }),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

const request: ChatRequest = {
  model: "m",
  messages: [
    { role: "system", content: "be brief" },
    { role: "user", content: "2+3?" },
    { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "add", arguments: '{"a":2,"b":3}' }] },
    { role: "tool", toolCallId: "call_1", name: "add", content: "5" }
  ],
  tools: [{ name: "add", description: "Adds", inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } }]
}

describe("tool calling on the wire", () => {
  it.live("OpenAI-compatible: tools, tool_calls and tool turns out; tool_calls in", () =>
    Effect.gen(function* () {
      const p = yield* peer({
        model: "m",
        choices: [{ message: { content: null, tool_calls: [{ id: "call_2", type: "function", function: { name: "add", arguments: '{"a":5,"b":1}' } }] }, finish_reason: "tool_calls" }],
        usage: { prompt_tokens: 10, completion_tokens: 5 }
      })
      const provider = yield* ModelProviderOpenAi.make({ baseUrl: p.url })
      const result = yield* provider.chat(request)
      assert.deepStrictEqual(result.toolCalls, [{ id: "call_2", name: "add", arguments: '{"a":5,"b":1}' }])
      assert.strictEqual(result.finishReason, "tool_calls")
      const body = p.bodies[0]!
      assert.deepStrictEqual(body.tools, [{ type: "function", function: { name: "add", description: "Adds", parameters: request.tools![0]!.inputSchema } }])
      assert.deepStrictEqual((body.messages as Array<unknown>).slice(2), [
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "5" }
      ])
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)))

  it.live("Anthropic: tools, tool_use and tool_result blocks out; tool_use in", () =>
    Effect.gen(function* () {
      const p = yield* peer({
        model: "m",
        content: [{ type: "text", text: "let me add" }, { type: "tool_use", id: "toolu_2", name: "add", input: { a: 5, b: 1 } }],
        stop_reason: "tool_use",
        usage: { input_tokens: 10, output_tokens: 5 }
      })
      const provider = yield* ModelProviderAnthropic.make({ baseUrl: p.url, apiKey: "k" })
      const result = yield* provider.chat({ ...request, toolChoice: "none" })
      assert.deepStrictEqual(result.toolCalls, [{ id: "toolu_2", name: "add", arguments: '{"a":5,"b":1}' }])
      assert.strictEqual(result.text, "let me add")
      const body = p.bodies[0]!
      assert.strictEqual(body.system, "be brief")
      assert.deepStrictEqual(body.tools, [{ name: "add", description: "Adds", input_schema: request.tools![0]!.inputSchema }])
      assert.deepStrictEqual(body.tool_choice, { type: "none" })
      assert.deepStrictEqual(body.messages, [
        { role: "user", content: "2+3?" },
        { role: "assistant", content: [{ type: "tool_use", id: "call_1", name: "add", input: { a: 2, b: 3 } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "call_1", content: "5" }] }
      ])
    }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)))
})
