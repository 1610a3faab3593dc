/**
 * Agent servers: an async handler (or a model provider and a model) served as `/v1/run`, with streaming over SSE,
 * conversation memory, three auth modes, human gates under task mandates, `/health` and a signed discovery
 * document. docs/agent.md is the reference; `AgentServer.make` is the Effect API, `serve` (in `AgentPromise`) the
 * Promise one, `mesh agent <module>` the command.
 *
 * This module only assembles: the options are checked, then turned into layers — the stores (paused tasks, nonces
 * and persistent memory share one SQLite file), the identity, and the parts (`Auth`, `Execution`, `Gates`,
 * `RunStreams`, `Discovery`, composed in `AgentServices.layerParts`) — and the handlers of `AgentHttp` served over
 * them on node:http. Each part holds one concern and its own rule; this file holds none. `AgentWeb` serves the
 * same parts as a fetch handler.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { AgentApi } from "./AgentApi.js"
import { AgentConfigError } from "./AgentError.js"
import * as FileLock from "../node/FileLock.js"
import { type Did, didHash, normalizeDid } from "../core/Did.js"
import * as AgentHttp from "./AgentHttp.js"
import * as A2aHttp from "./A2aHttp.js"
import { challengeOf } from "./Auth.js"
import * as A2aTasks from "./A2aTasks.js"
import { type AgentServerOptions, checkOptions, layerParts, layerResolver, type Services } from "./AgentServices.js"
import * as Identity from "./Identity.js"
import * as RunStreams from "./RunStreams.js"
import * as AgentMemory from "../core/AgentMemory.js"
import * as AgentMemorySql from "../sql/AgentMemorySql.js"
import type { IdempotencyStore } from "../core/IdempotencyStore.js"
import * as IdempotencyStoreSql from "../sql/IdempotencyStoreSql.js"
import * as Database from "../sql/Database.js"
import type { InvalidDid } from "../core/Did.js"
import type { KeyResolver } from "../core/KeyResolver.js"
import type { Keys, MalformedKey } from "../core/Keys.js"
import * as NonceStore from "../core/NonceStore.js"
import * as NonceStoreSql from "../sql/NonceStoreSql.js"
import type { TaskStore } from "../core/TaskStore.js"
import * as RunLogSql from "../sql/RunLogSql.js"
import * as A2aTaskStoreSql from "../sql/A2aTaskStoreSql.js"
import { boundsOf } from "../core/A2aTaskStore.js"
import * as TaskStoreSql from "../sql/TaskStoreSql.js"
import * as Serve from "../http/Serve.js"

export { AgentConfigError } from "./AgentError.js"
export {
  type ComputeMeter,
  type ComputeReservation,
  GatePaused,
  type GuardError,
  type GuardOptions,
  type Handler,
  type HandlerOutput,
  type RunInput,
  type TraceContext
} from "./Handler.js"
export { DEFAULT_MAX_RETAINED_EVENT_BYTES, type RunEventType } from "./RunStreams.js"
export { type McpAccess, mcpCapability } from "./Handler.js"
export { type AgentCallFailure, type AgentCallOptions, agentCapability } from "./Handler.js"
export { type LocalMcpServer, McpError, type McpToolInfo, type McpToolResult } from "./McpClient.js"

export {
  type AgentServerOptions,
  type AnthropicProviderOptions,
  OPENAI_BASE_URL,
  type ProviderChoice,
  type ResolveCallerKey
} from "./AgentServices.js"

/** A running agent server. */
export interface RunningAgent {
  readonly url: string
  readonly port: number
  readonly did: string
  readonly didHash: string
  readonly publicKeyB64: string
  /** Streamed runs kept for reconnects, and the bytes of their events. */
  readonly stats: () => { readonly streamedRuns: number; readonly retainedEventBytes: number; readonly a2aTasks: number; readonly a2aTaskBytes: number }
  readonly close: Effect.Effect<void>
}

/**
 * Where `mesh agent` and `serve` keep an agent's database unless told otherwise: named after the agent's DID (its
 * didHash), so agents of one module under different DIDs never share memory, nonces or tasks (docs/agent.md).
 */
export const defaultDatabase = (did: string): string => `.mesh/agents/${didHash((normalizeDid(did) ?? did) as Did)}.db`

/** The database an agent with these options uses: `database`, else the default for its DID. */
export const databaseOf = (options: Pick<AgentServerOptions, "database" | "did" | "name">): string =>
  options.database ?? defaultDatabase(Identity.wantedDid(options))

// A SQLite file (not `:memory:`, not a Postgres URL shared by replicas on purpose) is one agent's: locked while it runs.
const isLockedFile = (database: string): boolean => database !== ":memory:" && !Database.isPostgresUrl(database)

/** The agent's stores: paused tasks, nonces, persistent memory and A2A tasks share one SQLite file; and the key resolver. */
export const layerStores = (
  options: AgentServerOptions
): Layer.Layer<
  TaskStore | NonceStore.NonceStore | AgentMemory.AgentMemory | IdempotencyStore | KeyResolver,
  Database.DatabaseError,
  Keys
> => {
  const database = databaseOf(options)
  // An in-memory database dies with the process anyway: its nonces may as well live in (bounded) memory, which
  // costs a fraction of a SQL round trip per request.
  return storesOn(options, Database.layer(database), database, database === ":memory:")
}

/**
 * `layerStores` over a database the caller holds (migrated, e.g. `Database.layer`): paused tasks, nonces, stored
 * replies and persistent memory outlive a stop and start of the agent over it, as a simulation's crash and restart
 * needs. `database` only says the dialect (`postgres://`: streamed runs shared with replicas); `nonceStore` is
 * still honoured.
 */
export const layerStoresOn = <E>(
  options: Omit<AgentServerOptions, "database"> & { readonly database?: string },
  db: Layer.Layer<SqlClient.SqlClient, E>
): Layer.Layer<TaskStore | NonceStore.NonceStore | AgentMemory.AgentMemory | IdempotencyStore | KeyResolver, E, Keys> =>
  storesOn(options, db, options.database, false)

const storesOn = <E>(
  options: Omit<AgentServerOptions, "database">,
  db: Layer.Layer<SqlClient.SqlClient, E>,
  database: string | undefined,
  memoryNonces: boolean
): Layer.Layer<TaskStore | NonceStore.NonceStore | AgentMemory.AgentMemory | IdempotencyStore | KeyResolver, E, Keys> => {
  const tasks = TaskStoreSql.layer.pipe(Layer.provide(db))
  const nonces =
    options.nonceStore !== undefined
      ? Layer.succeed(NonceStore.NonceStore, options.nonceStore)
      : memoryNonces
        ? NonceStore.layerMemory()
        : NonceStoreSql.layer.pipe(Layer.provide(db))
  const mode = options.memory ?? "none"
  const memory =
    mode === "persistent" ? AgentMemorySql.layer().pipe(Layer.provide(db)) : mode === "session" ? AgentMemory.layerSession() : AgentMemory.layerNone
  // Stored replies live in the agent's database, so a retry after a restart is still answered from it.
  const replies = IdempotencyStoreSql.layer.pipe(Layer.provide(db))
  // Replicas on one Postgres database share their streamed runs, so a reconnect may reach any of them. `RunLog` is
  // an optional service of `RunStreams` (found with serviceOption), hence typed away here.
  const runLog = (database !== undefined && Database.isPostgresUrl(database) ? RunLogSql.layer.pipe(Layer.provide(db)) : Layer.empty) as Layer.Layer<never>
  // A2A tasks live in the agent's database, so a restart or another replica answers them; a `:memory:` agent keeps
  // them in (bounded) memory. Optional for `A2aTasks` (found with serviceOption), hence typed away here too.
  const a2aTasks = (memoryNonces ? Layer.empty : A2aTaskStoreSql.layer(boundsOf(options)).pipe(Layer.provide(db))) as Layer.Layer<never>
  return Layer.mergeAll(tasks, nonces, memory, replies, runLog, a2aTasks, layerResolver(options))
}

/** Every service the handlers of an agent server need, composed from its options (the identity is made first). */
export const layerServices = (
  options: AgentServerOptions
): Layer.Layer<Services, AgentConfigError | Database.DatabaseError | MalformedKey, Keys> => layerParts(options, layerStores(options))

/** Serves the handlers over the services in context; streamed runs stop before the server closes. */
const serve = (options: AgentServerOptions) =>
  Effect.gen(function* () {
    const identity = yield* Identity.Identity
    const streams = yield* RunStreams.RunStreams
    const a2a = yield* A2aTasks.A2aTasks
    const handlers = Layer.merge(AgentHttp.layer, A2aHttp.layer)
    const server = yield* Serve.make(AgentApi, handlers, {
      ...Serve.withPublicUrl(options.serving, options.publicUrl),
      refusals: new Map([["/", A2aHttp.refusal]]),
      challenge: challengeOf(options.auth ?? "none", options.name),
      port: options.port ?? 0,
      host: options.host ?? "127.0.0.1",
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
    })
    // Added after the server's own finalizer, so it runs first: a graceful close lets requests and streamed runs in
    // flight finish (up to `serving.shutdownTimeoutMs`), then the runs left stop while their followers still get
    // their last event.
    yield* Effect.addFinalizer(() => Effect.zipRight(server.drain(streams.awaitIdle), Effect.zipRight(streams.stopAll, a2a.stopAll)))
    yield* identity.publish(options.publicUrl ?? server.url)
    const memoryMode = options.memory ?? "none"
    yield* Effect.logInfo(`agent ${options.name} (${identity.did}) listening on ${server.url}, auth ${options.auth ?? "none"}, memory ${memoryMode}`)
    return {
      url: server.url,
      port: server.port,
      did: identity.did,
      didHash: identity.didHash,
      publicKeyB64: identity.publicKeyB64,
      stats: () => ({ ...streams.stats(), ...a2a.stats() }),
      close: server.close
    } satisfies RunningAgent
  })

/** Starts an agent server; it stops when the scope closes. */
export const make = (
  options: AgentServerOptions
): Effect.Effect<RunningAgent, AgentConfigError | Database.DatabaseError | Serve.ServeError | InvalidDid | MalformedKey, Scope.Scope | Keys> =>
  Effect.gen(function* () {
    yield* checkOptions(options)
    const database = databaseOf(options)
    if (options.sharedDatabase !== true && isLockedFile(database)) {
      yield* FileLock.acquire(database).pipe(
        Effect.mapError((e) => new AgentConfigError({ code: "DATABASE_IN_USE", message: `${e.message}: another agent runs on this database; give each agent its own (--db), or pass sharedDatabase (--shared-db) to share it on purpose` }))
      )
    }
    const services = yield* Layer.build(layerServices(options))
    return yield* Effect.provide(serve(options), services)
  })

/** `make` as a layer: the server runs while the layer is alive. */
export const layer = (
  options: AgentServerOptions
): Layer.Layer<never, AgentConfigError | Database.DatabaseError | Serve.ServeError | InvalidDid | MalformedKey, Keys> =>
  Layer.scopedDiscard(make(options))
