/**
 * Mesh agents as Vercel AI SDK tools: `generateText` with the SDK's own mock language model really calls a live
 * mesh agent (signed with mesh-sig, resolved through the hub) and reads its reply; `meshTools` builds the tool set
 * from a hub search; a refused call reaches the model as a tool error with the mesh's code; a human gate is an output.
 */
import { assert, describe, it } from "@effect/vitest"
import { generateText, stepCountIs } from "ai"
import { MockLanguageModelV3 } from "ai/test"

/** The mock's `doGenerate` as a function, its call options and its result (types `ai` does not re-export). */
type DoGenerate = Extract<NonNullable<NonNullable<ConstructorParameters<typeof MockLanguageModelV3>[0]>["doGenerate"]>, (...args: never) => unknown>
type LanguageModelV3CallOptions = Parameters<DoGenerate>[0]
type LanguageModelV3GenerateResult = Awaited<ReturnType<DoGenerate>>
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as AgentServer from "../../src/agent/AgentServer.js"
import type { Keys } from "../../src/core/Keys.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { meshAgentTool, meshTools } from "../../src/promise/AiSdk.js"
import { registeredAgent, startHub } from "../hub/support.js"

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 5, text: 5, reasoning: undefined } }

/** A model that calls `toolName` with `message` once, then answers with what the tool returned (or its error). */
const mockModel = (toolName: string, message: unknown) =>
  new MockLanguageModelV3({
    doGenerate: async (options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> => {
      const results = options.prompt.filter((m) => m.role === "tool").flatMap((m) => m.content)
      if (results.length === 0) {
        return { content: [{ type: "tool-call", toolCallId: "call-1", toolName, input: JSON.stringify({ message }) }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] }
      }
      return { content: [{ type: "text", text: `the agent said: ${JSON.stringify(results.map((r) => ("output" in r ? r.output : r)))}` }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }
    }
  })

/** A hub with a mesh-sig `weather` agent (streams two chunks) and a `mailer` behind a human gate; the caller registered. */
const mesh = Effect.gen(function* () {
  const { hub, client } = yield* startHub()
  const caller = yield* registeredAgent(client, "assistant")
  const weather = yield* registeredAgent(client, "weather")
  const mailer = yield* registeredAgent(client, "mailer")
  const serveAgent = (a: typeof weather, handler: AgentServer.Handler) =>
    Effect.tap(
      AgentServer.make({ name: a.identity.did, did: a.identity.did, privateKey: a.identity.privateKey, database: ":memory:", auth: "mesh-sig", hubUrl: hub.url, handler }),
      (served) => client.updateAgent(a.record.didHash, { endpointUrl: served.url }, { identity: a.identity, apiKey: a.apiKey })
    )
  yield* serveAgent(weather, async function* ({ message, caller: who }) {
    yield "sunny "
    yield `in ${message} (asked by ${who.did})`
  })
  yield* serveAgent(mailer, async ({ guard }) => {
    await guard("send_email")
    return "sent"
  })
  const mandate = (yield* issueTaskMandate({
    grantorDid: caller.identity.did,
    granteeDid: mailer.identity.did,
    privateKey: caller.identity.privateKey,
    constraints: { allowed: ["send_email"], humanGates: ["send_email"], maxDelegationDepth: 0 }
  })).token
  return { hub, caller: caller.identity, weather: weather.record.didHash, mailer: mailer.record.didHash, mandate }
})

const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope | Keys | HttpClient.HttpClient>) =>
  effect.pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

describe("Vercel AI SDK bridge", () => {
  it.live("generateText with the mock model calls a live mesh agent found by meshTools, signed as the caller", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const signAs = { did: m.caller.did, privateKey: m.caller.privateKey }
      const tools = yield* Effect.promise(() => meshTools({ hub: m.hub.url, query: "weather", signAs }))
      assert.deepStrictEqual(Object.keys(tools), ["weather"])
      const model = mockModel("weather", "Lisbon")
      const result = yield* Effect.promise(() => generateText({ model, tools, prompt: "weather in Lisbon?", stopWhen: stepCountIs(3) }))
      const output = result.steps[0]?.toolResults[0]?.output as { status: string; message: string }
      assert.deepStrictEqual([output.status, output.message], ["completed", `sunny in Lisbon (asked by ${m.caller.did})`])
      assert.include(result.text, `sunny in Lisbon (asked by ${m.caller.did})`)
      // The model saw the tool offered with its input schema.
      assert.strictEqual(model.doGenerateCalls[0]?.tools?.[0]?.name, "weather")
    })))

  it.live("streamed: the chunks are preliminary outputs and the last output is the whole reply", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const weather = meshAgentTool(m.weather, { hub: m.hub.url, signAs: { did: m.caller.did, privateKey: m.caller.privateKey }, stream: true })
      const outputs: Array<unknown> = []
      const iterable = weather.execute!({ message: "Porto" }, { toolCallId: "t", messages: [] }) as AsyncIterable<unknown>
      yield* Effect.promise(async () => {
        for await (const o of iterable) outputs.push(o)
      })
      assert.deepStrictEqual(outputs, [
        { status: "streaming", message: "sunny " },
        { status: "streaming", message: `sunny in Porto (asked by ${m.caller.did})` },
        { status: "completed", message: `sunny in Porto (asked by ${m.caller.did})`, sessionId: (outputs[2] as { sessionId: string }).sessionId }
      ])
    })))

  it.live("an unsigned call is a tool error carrying the mesh's code; a human gate is an approval_required output", () =>
    run(Effect.gen(function* () {
      const m = yield* mesh
      const unsigned = yield* Effect.promise(() =>
        generateText({ model: mockModel("weather", "Oslo"), tools: { weather: meshAgentTool(m.weather, { hub: m.hub.url }) }, prompt: "?", stopWhen: stepCountIs(3) })
      )
      const error = unsigned.steps[0]?.content.find((p) => p.type === "tool-error") as { error: { code: string } } | undefined
      assert.strictEqual(error?.error.code, "SIGNATURE_MISSING")
      assert.include(unsigned.text, "SIGNATURE_MISSING")

      // Input that is not { message: string } is refused by the tool's schema, before any call.
      const malformed = yield* Effect.promise(() =>
        generateText({ model: mockModel("weather", 42), tools: { weather: meshAgentTool(m.weather, { hub: m.hub.url }) }, prompt: "?", stopWhen: stepCountIs(3) })
      )
      const invalid = malformed.steps[0]?.content.find((p) => p.type === "tool-call") as { invalid?: boolean; error?: { name?: string } } | undefined
      assert.deepStrictEqual([invalid?.invalid, invalid?.error?.name], [true, "AI_InvalidToolInputError"])
      assert.include(malformed.text, "Invalid input for tool weather")

      const mailer = meshAgentTool(m.mailer, { hub: m.hub.url, signAs: { did: m.caller.did, privateKey: m.caller.privateKey }, mandate: () => m.mandate })
      const gated = yield* Effect.promise(() => generateText({ model: mockModel("mailer", "hi"), tools: { mailer }, prompt: "?", stopWhen: stepCountIs(3) }))
      const output = gated.steps[0]?.toolResults[0]?.output as { status: string; capability: string; grantor: string }
      assert.deepStrictEqual([output.status, output.capability, output.grantor], ["approval_required", "send_email", m.caller.did])
    })))
})
