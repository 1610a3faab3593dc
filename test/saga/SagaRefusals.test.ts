import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { generateDid } from "../../src/core/Did.js"
import { toBase64Url } from "../../src/core/internal/bytes.js"
import { issueIntentMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { headerFor, signRaw } from "../support/mandates.js"
import { step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("a saga refused before anything runs", () => {
  it.live("duplicate step names, an unknown agent, a budget above the mandate, an expired or misdirected mandate: typed errors, no agent called", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }], spendLimitUsd: 50 })
        const mandate = yield* w.mandate()
        const flight = step(w.agents, "flight", "airline", "book-flight", 30)
        const hotel = step(w.agents, "hotel", "hotel", "book-hotel", 20)
        const refusal = (input: Parameters<typeof w.hub.scheduler.submit>[1]) => Effect.flip(w.hub.scheduler.submit(w.buyer.did, input))

        const duplicate = yield* refusal({ mandate, steps: [flight, { ...hotel, name: "flight" }] })
        assert.deepStrictEqual([duplicate._tag, duplicate.code], ["SagaInvalid", "INVALID_REQUEST"])

        const stranger = yield* generateDid("stranger")
        const unknown = yield* refusal({ mandate, steps: [flight, { ...hotel, agentDid: stranger.did }] })
        assert.deepStrictEqual([unknown._tag, unknown.code], ["SagaAgentNotFound", "AGENT_NOT_FOUND"])

        const tooMuch = yield* refusal({ mandate, steps: [flight, { ...hotel, budgetUsd: 50.01 }] })
        assert.deepStrictEqual([tooMuch._tag, tooMuch.code], ["SagaBudgetRefused", "LIMIT_EXCEEDED"])

        // An intent that expired an hour ago, signed by the buyer as the issuing functions never would.
        const now = Math.floor(Date.parse("2020-01-01T00:00:00Z") / 1000)
        const expiredToken = yield* signRaw(
          headerFor(w.buyer.did),
          { iss: w.buyer.did, aud: w.runner.did, iat: now, nbf: now, exp: now + 60, jti: toBase64Url(new Uint8Array(16).fill(7)), kv: 1, kind: "intent", cns: { spendLimitUsd: 50 } },
          w.buyer.privateKey
        )
        const expired = yield* refusal({ mandate: expiredToken, steps: [flight] })
        assert.deepStrictEqual([expired._tag, expired.code], ["SagaMandateRefused", "MANDATE_INVALID"])
        assert.strictEqual(expired._tag === "SagaMandateRefused" ? expired.reason : "", "EXPIRED")

        const elsewhere = yield* issueIntentMandate({ grantorDid: w.buyer.did, granteeDid: w.agents.airline!.did, constraints: { spendLimitUsd: 50 }, privateKey: w.buyer.privateKey })
        const misdirected = yield* refusal({ mandate: elsewhere.token, steps: [flight] })
        assert.strictEqual(misdirected.code, "MANDATE_INVALID")

        assert.strictEqual(w.effects.size, 0)
        // The same saga, well formed, runs.
        assert.strictEqual((yield* w.hub.scheduler.run(w.buyer.did, { mandate, steps: [flight, hotel] })).status, "committed")
      })
    ))
})
