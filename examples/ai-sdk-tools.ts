/**
 * Mesh agents as Vercel AI SDK tools: `meshTools` turns the hub's search hits into a tool set and `generateText`
 * calls the agent the model picks, signed as the caller (mesh-sig). The model here is the AI SDK's mock, scripted to
 * call the tool once and then report what it returned, so the example runs without a provider key; pass any AI SDK
 * model instead (`openai("gpt-4o")`, `anthropic("claude-…")`).
 *
 *   npx tsx examples/ai-sdk-tools.ts
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { generateText, stepCountIs } from "ai"
import { MockLanguageModelV3 } from "ai/test"

/** The mock's `doGenerate` as a function, its call options and its result (types `ai` does not re-export). */
type DoGenerate = Extract<NonNullable<NonNullable<ConstructorParameters<typeof MockLanguageModelV3>[0]>["doGenerate"]>, (...args: never) => unknown>
type LanguageModelV3CallOptions = Parameters<DoGenerate>[0]
type LanguageModelV3GenerateResult = Awaited<ReturnType<DoGenerate>>
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as AgentServer from "../src/agent/AgentServer.js"
import { generateDid } from "../src/core/Did.js"
import * as Hub from "../src/hub/Hub.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { meshTools } from "../src/promise/AiSdk.js"

const usage = { inputTokens: { total: 20, noCache: 20, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 10, text: 10, reasoning: undefined } }

/** A stand-in model: calls the first tool offered with the user's question, then answers with the tool's output. */
const scriptedModel = () =>
  new MockLanguageModelV3({
    doGenerate: async (options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> => {
      const results = options.prompt.filter((m) => m.role === "tool").flatMap((m) => m.content)
      const tool = options.tools?.[0]
      if (results.length === 0 && tool !== undefined) {
        return { content: [{ type: "tool-call", toolCallId: "call-1", toolName: tool.name, input: JSON.stringify({ message: "Lisbon" }) }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] }
      }
      const output = results.map((r) => ("output" in r && r.output.type === "json" ? (r.output.value as { message?: string }).message : "")).join(" ")
      return { content: [{ type: "text", text: `According to the mesh: ${output}` }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }
    }
  })

/** The whole scene; returns the model's answer and the tools it was offered. */
export const program = Effect.gen(function* () {
  const hub = yield* Hub.start({ database: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-example-")), "hub.db") })
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey })
  const weather = yield* generateDid("weather", undefined, "example")
  const served = yield* AgentServer.make({
    name: "weather",
    did: weather.did,
    privateKey: weather.privateKey,
    database: ":memory:",
    auth: "mesh-sig",
    hubUrl: hub.url,
    handler: ({ message }) => `sunny and 24 °C in ${message}`
  })
  yield* registry.registerAgent({ identity: weather, endpointUrl: served.url, manifest: { name: weather.did, meshProtocolVersion: "1.0", capabilities: ["forecast"] } })
  const me = yield* generateDid("app", undefined, "example")
  yield* registry.registerAgent({ identity: me, endpointUrl: "http://127.0.0.1:9/none", manifest: { name: me.did, meshProtocolVersion: "1.0", capabilities: [] } })

  return yield* Effect.promise(async () => {
    const tools = await meshTools({ hub: hub.url, query: "weather", signAs: { did: me.did, privateKey: me.privateKey } })
    const { text } = await generateText({ model: scriptedModel(), tools, prompt: "What is the weather in Lisbon?", stopWhen: stepCountIs(3) })
    return { tools: Object.keys(tools), text }
  }).pipe(Effect.tap(({ tools, text }) => Console.log(`tools offered: ${tools.join(", ")}\nmodel: ${text}`)))
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await Effect.runPromise(program)
