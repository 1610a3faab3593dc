/**
 * The Thompson learner: a Beta(α, β) belief per (model, task type) about how often the model succeeds, where a
 * **success** is an answer scoring at least the mandate's `quality_threshold` at a cost within the share the
 * allocator gave the call. Both halves matter: quality alone would teach the router to buy the strongest model,
 * cost alone the cheapest; together they reward the cheapest model that is good enough, which is the efficiency
 * the spec asks the bandit to learn. α = 1 + successes, β = 1 + failures (a uniform start).
 *
 * Counts of two origins are kept apart: the ones this learner observed (published to the hub) and priors fetched
 * from the hub (`setPriors`, never republished, so a mesh never counts its own observations twice). Priors are
 * scaled down to at most `PRIOR_WEIGHT` pseudo-observations per pair, keeping their ratio, so a mesh-wide history
 * informs a new agent without drowning what it then sees itself.
 *
 * Sampling is seeded from Effect's `Random` service: tests fix it (`Random.make(seed)`) and get the same choices
 * every run. Thompson sampling needs no secrecy, so the CSPRNG rule for keys and ids does not apply; one draw from
 * `Random` seeds a small local generator (SplitMix32, `seededUniform`) that the router keeps, so a choice over 20
 * models costs Gamma draws, not eighty effects.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"
import { TASK_TYPES, type TaskType } from "../core/Constraints.js"
import type { PersistenceError } from "../sql/SqlFailure.js"

/** Observed counts of one (model, task type): the wire form shared with the hub. */
export const LearnerStat = Schema.Struct({
  modelId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  taskType: Schema.Literal(...TASK_TYPES),
  successes: Schema.NonNegativeInt,
  failures: Schema.NonNegativeInt
})
/** Observed counts of one (model, task type). */
export type LearnerStat = typeof LearnerStat.Type

/** A set of counts, as read from the hub (counts only: no prompts, answers or callers). */
export const LearnerStats = Schema.Struct({
  stats: Schema.Array(LearnerStat).pipe(Schema.maxItems(10_000))
})
/** A set of counts. */
export type LearnerStats = typeof LearnerStats.Type

/**
 * Most trials (successes + failures) one publisher may publish for one (model, task type): the hub refuses more with
 * 400 `INVALID_REQUEST` (docs/security.md §2.2), so a count never nears the largest exact integer.
 */
export const MAX_ARM_TRIALS = 1_000_000

const armCount = Schema.NonNegativeInt.pipe(Schema.lessThanOrEqualTo(MAX_ARM_TRIALS))

/** The counts of one (model, task type) as a publisher sends them: `LearnerStat` with at most `MAX_ARM_TRIALS` trials. */
export const PublishedLearnerStat = Schema.Struct({ ...LearnerStat.fields, successes: armCount, failures: armCount }).pipe(
  Schema.filter((s) => s.successes + s.failures <= MAX_ARM_TRIALS || `successes + failures must be at most ${MAX_ARM_TRIALS}`)
)

/** A publish: what the hub accepts on `POST /v1/learner-stats` (docs/hub.md, "Learner statistics"). */
export const PublishedLearnerStats = Schema.Struct({
  stats: Schema.Array(PublishedLearnerStat).pipe(Schema.maxItems(10_000))
})

/**
 * Counts scaled to at most `cap` trials, keeping their ratio, in integers rounded to nearest (BigInt, so exact for
 * any safe counts): what a publisher sends under `MAX_ARM_TRIALS`; the hub scales each publisher's rows the same way.
 */
export const scaleCounts = (successes: number, failures: number, cap: number): { readonly successes: number; readonly failures: number } => {
  const total = BigInt(successes) + BigInt(failures)
  if (total <= BigInt(cap)) return { successes, failures }
  const scaled = Number((BigInt(successes) * BigInt(cap) + total / 2n) / total)
  return { successes: scaled, failures: cap - scaled }
}

/** Most pseudo-observations priors count for, per (model, task type). */
export const PRIOR_WEIGHT = 50

/** The operations of a learner. */
export interface ModelLearnerApi {
  /** One Thompson draw per model, in the order given: a sample of its Beta(α, β) for the task type, from `uniform`. */
  readonly sample: (modelIds: ReadonlyArray<string>, taskType: TaskType, uniform: () => number) => ReadonlyArray<number>
  /** Records one outcome of a model on a task type. */
  readonly record: (modelId: string, taskType: TaskType, success: boolean) => Effect.Effect<void, PersistenceError>
  /** The counts this learner observed itself (what it publishes). */
  readonly observed: Effect.Effect<ReadonlyArray<LearnerStat>>
  /** Replaces the priors with counts fetched from the hub. */
  readonly setPriors: (stats: ReadonlyArray<LearnerStat>) => Effect.Effect<void, PersistenceError>
  /** α and β of one pair, priors included. */
  readonly belief: (modelId: string, taskType: TaskType) => Effect.Effect<{ readonly alpha: number; readonly beta: number }>
}

/** The `ModelLearner` service. */
export class ModelLearner extends Context.Tag("agent-mesh/ModelLearner")<ModelLearner, ModelLearnerApi>() {}

/** Counts of one pair: own and prior (priors already scaled to `PRIOR_WEIGHT`). */
export interface Counts {
  successes: number
  failures: number
  priorSuccesses: number
  priorFailures: number
}

/** The map key of a pair. */
export const pairKey = (modelId: string, taskType: TaskType): string => `${taskType}\u0000${modelId}`

/** Priors scaled to at most `PRIOR_WEIGHT` pseudo-observations, keeping their ratio. */
export const scalePrior = (successes: number, failures: number): { readonly successes: number; readonly failures: number } => {
  const total = successes + failures
  if (total <= PRIOR_WEIGHT) return { successes, failures }
  return { successes: (successes * PRIOR_WEIGHT) / total, failures: (failures * PRIOR_WEIGHT) / total }
}

// ---------------------------------------------------------------------------------------------------------------
// Sampling

/** SplitMix32: a small, fast, seedable generator of uniforms in [0, 1). */
export const splitMix32 = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x9e3779b9) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    z = (z ^ (z >>> 16)) >>> 0
    return z / 4294967296
  }
}

/**
 * A uniform source for Thompson draws, seeded with one draw from Effect's `Random` (the calling fiber's, so a test's
 * `Random.make(seed)` fixes every later draw): SplitMix32, because a `Random` draw costs microseconds and one choice
 * over 20 models takes 80 uniforms or more.
 */
export const seededUniform: Effect.Effect<() => number> = Effect.map(Random.nextInt, splitMix32)

/** Standard normal draws from `uniform` (Box–Muller), the second of each pair kept for the next call. */
export const normals = (uniform: () => number): (() => number) => {
  let spare: number | undefined
  return () => {
    if (spare !== undefined) {
      const z = spare
      spare = undefined
      return z
    }
    const r = Math.sqrt(-2 * Math.log(1 - uniform()))
    const t = 2 * Math.PI * uniform()
    spare = r * Math.sin(t)
    return r * Math.cos(t)
  }
}

/** A Gamma(shape, 1) draw (Marsaglia and Tsang, 2000; shape < 1 boosted by U^(1/shape)). */
const gammaWith = (shape: number, uniform: () => number, normal: () => number): number => {
  if (shape < 1) return gammaWith(shape + 1, uniform, normal) * Math.pow(1 - uniform(), 1 / shape)
  const d = shape - 1 / 3
  const c = 1 / Math.sqrt(9 * d)
  for (;;) {
    let x: number
    let v: number
    do {
      x = normal()
      v = 1 + c * x
    } while (v <= 0)
    v = v * v * v
    const u = 1 - uniform()
    if (u < 1 - 0.0331 * x * x * x * x || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v
  }
}

/** A Beta(alpha, beta) draw, from two Gamma draws; pass `normal` to share one normal source over many draws. */
export const sampleBeta = (alpha: number, beta: number, uniform: () => number, normal: () => number = normals(uniform)): number => {
  const x = gammaWith(alpha, uniform, normal)
  const y = gammaWith(beta, uniform, normal)
  return x / (x + y)
}

// ---------------------------------------------------------------------------------------------------------------
// The in-memory learner (the SQL one in `ModelLearnerSql` keeps the same map and writes through)

/** Hooks a persistent learner adds to the in-memory one: each runs after the map changed. */
export interface LearnerPersistence {
  readonly recorded: (modelId: string, taskType: TaskType, counts: Counts) => Effect.Effect<void, PersistenceError>
  readonly priorsReplaced: (counts: ReadonlyMap<string, Counts>) => Effect.Effect<void, PersistenceError>
}

const none: LearnerPersistence = { recorded: () => Effect.void, priorsReplaced: () => Effect.void }

/** A learner over `initial` counts (keyed by `pairKey`), writing each change through `persistence`. */
export const fromCounts = (initial: Map<string, Counts> = new Map(), persistence: LearnerPersistence = none): ModelLearnerApi => {
  const counts = initial
  const parse = (key: string): readonly [TaskType, string] => {
    const at = key.indexOf("\u0000")
    return [key.slice(0, at) as TaskType, key.slice(at + 1)]
  }
  // The same Counts objects by task type, then model: sampling runs on every THOMPSON pick and builds no keys.
  const byTask = new Map<TaskType, Map<string, Counts>>()
  const index = (modelId: string, taskType: TaskType, c: Counts) => {
    let m = byTask.get(taskType)
    if (m === undefined) byTask.set(taskType, (m = new Map()))
    m.set(modelId, c)
  }
  for (const [key, c] of counts) {
    const [taskType, modelId] = parse(key)
    index(modelId, taskType, c)
  }
  const entry = (modelId: string, taskType: TaskType): Counts => {
    const key = pairKey(modelId, taskType)
    let c = counts.get(key)
    if (c === undefined) {
      c = { successes: 0, failures: 0, priorSuccesses: 0, priorFailures: 0 }
      counts.set(key, c)
      index(modelId, taskType, c)
    }
    return c
  }
  return {
    sample: (modelIds, taskType, uniform) => {
      const out: Array<number> = new Array(modelIds.length)
      const normal = normals(uniform)
      const known = byTask.get(taskType)
      for (let i = 0; i < modelIds.length; i++) {
        const c = known?.get(modelIds[i]!)
        out[i] = c === undefined
          ? uniform() // Beta(1, 1) is uniform.
          : sampleBeta(1 + c.successes + c.priorSuccesses, 1 + c.failures + c.priorFailures, uniform, normal)
      }
      return out
    },
    record: (modelId, taskType, success) =>
      Effect.suspend(() => {
        const c = entry(modelId, taskType)
        if (success) c.successes++
        else c.failures++
        return persistence.recorded(modelId, taskType, c)
      }),
    observed: Effect.sync(() => {
      const out: Array<LearnerStat> = []
      for (const [key, c] of counts) {
        if (c.successes + c.failures === 0) continue
        const [taskType, modelId] = parse(key)
        out.push({ modelId, taskType, successes: c.successes, failures: c.failures })
      }
      return out
    }),
    setPriors: (stats) =>
      Effect.suspend(() => {
        for (const c of counts.values()) {
          c.priorSuccesses = 0
          c.priorFailures = 0
        }
        for (const s of stats) {
          const c = entry(s.modelId, s.taskType)
          const scaled = scalePrior(s.successes, s.failures)
          c.priorSuccesses = scaled.successes
          c.priorFailures = scaled.failures
        }
        return persistence.priorsReplaced(counts)
      }),
    belief: (modelId, taskType) =>
      Effect.sync(() => {
        const c = counts.get(pairKey(modelId, taskType))
        return c === undefined
          ? { alpha: 1, beta: 1 }
          : { alpha: 1 + c.successes + c.priorSuccesses, beta: 1 + c.failures + c.priorFailures }
      })
  }
}

/** A learner in memory: what it learns is gone when the process ends. */
export const layerMemory: Layer.Layer<ModelLearner> = Layer.sync(ModelLearner, () => fromCounts())
