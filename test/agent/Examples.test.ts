import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program as agentsInAHub } from "../../examples/agents-in-a-hub.js"
import { main as echo } from "../../examples/echo-agent.js"
import { main as humanGate } from "../../examples/human-gate.js"
import { main as streaming } from "../../examples/streaming-agent.js"

describe("agent examples", () => {
  it.live("echo-agent: one message in, the echo out", () =>
    Effect.gen(function* () {
      const reply = yield* Effect.promise(echo)
      assert.deepStrictEqual(reply, { message: "echo: hello (session demo)", sessionId: "demo" })
    }))

  it.live("streaming-agent: one chunk per word, then the whole message", () =>
    Effect.gen(function* () {
      const { chunks, final } = yield* Effect.promise(streaming)
      assert.deepStrictEqual(chunks, ["SIGNED ", "ENVELOPES ", "EVERYWHERE "])
      assert.strictEqual(final, "SIGNED ENVELOPES EVERYWHERE ")
    }))

  it.live("agents-in-a-hub: the planner's handler calls the weather agent by didHash as itself, with the user's correlation id; an unsigned caller is refused", () =>
    Effect.gen(function* () {
      const { reply, weatherSaw, unsignedCode } = yield* agentsInAHub
      assert.strictEqual("message" in reply ? reply.message : "", "plan a picnic: sunny in Lisbon (asked by did:mesh:example.planner)")
      assert.deepStrictEqual(weatherSaw, [{ caller: "did:mesh:example.planner", capability: "forecast", correlationId: "picnic-1" }])
      assert.strictEqual(unsignedCode, "SIGNATURE_MISSING")
    }))

  it.live("human-gate: paused at send_email, resumed once by the user's signed approval", () =>
    Effect.gen(function* () {
      const { asked, done, again, outbox } = yield* Effect.promise(humanGate)
      assert.strictEqual(asked.capability, "send_email")
      assert.strictEqual(asked.grantor, "did:mesh:example.user")
      assert.deepStrictEqual(done, { message: 'sent "lunch at noon?" to bob', sessionId: (done as { sessionId: string }).sessionId })
      assert.strictEqual(again, "TASK_ALREADY_RESUMED")
      assert.deepStrictEqual(outbox, ["lunch at noon?"])
    }))
})
