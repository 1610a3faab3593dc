/**
 * What streamed runs keep for reconnects: bounded per run and across runs (bytes counted, not time), let go after
 * the retention time on the Clock.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as AgentServer from "../../src/agent/AgentServer.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const runIdOf = (events: ReadonlyArray<{ readonly id: string }>) => events[0]!.id.split(":")[0]!

describe("streamed-run retention", () => {
  it.live("past maxRetainedEventBytes the oldest finished runs are let go first; the newest stays reconnectable", () =>
    provide(
      Effect.gen(function* () {
        const cap = 4096
        const agent = yield* AgentServer.make({ name: "cap", database: ":memory:", maxRetainedEventBytes: cap, handler: () => "x".repeat(1200) })
        const first = yield* readSse(`${agent.url}/v1/run`, { message: "one" })
        assert.deepStrictEqual(first.events.map((e) => e.event), ["chunk", "done"])
        const afterFirst = agent.stats()
        assert.strictEqual(afterFirst.streamedRuns, 1)
        assert.isAbove(afterFirst.retainedEventBytes, cap / 2)
        const second = yield* readSse(`${agent.url}/v1/run`, { message: "two" })
        assert.deepStrictEqual(second.events.map((e) => e.event), ["chunk", "done"])
        const stats = agent.stats()
        assert.strictEqual(stats.streamedRuns, 1)
        assert.isAtMost(stats.retainedEventBytes, cap)

        const gone = yield* readSse(`${agent.url}/v1/run`, { message: "one" }, { "last-event-id": `${runIdOf(first.events)}:0` })
        assert.strictEqual(gone.status, 404)
        assert.strictEqual(gone.body.code, "RUN_NOT_FOUND")
        const kept = yield* readSse(`${agent.url}/v1/run`, { message: "two" }, { "last-event-id": `${runIdOf(second.events)}:0` })
        assert.deepStrictEqual(kept.events.map((e) => e.event), ["done"])
      })
    ))

  it.live("while live runs alone hold the cap, a new streamed run is 503 AGENT_BUSY; once they finish, it is accepted", () =>
    provide(
      Effect.gen(function* () {
        let release: () => void = () => undefined
        const gate = new Promise<void>((resolve) => (release = resolve))
        const agent = yield* AgentServer.make({
          name: "busy",
          database: ":memory:",
          maxRetainedEventBytes: 4096,
          handler: async function* ({ message }) {
            if (message === "small") return yield "ok"
            yield "y".repeat(5000)
            await gate
            yield "end"
          }
        })
        // The client goes away after the first event; the run goes on in the background, holding its events.
        const big = yield* readSse(`${agent.url}/v1/run`, { message: "big" }, {}, () => true)
        assert.strictEqual(big.events.length, 1)
        assert.isAbove(agent.stats().retainedEventBytes, 4096)
        const refused = yield* readSse(`${agent.url}/v1/run`, { message: "small" })
        assert.strictEqual(refused.status, 503)
        assert.strictEqual(refused.body.code, "AGENT_BUSY")
        release()
        // Once the big run has finished, it gives way: poll (bounded) until the server is no longer busy.
        let accepted = refused
        for (let i = 0; i < 200 && accepted.status === 503; i++) {
          yield* Effect.promise(() => new Promise((r) => setImmediate(r)))
          accepted = yield* readSse(`${agent.url}/v1/run`, { message: "small" })
        }
        assert.deepStrictEqual(accepted.events.map((e) => e.event), ["chunk", "done"])
        assert.isAtMost(agent.stats().retainedEventBytes, 4096)
      })
    ))

  it.effect("an idle server lets finished runs go on a schedule, with no new run to trigger it (TestClock)", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ name: "idle", database: ":memory:", runRetentionMs: 60_000, handler: () => "hi" })
        yield* readSse(`${agent.url}/v1/run`, { message: "one" })
        assert.strictEqual(agent.stats().streamedRuns, 1)
        assert.isAbove(agent.stats().retainedEventBytes, 0)
        yield* TestClock.adjust("61 seconds")
        assert.strictEqual(agent.stats().streamedRuns, 1)
        yield* TestClock.adjust("60 seconds")
        assert.deepStrictEqual(agent.stats(), { streamedRuns: 0, retainedEventBytes: 0, a2aTasks: 0, a2aTaskBytes: 0 })
      })
    ))

  it.effect("a finished run is let go once runRetentionMs has passed on the Clock (TestClock)", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ name: "ttl", database: ":memory:", runRetentionMs: 60_000, handler: () => "hi" })
        const first = yield* readSse(`${agent.url}/v1/run`, { message: "one" })
        yield* TestClock.adjust("59 seconds")
        yield* readSse(`${agent.url}/v1/run`, { message: "two" })
        assert.strictEqual(agent.stats().streamedRuns, 2)
        yield* TestClock.adjust("2 seconds")
        yield* readSse(`${agent.url}/v1/run`, { message: "three" })
        assert.strictEqual(agent.stats().streamedRuns, 2)
        const gone = yield* readSse(`${agent.url}/v1/run`, { message: "one" }, { "last-event-id": `${runIdOf(first.events)}:0` })
        assert.strictEqual(gone.body.code, "RUN_NOT_FOUND")
      })
    ))
})
