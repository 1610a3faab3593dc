import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Database from "../src/sql/Database.js"
import { fromCounts, ModelLearner, PRIOR_WEIGHT, sampleBeta, seededUniform, splitMix32 } from "../src/model/ModelLearner.js"
import * as ModelLearnerSql from "../src/model/ModelLearnerSql.js"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-learner-")), "learner.db")

const sqlLearner = (file: string) => ModelLearnerSql.layer.pipe(Layer.provide(Database.layerSqlite(file)))

describe("ModelLearner", () => {
  it("Beta draws centre on α / (α + β)", () => {
    const uniform = splitMix32(42)
    let sum = 0
    for (let i = 0; i < 4000; i++) sum += sampleBeta(8, 2, uniform)
    assert.approximately(sum / 4000, 0.8, 0.02)
  })

  it("Beta draws stay in 0..1 for shapes below 1", () => {
    const uniform = splitMix32(7)
    for (let i = 0; i < 1000; i++) {
      const x = sampleBeta(0.5, 0.3, uniform)
      assert.isTrue(x >= 0 && x <= 1)
    }
  })

  it.effect("the same Random seed gives the same draws", () =>
    Effect.gen(function* () {
      const learner = fromCounts()
      yield* learner.record("m", "CODE", true)
      const a = learner.sample(["m", "n"], "CODE", yield* Effect.withRandom(seededUniform, Random.make(9)))
      const b = learner.sample(["m", "n"], "CODE", yield* Effect.withRandom(seededUniform, Random.make(9)))
      assert.deepStrictEqual(a, b)
    }))

  it.effect("priors are scaled to PRIOR_WEIGHT pseudo-observations and not reported as observed", () =>
    Effect.gen(function* () {
      const learner = fromCounts()
      yield* learner.record("m", "CODE", true)
      yield* learner.setPriors([{ modelId: "m", taskType: "CODE", successes: 900, failures: 100 }])
      const belief = yield* learner.belief("m", "CODE")
      assert.approximately(belief.alpha, 1 + 1 + PRIOR_WEIGHT * 0.9, 1e-9)
      assert.approximately(belief.beta, 1 + PRIOR_WEIGHT * 0.1, 1e-9)
      assert.deepStrictEqual(yield* learner.observed, [{ modelId: "m", taskType: "CODE", successes: 1, failures: 0 }])
    }))

  it.effect("the SQL learner keeps its counts and priors across a restart", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.gen(function* () {
        const learner = yield* ModelLearner
        yield* learner.record("small", "EXTRACTION", true)
        yield* learner.record("small", "EXTRACTION", true)
        yield* learner.record("small", "EXTRACTION", false)
        yield* learner.setPriors([{ modelId: "large", taskType: "EXTRACTION", successes: 3, failures: 1 }])
      }).pipe(Effect.provide(sqlLearner(file)))
      const after = yield* Effect.gen(function* () {
        const learner = yield* ModelLearner
        return [yield* learner.belief("small", "EXTRACTION"), yield* learner.belief("large", "EXTRACTION"), yield* learner.observed] as const
      }).pipe(Effect.provide(sqlLearner(file)))
      assert.deepStrictEqual(after[0], { alpha: 3, beta: 2 })
      assert.deepStrictEqual(after[1], { alpha: 4, beta: 2 })
      assert.deepStrictEqual(after[2], [{ modelId: "small", taskType: "EXTRACTION", successes: 2, failures: 1 }])
    }))
})
