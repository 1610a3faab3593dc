import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import { costMicros, decode, defaultCatalogue, defaultConfig } from "../src/model/ModelCatalogue.js"

const model = { id: "m", provider: "p", tier: 1, inputUsdPerMTok: 0.15, outputUsdPerMTok: 0.6, contextWindow: 4096 }

describe("ModelCatalogue", () => {
  it("reads USD per million tokens exactly as integer micro-USD", () => {
    const small = defaultCatalogue.byId.get("gpt-4o-mini")!
    assert.strictEqual(small.inputMicrosPerMTok, 150_000)
    assert.strictEqual(small.outputMicrosPerMTok, 600_000)
    assert.strictEqual(small.maxOutputTokens, 1024)
  })

  it("sorts models by tier, then price", () => {
    const tiers = defaultCatalogue.models.map((m) => m.tier)
    assert.deepStrictEqual(tiers, [...tiers].sort((a, b) => a - b))
    assert.strictEqual(defaultCatalogue.models.length, defaultConfig.models.length)
  })

  it("refuses a duplicate id", () => {
    assert.isTrue(Either.isLeft(decode({ models: [model, model] })))
  })

  it("refuses a price with more than six decimals, a negative price and tier 0", () => {
    assert.isTrue(Either.isLeft(decode({ models: [{ ...model, inputUsdPerMTok: 0.0000001 }] })))
    assert.isTrue(Either.isLeft(decode({ models: [{ ...model, outputUsdPerMTok: -1 }] })))
    assert.isTrue(Either.isLeft(decode({ models: [{ ...model, tier: 0 }] })))
    assert.isTrue(Either.isLeft(decode({ models: [] })))
  })

  it("rounds the cost of a call up, never down", () => {
    const m = Either.getOrThrow(decode({ models: [model] })).models[0]!
    assert.strictEqual(costMicros(m, 1, 0), 1)
    assert.strictEqual(costMicros(m, 1_000_000, 1_000_000), 750_000)
    assert.strictEqual(costMicros(m, 0, 0), 0)
  })
})
