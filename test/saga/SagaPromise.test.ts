import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as KeysNative from "../../src/node/KeysNative.js"
import { getSaga, runSaga } from "../../src/promise/SagaPromise.js"
import type { SagaCallError } from "../../src/saga/SagaClient.js"
import { step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("SagaPromise", () => {
  it.live("runSaga resolves with the saga's end, having reported every event; a refusal rejects with its code", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }] })
        const mandate = yield* w.mandate()
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "hotel", "hotel", "book-hotel", 20)]
        const seen: Array<string> = []
        const ended = yield* Effect.promise(() => runSaga(w.hub.url, { mandate, steps }, { identity: w.buyer, onEvent: (e) => void seen.push(e.type) }))
        assert.strictEqual(ended.status, "committed")
        assert.deepStrictEqual(seen, ["saga_started", "step_started", "step_committed", "step_started", "step_committed", "saga_committed"])
        assert.strictEqual((yield* Effect.promise(() => getSaga(w.hub.url, ended.sagaId, { identity: w.buyer }))).status, "committed")
        const refused = yield* Effect.promise(() => runSaga(w.hub.url, { mandate, steps: [steps[0]!, steps[0]!] }, { identity: w.buyer }).then(() => undefined, (e: SagaCallError) => e))
        assert.deepStrictEqual([refused?._tag, refused?.code, refused?.status], ["SagaCallError", "INVALID_REQUEST", 400])
      })
    ))
})
