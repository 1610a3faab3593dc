/**
 * How good an answer is, as a score in 0..1 the router compares with the mandate's `quality_threshold` to decide
 * whether to escalate to the next tier. A service, so a deployment can plug in a judge model or a task-specific
 * check, and tests can script the scores.
 *
 * The default is a heuristic that needs no model call, so scoring never costs budget. It looks only at signs that
 * an answer failed, each documented in docs/models.md:
 * - an empty answer scores 0;
 * - an answer that reads as a refusal or an admission of not knowing ("I can't", "as an AI", "I'm not sure") 0.2;
 * - an answer cut off at the token limit (`finishReason` `length`) is halved;
 * - an answer much shorter than the task asks for is scaled down: CODE, REASONING, CREATIVE and SUMMARIZATION answers
 *   under 40 characters score 0.5, EXTRACTION and CLASSIFICATION answers are allowed to be one word;
 * - otherwise 0.9, never 1: the heuristic cannot tell right from wrong, only failed from not failed.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { TaskType } from "../core/Constraints.js"
import type { ChatMessage } from "../core/ModelProvider.js"

/** What the estimator sees: the conversation, the answer and its finish reason, the model and the task type. */
export interface QualityInput {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly answer: string
  readonly finishReason: string
  readonly modelId: string
  readonly taskType: TaskType
}

/** The operations of a quality estimator. */
export interface QualityEstimatorApi {
  /** A score in 0..1; values outside are clamped by the router. */
  readonly score: (input: QualityInput) => Effect.Effect<number>
}

/** The `QualityEstimator` service. */
export class QualityEstimator extends Context.Tag("agent-mesh/QualityEstimator")<QualityEstimator, QualityEstimatorApi>() {}

const REFUSAL = /\b(i can(?:no|')t|i am unable|i'm unable|as an ai|i (?:do not|don't) know|i'm not sure|i am not sure)\b/i
const SHORT_ANSWER_TASKS: ReadonlySet<TaskType> = new Set(["CODE", "REASONING", "CREATIVE", "SUMMARIZATION"])
const SHORT = 40

/** The default heuristic (see the module header). */
export const heuristicScore = (input: QualityInput): number => {
  const text = input.answer.trim()
  if (text.length === 0) return 0
  let score = REFUSAL.test(text.slice(0, 200)) ? 0.2 : 0.9
  if (SHORT_ANSWER_TASKS.has(input.taskType) && text.length < SHORT) score = Math.min(score, 0.5)
  if (input.finishReason === "length") score /= 2
  return score
}

/** The heuristic estimator. */
export const heuristic: QualityEstimatorApi = { score: (input) => Effect.succeed(heuristicScore(input)) }

/** The default layer: the heuristic. */
export const layerHeuristic: Layer.Layer<QualityEstimator> = Layer.succeed(QualityEstimator, heuristic)

/** Scores for tests: a list taken in call order (the last one repeats), or a function of the input. */
export const scripted = (scores: ReadonlyArray<number> | ((input: QualityInput) => number)): QualityEstimatorApi => {
  let index = 0
  return {
    score: (input) =>
      Effect.sync(() => {
        if (typeof scores === "function") return scores(input)
        const s = scores[Math.min(index, scores.length - 1)] ?? 0
        index++
        return s
      })
  }
}

/** A layer of `scripted(scores)`. */
export const layerScripted = (scores: ReadonlyArray<number> | ((input: QualityInput) => number)): Layer.Layer<QualityEstimator> =>
  Layer.sync(QualityEstimator, () => scripted(scores))
