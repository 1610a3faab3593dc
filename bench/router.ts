/**
 * Model routing, on a seeded simulated workload that ships here: four models of increasing price whose chance of a
 * good answer depends on the task type, and 1 200 requests over the six task types. Every strategy faces the same
 * realised answers (a good or bad answer per request per model, drawn once), so costs compare like for like.
 *
 * - always-strongest: every request to the top model, no routing — the baseline;
 * - THOMPSON, PROPORTIONAL, IMPORTANCE_WEIGHTED: a `ModelSession` under one mandate (cost budget 1.5× what
 *   always-strongest spends), the quality estimator reading the simulated answer (0.9 good, 0.3 bad, threshold 0.7);
 * - oracle: knows the true per-task qualities and starts each request where the expected cost of a good answer
 *   (escalating on a miss, as the router does) is lowest; THOMPSON's regret is its cost above the oracle's.
 *
 * Then the router's overhead: `chat` through a session with an in-process provider against calling that provider
 * directly (target: ≤ 50 µs added), and one THOMPSON choice over 20 models (target: ≤ 10 µs).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Random from "effect/Random"
import { TASK_TYPES, type TaskType } from "../src/core/Constraints.js"
import { Keys } from "../src/core/Keys.js"
import { issueModelBudgetMandate } from "../src/core/Mandate.js"
import { type ChatRequest, makeScripted } from "../src/core/ModelProvider.js"
import { costMicros, fromSpecs, type ModelSpec } from "../src/model/ModelCatalogue.js"
import * as ModelLearner from "../src/model/ModelLearner.js"
import * as ModelRouter from "../src/model/ModelRouter.js"
import * as ModelSession from "../src/model/ModelSession.js"
import * as QualityEstimator from "../src/model/QualityEstimator.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { measureInterleaved, report } from "./harness.js"

const SEED = 20261126
const REQUESTS = 1200
const THRESHOLD = 0.7

/** Price per million tokens (input, output) and the chance of a good answer per task type. */
const MODELS: ReadonlyArray<{ readonly spec: ModelSpec; readonly quality: Readonly<Record<TaskType, number>> }> = [
  { spec: spec("nano", 1, 0.1, 0.4), quality: { CLASSIFICATION: 0.92, EXTRACTION: 0.88, SUMMARIZATION: 0.6, CREATIVE: 0.45, CODE: 0.25, REASONING: 0.2 } },
  { spec: spec("mini", 2, 0.4, 1.6), quality: { CLASSIFICATION: 0.95, EXTRACTION: 0.93, SUMMARIZATION: 0.85, CREATIVE: 0.7, CODE: 0.6, REASONING: 0.5 } },
  { spec: spec("standard", 3, 2, 8), quality: { CLASSIFICATION: 0.97, EXTRACTION: 0.96, SUMMARIZATION: 0.93, CREATIVE: 0.9, CODE: 0.85, REASONING: 0.8 } },
  { spec: spec("frontier", 4, 10, 40), quality: { CLASSIFICATION: 0.98, EXTRACTION: 0.98, SUMMARIZATION: 0.97, CREATIVE: 0.96, CODE: 0.96, REASONING: 0.95 } }
]

function spec(id: string, tier: number, inUsd: number, outUsd: number): ModelSpec {
  return { id, provider: "sim", tier, inputMicrosPerMTok: inUsd * 1e6, outputMicrosPerMTok: outUsd * 1e6, contextWindow: 128_000, maxOutputTokens: 1024 }
}

const catalogue = fromSpecs(MODELS.map((m) => m.spec))
const top = catalogue.models[catalogue.models.length - 1]!

/** One simulated request: its task, prompt, answer length, importance and whether each model answers it well. */
interface Request {
  readonly taskType: TaskType
  readonly prompt: string
  readonly inputTokens: number
  readonly outputTokens: number
  readonly weight: number
  readonly good: Readonly<Record<string, boolean>>
}

const workload = (): ReadonlyArray<Request> => {
  const uniform = ModelLearner.splitMix32(SEED)
  return Array.from({ length: REQUESTS }, (_, i) => {
    const taskType = TASK_TYPES[Math.floor(uniform() * TASK_TYPES.length)]!
    const words = 20 + Math.floor(uniform() * 400)
    const good: Record<string, boolean> = {}
    for (const m of MODELS) good[m.spec.id] = uniform() < m.quality[taskType]
    return {
      taskType,
      prompt: `request ${i}: ${"word ".repeat(words)}`,
      inputTokens: Math.ceil(words * 1.3),
      outputTokens: 50 + Math.floor(uniform() * 500),
      weight: 1 + Math.floor(uniform() * 3),
      good
    }
  })
}

const requestIndex = (r: ChatRequest): number => Number(/^request (\d+):/.exec(r.messages[r.messages.length - 1]!.content)![1])

/** The simulated provider: answers GOOD or BAD as drawn for (request, model), with the request's usage. */
const simProvider = (requests: ReadonlyArray<Request>) =>
  makeScripted((r) => {
    const q = requests[requestIndex(r)]!
    return { text: q.good[r.model] ? "GOOD answer" : "BAD answer", inputTokens: q.inputTokens, outputTokens: Math.min(q.outputTokens, r.maxTokens ?? q.outputTokens) }
  }, { name: "sim" })

const simQuality = QualityEstimator.scripted((input) => (input.answer.startsWith("GOOD") ? 0.9 : 0.3))

interface Outcome {
  readonly name: string
  readonly micros: number
  readonly attained: number
  readonly calls: number
}

const cost = (m: ModelSpec, q: Request) => costMicros(m, q.inputTokens, q.outputTokens)

/** Every request to the top model. */
const alwaysStrongest = (requests: ReadonlyArray<Request>): Outcome => {
  let micros = 0
  let attained = 0
  for (const q of requests) {
    micros += cost(top, q)
    if (q.good[top.id]) attained++
  }
  return { name: "always strongest", micros, attained, calls: requests.length }
}

/** Starts where the expected cost of a good answer is lowest under the true qualities, then escalates on a miss. */
const oracle = (requests: ReadonlyArray<Request>): Outcome => {
  let micros = 0
  let attained = 0
  let calls = 0
  const models = catalogue.models
  for (const q of requests) {
    const p = (m: ModelSpec) => MODELS.find((x) => x.spec.id === m.id)!.quality[q.taskType]
    const expected: Array<number> = new Array(models.length)
    for (let i = models.length - 1; i >= 0; i--) {
      expected[i] = cost(models[i]!, q) + (i === models.length - 1 ? 0 : (1 - p(models[i]!)) * expected[i + 1]!)
    }
    let start = 0
    for (let i = 1; i < models.length; i++) if (expected[i]! < expected[start]!) start = i
    for (let i = start; i < models.length; i++) {
      micros += cost(models[i]!, q)
      calls++
      if (q.good[models[i]!.id]) {
        attained++
        break
      }
    }
  }
  return { name: "oracle (true qualities)", micros, attained, calls }
}

/** A session under `mode` with a cost budget of `budgetMicros`, every request in order (in steps for IMPORTANCE_WEIGHTED). */
const viaSession = (requests: ReadonlyArray<Request>, mode: ModelRouter.AllocatorMode, budgetMicros: number) =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const alice = yield* keys.importPrivateKey(new Uint8Array(32).fill(1))
    const bob = yield* keys.importPrivateKey(new Uint8Array(32).fill(2))
    const mandate = yield* issueModelBudgetMandate({
      grantorDid: "did:mesh:alice",
      granteeDid: "did:mesh:bob",
      privateKey: alice,
      constraints: { token_budget: 1_000_000_000, cost_budget_usd: budgetMicros / 1e6, quality_threshold: THRESHOLD, task_type: "REASONING", expected_steps: requests.length }
    })
    let attained = 0
    let exhausted = 0
    // A mandate names one task type, so the workload is served by one session per task type, all on one learner,
    // each with its task type's part of the budget.
    const byType = new Map<TaskType, Array<Request>>()
    for (const q of requests) byType.set(q.taskType, [...(byType.get(q.taskType) ?? []), q])
    let micros = 0
    let calls = 0
    for (const [taskType, qs] of byType) {
      const share = Math.floor((budgetMicros * qs.length) / requests.length)
      const typed = yield* issueModelBudgetMandate({
        grantorDid: "did:mesh:alice",
        granteeDid: "did:mesh:bob",
        privateKey: alice,
        constraints: { ...mandate.constraints, cost_budget_usd: share / 1e6, task_type: taskType, expected_steps: qs.length }
      })
      const session = yield* ModelSession.make({ mandate: typed, privateKey: bob, allocatorMode: mode })
      const typeWeight = qs.reduce((n, q) => n + q.weight, 0)
      for (const q of qs) {
        const call = mode === "IMPORTANCE_WEIGHTED"
          ? Effect.scoped(Effect.flatMap(session.step("request", q.weight, typeWeight), (s) => session.chat(q.prompt, s.mandate)))
          : session.chat(q.prompt)
        const reply = yield* Effect.either(call)
        if (reply._tag === "Left") {
          exhausted++
          continue
        }
        if (reply.right.quality >= THRESHOLD) attained++
      }
      const s = yield* session.summary
      micros += Math.round(s.totalCostUsd * 1e6)
      calls += s.nCalls
    }
    return { name: mode, micros, attained, calls, exhausted }
  })

const usd = (micros: number) => `$${(micros / 1e6).toFixed(4)}`

/** Measures and reports the router suite. */
export const run = async (): Promise<void> => {
  const requests = workload()
  const provider = simProvider(requests)
  const routerLayer = (seed: number) =>
    Layer.provideMerge(
      Layer.effect(ModelRouter.ModelRouter, Effect.map(ModelLearner.ModelLearner, (learner) =>
        ModelRouter.fromParts({ catalogue, providers: ModelRouter.providers({ sim: provider }), quality: simQuality, learner, random: Random.make(seed) }))),
      ModelLearner.layerMemory
    )
  const strongest = alwaysStrongest(requests)
  const best = oracle(requests)
  const budget = Math.round(strongest.micros * 1.5)
  const results: Array<Outcome & { readonly exhausted?: number }> = [strongest, best]
  for (const mode of ["THOMPSON", "PROPORTIONAL", "IMPORTANCE_WEIGHTED"] as const) {
    const runtime = ManagedRuntime.make(Layer.merge(routerLayer(SEED), KeysNative.layer))
    try {
      results.push(await runtime.runPromise(viaSession(requests, mode, budget)))
    } finally {
      await runtime.dispose()
    }
  }

  console.log(`\n## router: routing quality (${REQUESTS} requests, seed ${SEED}, threshold ${THRESHOLD}, 4 models)`)
  console.log(`${"strategy".padEnd(26)} ${"total cost".padStart(11)} ${"vs strongest".padStart(13)} ${"attained".padStart(9)} ${"vs strongest".padStart(13)} ${"calls".padStart(6)}`)
  for (const r of results) {
    const cheaper = strongest.micros / r.micros
    console.log(
      `${r.name.padEnd(26)} ${usd(r.micros).padStart(11)} ${`${cheaper.toFixed(2)}× cheaper`.padStart(13)} ${`${((100 * r.attained) / REQUESTS).toFixed(1)}%`.padStart(9)} ${`${((100 * r.attained) / strongest.attained).toFixed(1)}%`.padStart(13)} ${String(r.calls).padStart(6)}${r.exhausted ? `  (${r.exhausted} refused: BUDGET_EXHAUSTED)` : ""}`
    )
  }
  const thompson = results.find((r) => r.name === "THOMPSON")!
  const ratio = strongest.micros / thompson.micros
  const attainment = thompson.attained / strongest.attained
  console.log(
    `THOMPSON: ${ratio.toFixed(2)}× cheaper than always-strongest at ${(100 * attainment).toFixed(1)}% of its threshold attainment ` +
      `(target ≥ 2× at ≥ 95%: ${ratio >= 2 && attainment >= 0.95 ? "met" : "MISSED"}); regret vs oracle ${usd(thompson.micros - best.micros)} ` +
      `(${((100 * (thompson.micros - best.micros)) / best.micros).toFixed(1)}% above its cost)`
  )

  // Overhead: chat through a session (router, budget, estimator, learner) vs the provider called directly.
  const echo = makeScripted(["GOOD answer"])
  const runtime = ManagedRuntime.make(Layer.merge(
    Layer.provideMerge(
      Layer.effect(ModelRouter.ModelRouter, Effect.map(ModelLearner.ModelLearner, (learner) =>
        ModelRouter.fromParts({ catalogue, providers: ModelRouter.providers({ sim: echo }), quality: simQuality, learner, random: Random.make(1) }))),
      ModelLearner.layerMemory
    ),
    KeysNative.layer
  ))
  try {
    const session = await runtime.runPromise(Effect.gen(function* () {
      const keys = yield* Keys
      const alice = yield* keys.importPrivateKey(new Uint8Array(32).fill(1))
      const mandate = yield* issueModelBudgetMandate({
        grantorDid: "did:mesh:alice",
        granteeDid: "did:mesh:bob",
        privateKey: alice,
        constraints: { token_budget: Number.MAX_SAFE_INTEGER, cost_budget_usd: 999_999_999, quality_threshold: THRESHOLD, task_type: "CLASSIFICATION", expected_steps: 1000 }
      })
      return yield* ModelSession.make({ mandate, allocatorMode: "PROPORTIONAL" })
    }))
    const chat = session.chat("classify: the sky is blue")
    const direct = echo.chat({ model: "frontier", messages: [{ role: "user", content: "classify: the sky is blue" }], maxTokens: 1024 })
    ;(echo.requests as Array<unknown>).length = 0
    const many = Array.from({ length: 20 }, (_, i) => spec(`m${i}`, 1 + (i % 4), 0.1 * (i + 1), 0.4 * (i + 1)))
    // A learner that has seen 30 outcomes of every model, so each draw is a real Beta draw (Beta(1, 1) is a uniform).
    const learner20 = ModelLearner.fromCounts()
    for (const m of many) for (let k = 0; k < 30; k++) Effect.runSync(learner20.record(m.id, "CODE", k % 3 !== 0))
    const router20 = ModelRouter.fromParts({
      catalogue: fromSpecs(many),
      providers: ModelRouter.providers({}),
      quality: simQuality,
      learner: learner20,
      random: Random.make(1)
    })
    const choice = (mode: ModelRouter.AllocatorMode) =>
      router20.choose({ messages: [{ role: "user", content: "a question" }], taskType: "CODE", qualityThreshold: THRESHOLD, share: { tokens: 100_000, micros: 1_000_000 }, mode })
    const thompsonChoice = choice("THOMPSON")
    const proportionalChoice = choice("PROPORTIONAL")
    const [viaRouter, directCall, thompson20, proportional20] = measureInterleaved([
      { name: "chat via ModelSession + router", op: () => { runtime.runSync(chat); (echo.requests as Array<unknown>).length = 0 } },
      { name: "provider.chat directly", op: () => { Effect.runSync(direct); (echo.requests as Array<unknown>).length = 0 } },
      { name: "THOMPSON choice over 20 models", op: () => Effect.runSync(thompsonChoice) },
      { name: "PROPORTIONAL choice over 20 models", op: () => Effect.runSync(proportionalChoice) }
    ])
    report("router", [
      { figure: viaRouter!, baseline: directCall! },
      { figure: thompson20!, baseline: proportional20! }
    ])
    const addedUs = 1e6 / viaRouter!.opsPerSecond - 1e6 / directCall!.opsPerSecond
    const choiceUs = 1e6 / thompson20!.opsPerSecond
    console.log(`router overhead per chat: ${addedUs.toFixed(1)} µs added (target ≤ 50 µs: ${addedUs <= 50 ? "met" : "MISSED"})`)
    console.log(`one THOMPSON choice over 20 models: ${choiceUs.toFixed(2)} µs (target ≤ 10 µs: ${choiceUs <= 10 ? "met" : "MISSED"})`)
    const dir = path.join(process.cwd(), "bench", "results")
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(
      path.join(dir, "router-routing.json"),
      JSON.stringify({ suite: "router-routing", seed: SEED, requests: REQUESTS, threshold: THRESHOLD, results, thompsonCostRatio: ratio, thompsonAttainment: attainment, addedUs, choiceUs }, null, 2)
    )
  } finally {
    await runtime.dispose()
  }
}
