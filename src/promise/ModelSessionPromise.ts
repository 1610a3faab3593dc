/**
 * The Promise facade of model sessions, the spec's `ModelSession.create(provider, mandate, allocator_mode,
 * learner_path, registry_url, registry_api_key)`: one call builds the router (catalogue, providers, quality
 * estimator, a learner in memory or in SQLite at `learnerPath`) on a runtime of its own and opens the session;
 * `close()` closes the session and releases that runtime (and the learner's database).
 *
 * A step is async-disposable (`await using step = await session.step(…)`) or scoped to a callback
 * (`session.withStep(name, w, total, async (step) => …)`); either way its unused budget returns when it ends.
 * Failures reject with the typed error itself (`err.code`).
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Scope from "effect/Scope"
import type { Mandate } from "../core/Mandate.js"
import type { ChatMessage, ModelProviderApi } from "../core/ModelProvider.js"
import * as ModelCatalogue from "../model/ModelCatalogue.js"
import * as ModelLearner from "../model/ModelLearner.js"
import * as ModelLearnerSql from "../model/ModelLearnerSql.js"
import * as ModelRouter from "../model/ModelRouter.js"
import * as ModelSession from "../model/ModelSession.js"
import * as QualityEstimator from "../model/QualityEstimator.js"
import * as KeysNative from "../node/KeysNative.js"
import { runOn, runPromise } from "../node/internal/promiseRuntime.js"
import * as Database from "../sql/Database.js"

/** What `create` takes: the session's options and what the router is built from. */
export interface CreateOptions extends ModelSession.SessionOptions {
  /** One provider serving every model of the catalogue. */
  readonly provider?: ModelProviderApi
  /** Providers by the provider names of the catalogue (wins over `provider` for the names it has). */
  readonly providers?: Readonly<Record<string, ModelProviderApi>>
  /** A catalogue, or its config (`ModelCatalogue.CatalogueConfig`); default `ModelCatalogue.defaultConfig`. */
  readonly catalogue?: ModelCatalogue.ModelCatalogue | { readonly models: ReadonlyArray<typeof ModelCatalogue.ModelSpecConfig.Encoded> }
  /** A quality score in 0..1 of an answer; default the heuristic of `QualityEstimator`. */
  readonly qualityEstimator?: (input: QualityEstimator.QualityInput) => number | Promise<number>
  /** A SQLite file the Thompson learner is kept in; default: in memory. */
  readonly learnerPath?: string
}

/** An open step: its mandate to pass to `chat` (or hand on); `close()` or disposing it returns its unused budget. */
export interface StepHandle extends ModelSession.Step {
  readonly close: () => Promise<void>
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

/** A session whose operations return Promises. */
export interface ModelSessionPromise {
  readonly mandate: Mandate<"model-budget">
  readonly allocatorMode: ModelRouter.AllocatorMode
  readonly warmFromRegistry: () => Promise<number>
  readonly publishToRegistry: () => Promise<{ readonly accepted: number }>
  readonly chat: (prompt: string | ReadonlyArray<ChatMessage>, stepMandate?: Mandate | string) => Promise<ModelSession.ChatReply>
  readonly step: (name: string, importanceWeight?: number, totalWeight?: number, options?: { readonly granteeDid?: string }) => Promise<StepHandle>
  /** Runs `body` with an open step, closing it when `body` settles. */
  readonly withStep: <A>(name: string, importanceWeight: number | undefined, totalWeight: number | undefined, body: (step: StepHandle) => Promise<A>) => Promise<A>
  readonly summary: () => Promise<ModelSession.Summary>
  /** Closes the session and releases its runtime; later calls reject. */
  readonly close: () => Promise<void>
}

const catalogueOf = (c: CreateOptions["catalogue"]): ModelCatalogue.ModelCatalogue => {
  if (c === undefined) return ModelCatalogue.defaultCatalogue
  if ("byId" in c) return c
  return Either.getOrThrowWith(ModelCatalogue.decode(c), (e) => new TypeError(`catalogue: ${e.message}`))
}

/** Opens a model session (see the module header). */
export const create = async (options: CreateOptions): Promise<ModelSessionPromise> => {
  const catalogue = catalogueOf(options.catalogue)
  const names = [...new Set(catalogue.models.map((m) => m.provider))]
  const byName: Record<string, ModelProviderApi> = {}
  for (const n of names) {
    const p = options.providers?.[n] ?? options.provider
    if (p === undefined) throw new TypeError(`no provider for ${JSON.stringify(n)}: give provider or providers.${n}`)
    byName[n] = p
  }
  const estimate = options.qualityEstimator
  const quality = estimate === undefined
    ? QualityEstimator.layerHeuristic
    : Layer.succeed(QualityEstimator.QualityEstimator, { score: (input) => Effect.promise(async () => estimate(input)) })
  const learner = options.learnerPath === undefined
    ? ModelLearner.layerMemory
    : ModelLearnerSql.layer.pipe(Layer.provide(Database.layerSqlite(options.learnerPath)), Layer.orDie)
  const router = ModelRouter.layer(catalogue).pipe(
    Layer.provideMerge(Layer.mergeAll(ModelRouter.layerProviders(byName), quality, learner))
  )
  const runtime = ManagedRuntime.make(Layer.mergeAll(router, KeysNative.layer, FetchHttpClient.layer))
  const run = runOn(runtime)
  let session: ModelSession.ModelSession
  try {
    session = await run(ModelSession.make(options))
  } catch (e) {
    await runtime.dispose()
    throw e
  }

  let closed = false
  // After close the runtime is gone; refuse with the session's own error rather than the runtime's.
  const open = <A>(f: () => Promise<A>): Promise<A> =>
    closed ? Promise.reject(new ModelSession.ModelSessionError({ code: "SESSION_CLOSED", message: "the session is closed" })) : f()

  const step = async (name: string, w?: number, total?: number, o: { readonly granteeDid?: string } = {}): Promise<StepHandle> => {
    const scope = Effect.runSync(Scope.make())
    try {
      const s = await run(Scope.extend(session.step(name, w, total, o), scope))
      const close = () => runPromise(Scope.close(scope, Exit.void))
      return { ...s, close, [Symbol.asyncDispose]: close }
    } catch (e) {
      await runPromise(Scope.close(scope, Exit.void))
      throw e
    }
  }

  return {
    mandate: session.mandate,
    allocatorMode: session.allocatorMode,
    warmFromRegistry: () => open(() => run(session.warmFromRegistry)),
    publishToRegistry: () => open(() => run(session.publishToRegistry)),
    chat: (prompt, stepMandate) => open(() => run(session.chat(prompt, stepMandate))),
    step: (name, w, total, o) => open(() => step(name, w, total, o)),
    withStep: async (name, w, total, body) => {
      const s = await open(() => step(name, w, total))
      try {
        return await body(s)
      } finally {
        await s.close()
      }
    },
    summary: () => open(() => run(session.summary)),
    close: async () => {
      if (closed) return
      closed = true
      await run(session.close)
      await runtime.dispose()
    }
  }
}
