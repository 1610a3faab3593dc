/**
 * A hub that also runs sagas: the hub's services, the saga scheduler on the same database (its workflow journal in
 * @effect/cluster's tables beside the hub's), and the hub's contract with the saga endpoints, served on the lean
 * path. `mesh hub` starts this when it is given a saga runner identity; `Hub.start` stays the hub without sagas,
 * which imports no workflow engine.
 *
 * Sagas left running by a previous process on the same database resume when this starts: the engine finds their
 * journals and runs them on.
 *
 * Floor: saga (docs/architecture.md §3).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as AgentClient from "../agent/AgentClient.js"
import type { Keys } from "../core/Keys.js"
import * as Hub from "../hub/Hub.js"
import * as Serve from "../http/Serve.js"
import * as Database from "../sql/Database.js"
import { SagaHubApi } from "./SagaApi.js"
import { SagaHubHandlers } from "./SagaHttp.js"
import * as SagaScheduler from "./SagaScheduler.js"
import * as SagaRunnerRecord from "./SagaRunnerRecord.js"
import * as Option from "effect/Option"
import * as OutboundAddress from "../hub/OutboundAddress.js"

/** How to run a hub with sagas. */
export interface SagaHubOptions extends Hub.HubOptions, SagaScheduler.SchedulerOptions {
  /** Use the in-memory workflow engine (not durable; tests). Default false. */
  readonly memoryEngine?: boolean
}

/** A running hub with sagas. */
export interface RunningSagaHub extends Hub.RunningHub {
  /** The scheduler, for callers in the same process. */
  readonly scheduler: SagaScheduler.SagaSchedulerApi
  /** What starting did to the runner's registry record; undefined when it could not be registered. */
  readonly runnerRecord: SagaRunnerRecord.RunnerRecordAction | undefined
}

/** The hub's services with the scheduler over them; needs `Keys`. */
export const layerServices = (options: SagaHubOptions) => layerServicesOn(options, Database.layer(options.database))

/**
 * `layerServices` over a database the caller holds (migrated): sagas, journals, registry and ledger outlive a stop
 * and start of the hub over it, as a simulation's crash and restart needs. `database` only says the dialect.
 */
export const layerServicesOn = <E = never>(
  options: Omit<SagaHubOptions, "database"> & { readonly database?: string },
  db: Layer.Layer<SqlClient.SqlClient, E>
) => {
  const services = Layer.merge(Hub.layerServicesOn(options, db), db)
  const scheduler = (options.memoryEngine === true ? SagaScheduler.layerTest : SagaScheduler.layer)(options).pipe(
    // Step agents are reached at the URLs their keys registered: only public addresses unless the operator allows any.
    // Never an HttpClient found in the caller's context, which would bypass that rule.
    Layer.provide(Layer.mergeAll(
      SagaScheduler.layerAgentsFromRegistry,
      AgentClient.layer().pipe(Layer.provide(OutboundAddress.layerHttpClient(options.outboundUrls ?? "public")))
    )),
    Layer.provideMerge(services)
  )
  return scheduler
}

/**
 * Starts a hub with sagas; it stops when the scope closes. The runner's DID and key are registered (or its key
 * refreshed) in the hub's registry first, so step agents resolve the runner's payment mandates; when that fails the
 * hub still starts, says why, and refuses sagas until the runner's key resolves.
 */
export const start = (options: SagaHubOptions): Effect.Effect<RunningSagaHub, Database.DatabaseError | Serve.ServeError, Scope.Scope | Keys> =>
  Effect.gen(function* () {
    const services = yield* Layer.build(layerServices(options))
    const hub = yield* Hub.serve(SagaHubApi, SagaHubHandlers, services, options)
    const runnerRecord = yield* SagaRunnerRecord.ensureRegistered(options.runner, options.publicUrl ?? hub.url).pipe(
      Effect.provide(services),
      Effect.tapError((e) => Effect.logWarning(`the saga runner ${options.runner.did} could not be registered in this hub's registry (${e.code}: ${e.message}); sagas are refused until its key resolves`)),
      Effect.option
    )
    return { ...hub, scheduler: Context.get(services, SagaScheduler.SagaScheduler), runnerRecord: Option.getOrUndefined(runnerRecord) }
  })
