/**
 * The durable engine sagas run on: @effect/cluster's workflow engine over the hub's SQL database, either as a single
 * runner that owns every shard (SQLite, or one hub) or as one runner of a cluster whose members share the shards
 * through Postgres (`cluster`): runner registration, shard locks and each runner's heartbeat live in the database,
 * runners reach each other over a socket, and a runner that stops answering loses its shards to the others.
 *
 * Every setting is given here, none read from the environment: the engine's own environment reader would take a
 * deployment's `HOST` or `PORT` for the runner's address.
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as ClusterWorkflowEngine from "@effect/cluster/ClusterWorkflowEngine"
import type * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/**
 * What the durable engines give: the workflow engine, and the sharding and message storage under it, through which
 * the scheduler learns whether a saga's workflow was ever started (`SagaScheduler`'s sweep of sagas never started).
 */
export type Engine = WorkflowEngine.WorkflowEngine | Sharding.Sharding | MessageStorage.MessageStorage

/** A runner's address: where the other runners reach it (or where it listens). */
export interface Address {
  readonly host: string
  readonly port: number
}

/** How a hub joins the cluster of saga runners (Postgres only). */
export interface ClusterOptions {
  /** Where the other runners reach this one; it is also this runner's name in the database, so it must be unique. */
  readonly runnerAddress: Address
  /** Where this runner listens, when that differs from `runnerAddress` (behind NAT, or `0.0.0.0`). */
  readonly listenAddress?: Address
  /**
   * How long after a runner's last heartbeat its shards, and the sagas on them, move to the other runners. Default
   * `DEFAULT_FAILOVER_MS`; a runner renews its heartbeat three times in this span.
   */
  readonly failoverMs?: number
}

/** The default failover bound (docs/scaling.md §7). */
export const DEFAULT_FAILOVER_MS = 10_000
/** The port a runner listens on when no address names one. */
export const DEFAULT_RUNNER_PORT = 34431

/** Reads `host:port` (a bracketed IPv6 host too); undefined when it does not read as one. */
export const parseAddress = (text: string): Address | undefined => {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(text.trim())
  if (m === null) return undefined
  const port = m[3] === undefined ? DEFAULT_RUNNER_PORT : Number(m[3])
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return undefined
  return { host: (m[1] ?? m[2])!, port }
}

const settings = (overrides: Partial<ShardingConfig.ShardingConfig["Type"]>) => ShardingConfig.layer({ ...ShardingConfig.defaults, ...overrides })

/**
 * One runner owning every shard; its runner record stays in memory, since no other runner needs to find it and a
 * restart must not wait out its own earlier lock.
 */
export const layerSingle: Layer.Layer<Engine, never, SqlClient.SqlClient> = ClusterWorkflowEngine.layer.pipe(
  Layer.provideMerge(Sharding.layer),
  Layer.provide(Runners.layerNoop),
  Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  // The address only names the runner: with no other runner, nothing listens on it.
  Layer.provide(settings({}))
)

/** The settings of a cluster runner: how fast a dead runner is noticed and its work taken over. */
export const clusterSettings = (options: ClusterOptions): Partial<ShardingConfig.ShardingConfig["Type"]> => {
  const failover = Math.max(3_000, options.failoverMs ?? DEFAULT_FAILOVER_MS)
  return {
    runnerAddress: Option.some(RunnerAddress.RunnerAddress.make(options.runnerAddress)),
    runnerListenAddress: options.listenAddress === undefined ? Option.none() : Option.some(RunnerAddress.RunnerAddress.make(options.listenAddress)),
    // A runner missing from the database for this long is dropped; its Postgres advisory locks went with its connection.
    shardLockExpiration: Duration.millis(failover),
    shardLockRefreshInterval: Duration.millis(Math.floor(failover / 3)),
    refreshAssignmentsInterval: Duration.millis(Math.min(1_000, Math.floor(failover / 4))),
    // A runner that refuses connections is marked unhealthy by the others' pings before its heartbeat runs out.
    runnerHealthCheckInterval: Duration.millis(Math.floor(failover / 3)),
    // Messages left in storage (a runner died after accepting them) are looked for at least this often.
    entityMessagePollInterval: Duration.millis(Math.min(2_000, Math.floor(failover / 3)))
  }
}

/** A runner of a cluster over the shared SQL database (Postgres), reaching the others over a socket. */
export const layerCluster = (options: ClusterOptions): Layer.Layer<Engine, never, SqlClient.SqlClient> =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(SocketRunner.layer),
    Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))),
    Layer.provide([NodeClusterSocket.layerClientProtocol, Layer.orDie(NodeClusterSocket.layerSocketServer)]),
    Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(settings(clusterSettings(options))),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
