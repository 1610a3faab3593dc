/**
 * A whole hub in one process: registry, spending ledger and platform over one database (SQLite, or Postgres shared
 * with other hubs), served on the lean
 * HttpApi server. `mesh hub` runs `Hub.start`.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import type * as HttpApi from "@effect/platform/HttpApi"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Database from "../sql/Database.js"
import { PlatformApi } from "./HubApi.js"
import { HandlersWithoutSagasLive, HubWithoutSagasApi } from "./SagasDisabled.js"
import { CardFetchPolicy } from "./A2aCardFetch.js"
import type { OutboundUrls } from "./OutboundAddress.js"
import { HubPublicUrl, PlatformOnlyLive } from "./HubHttp.js"
import { KeyNotFound, KeyResolver, KeyResolverUnavailable } from "../core/KeyResolver.js"
import type { Keys } from "../core/Keys.js"
import * as Ledger from "./Ledger.js"
import type { NonceStore } from "../core/NonceStore.js"
import * as NonceStoreSql from "../sql/NonceStoreSql.js"
import * as Platform from "./Platform.js"
import * as RateLimiter from "./RateLimiter.js"
import * as Registry from "./Registry.js"
import * as RegistryStore from "../sql/RegistryStore.js"
import * as Serve from "../http/Serve.js"
import * as LearnerStatsStore from "./LearnerStatsStore.js"

/** How to run a hub. */
export interface HubOptions {
  /**
   * The database: a SQLite file (created with its folder), `:memory:`, or a `postgres://` URL that several hubs
   * share (docs/scaling.md).
   */
  readonly database: string
  /** Port to listen on; 0 picks a free one. Default 0. */
  readonly port?: number
  /** Address to listen on. Default 127.0.0.1. */
  readonly host?: string
  readonly maxBodyBytes?: number
  /** Serving guards and limits (Host/Origin, timeouts, connections, load shedding); docs/protocol.md, "HTTP serving rules". */
  readonly serving?: Serve.Guards
  /** Nonces of signed ledger requests: per-signer quota and purge interval (defaults of `NonceStoreSql`). */
  readonly nonces?: NonceStoreSql.SqlOptions
  /** Per-address limits of the platform's challenge endpoints. */
  readonly rateLimit?: RateLimiter.RateLimitOptions
  /** Writes per API key, per DID the key is bound to, and per client address, each per window (`Registry.DEFAULT_WRITE_QUOTA`). */
  readonly writeQuota?: Partial<Registry.WriteQuota>
  /** How often spent challenges are deleted (default every 60 s, 1000 rows a statement). */
  readonly challengePurge?: Platform.ChallengePurgeOptions
  /**
   * Issue a new admin credential on this start even though the database has had one (the explicit recovery path
   * after the admin key was revoked or lost). Default false: the admin credential is made on a database's first
   * start only.
   */
  readonly newAdminKey?: boolean
  /** Overrides of the registry's search and size limits (`Registry.DEFAULT_LIMITS`). */
  readonly limits?: Partial<Registry.RegistryLimitsConfig>
  /** The URL clients reach the hub at, which signed ledger requests name; default the address a request arrived on. */
  readonly publicUrl?: string
  /** How long after it was last heard from an agent counts as stale (`Registry.DEFAULT_STALE_AFTER_MS`, 90 s). */
  readonly staleAfterMs?: number
  /**
   * Which A2A card URLs the hub fetches when an agent is registered from one: `public` (default) refuses loopback,
   * private and link-local addresses, so a key holder cannot make the hub read its own network; `any` allows them
   * (A2A agents beside the hub on a private network).
   */
  readonly a2aCardUrls?: "public" | "any"
  /**
   * Which addresses the hub's calls to registered URLs may reach (saga steps' agents, A2A cards): `public` (the
   * default) refuses loopback, private, link-local and IPv4-embedding addresses at connect time (`OutboundAddress`);
   * `any` allows them, for agents on the hub's own networks. `any` here allows card fetches too.
   */
  readonly outboundUrls?: OutboundUrls
}

/** A running hub. */
export interface RunningHub {
  readonly url: string
  readonly port: number
  /** The URL of the health-probe listener (`serving.probePort`), when one was asked for. */
  readonly probeUrl?: string
  /** The admin credential, present only on the start that created it (first start on a database, or `newAdminKey`). */
  readonly admin: Option.Option<Registry.CreatedApiKey>
}

/** The did:mesh resolver in process: keys and revocations straight from the registry. */
export const layerRegistryKeyResolver: Layer.Layer<KeyResolver, never, Registry.Registry> = Layer.effect(
  KeyResolver,
  Effect.map(Registry.Registry, (registry) => ({
    resolve: (did: string) =>
      Effect.map(
        Effect.mapError(registry.resolveDid(did), (e) =>
          e._tag === "RegistryUnavailable"
            ? new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: e.message, did })
            : new KeyNotFound({ code: "KEY_NOT_FOUND", message: e.message, did })
        ),
        (r) => ({ publicKey: r.publicKey, keyVersion: r.keyVersion })
      ),
    // A revocation list we cannot read must not let a revoked mandate through.
    isMandateRevoked: (jti: string, issuer: string) => Effect.orElseSucceed(registry.isMandateRevoked(jti, issuer), () => true)
  }))
)

/**
 * Registry, ledger and platform over a database, with the key resolver and the nonce store that check signed ledger
 * requests; needs `Keys`.
 */
export const layerServices = (
  options: Pick<HubOptions, "database" | "rateLimit" | "writeQuota" | "challengePurge" | "limits" | "nonces" | "staleAfterMs">
): Layer.Layer<
  Registry.Registry | Ledger.Ledger | Platform.Platform | RegistryStore.RegistryStore | KeyResolver | NonceStore | LearnerStatsStore.LearnerStatsStore,
  Database.DatabaseError,
  Keys
> => layerServicesOn(options, Database.layer(options.database))

/**
 * `layerServices` with the database kept in its output, for an assembly that adds stores of its own on the same
 * connection (`SagaHub`).
 */
export const layerServicesWithDatabase = (options: Pick<HubOptions, "database" | "rateLimit" | "writeQuota" | "challengePurge" | "limits" | "nonces" | "staleAfterMs">) => {
  const db = Database.layer(options.database)
  return Layer.merge(layerServicesOn(options, db), db)
}

/**
 * `layerServices` over a database the caller holds (migrated, e.g. `Database.layer`): a hub that stops and starts
 * again over the same one keeps its registry, ledger and nonces, as a simulation's crash and restart needs.
 * `database` only says the dialect: a `postgres://` URL shares the per-address limits in the database.
 */
export const layerServicesOn = <E = never>(
  options: Pick<HubOptions, "rateLimit" | "writeQuota" | "challengePurge" | "limits" | "nonces" | "staleAfterMs"> & { readonly database?: string },
  db: Layer.Layer<SqlClient.SqlClient, E>
): Layer.Layer<
  Registry.Registry | Ledger.Ledger | Platform.Platform | RegistryStore.RegistryStore | KeyResolver | NonceStore | LearnerStatsStore.LearnerStatsStore,
  E,
  Keys
> => {
  const store = RegistryStore.layer.pipe(Layer.provide(db))
  // Hubs on one Postgres database share their per-address limits there; a SQLite hub keeps them in memory.
  // (`SharedRateLimits` is optional to the registry and the platform, found with serviceOption, hence typed away.)
  const limits = (options.database !== undefined && Database.isPostgresUrl(options.database) ? RateLimiter.layerShared.pipe(Layer.provide(db)) : Layer.empty) as Layer.Layer<never>
  const registry = Registry.layerWith({
    ...(options.writeQuota === undefined ? {} : { writeQuota: options.writeQuota }),
    ...(options.limits === undefined ? {} : { limits: options.limits }),
    ...(options.staleAfterMs === undefined ? {} : { staleAfterMs: options.staleAfterMs })
  }).pipe(Layer.provide(limits), Layer.provideMerge(store))
  const purge = Platform.layerChallengePurge(options.challengePurge).pipe(Layer.provide(store))
  const resolver = layerRegistryKeyResolver.pipe(Layer.provide(registry))
  const ledger = Ledger.layer.pipe(Layer.provide(Layer.mergeAll(db, resolver)))
  const platform = Platform.layer({ ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }) }).pipe(
    Layer.provide(Layer.merge(Platform.layerLocalGateway.pipe(Layer.provide(registry)), limits))
  )
  const nonces = NonceStoreSql.layerWith(options.nonces ?? {}).pipe(Layer.provide(db))
  const learnerStats = LearnerStatsStore.layer.pipe(Layer.provide(db))
  return Layer.mergeAll(registry, ledger, platform, purge, resolver, nonces, learnerStats)
}

/** Starts a hub; it stops when the scope closes. Its saga paths answer `SAGAS_DISABLED` (sagas run in `SagaHub`). */
export const start = (options: HubOptions): Effect.Effect<RunningHub, Database.DatabaseError | Serve.ServeError, Scope.Scope | Keys> =>
  Effect.flatMap(Layer.build(layerServices(options)), (services) => serve(HubWithoutSagasApi, HandlersWithoutSagasLive, services, options))

/**
 * Serves `api` over built hub services on the hub's address, guards and public URL, then makes the admin credential
 * (first start on a database, or `newAdminKey`); for `start` and for assemblies that serve a larger contract
 * (`SagaHub`).
 */
export const serve = <Api extends HttpApi.HttpApi.Any, E, R, S>(
  api: Api,
  handlers: Serve.HandlersLayer<Api, E, R>,
  services: Context.Context<S | Registry.Registry>,
  options: HubOptions
) =>
  Effect.gen(function* () {
    const server = yield* Serve.make(api, handlers, {
      // Serve's default exempts only /health, which touches no database; /api/status reads the store and is shed.
      // Clients that reach the hub at its public URL send that URL's host.
      ...Serve.withPublicUrl(options.serving, options.publicUrl),
      port: options.port ?? 0,
      host: options.host ?? "127.0.0.1",
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
    }).pipe(
      Effect.provide(services),
      options.publicUrl === undefined ? (e) => e : Effect.provideService(HubPublicUrl, options.publicUrl),
      options.a2aCardUrls === "any" || options.outboundUrls === "any" ? Effect.provideService(CardFetchPolicy, { allowPrivateAddresses: true }) : (e) => e
    )
    const registry = Context.get(services, Registry.Registry)
    const admin = yield* Effect.mapError(
      options.newAdminKey === true ? Effect.map(registry.issueAdminKey, Option.some) : registry.ensureAdmin,
      (e) => new Database.DatabaseError({ code: "DATABASE_ERROR", message: `cannot create the admin credential: ${e.message}` })
    )
    const running: RunningHub = { url: server.url, port: server.port, ...(server.probeUrl === undefined ? {} : { probeUrl: server.probeUrl }), admin }
    return running
  })

/** How to run a platform apart from its registry. */
export interface PlatformOptions extends Platform.RemoteRegistryOptions {
  readonly port?: number
  readonly host?: string
  readonly rateLimit?: RateLimiter.RateLimitOptions
  /** Host, origin, timeout, connection and load-shedding guards of the serving path (`/api/status` is never shed). */
  readonly serving?: Serve.Guards
}

/** Starts a platform-only server that reaches the registry over HTTP; it stops when the scope closes. */
export const startPlatform = (options: PlatformOptions): Effect.Effect<{ readonly url: string; readonly port: number }, Serve.ServeError, Scope.Scope | Keys> =>
  Effect.gen(function* () {
    const platform = Platform.layer({ ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }) }).pipe(
      Layer.provide(Platform.layerRemoteGateway({ registryUrl: options.registryUrl, apiKey: options.apiKey }))
    )
    const services = yield* Layer.build(platform)
    const server = yield* Serve.make(PlatformApi, PlatformOnlyLive, {
      shedExemptPaths: ["/api/status"],
      ...options.serving,
      port: options.port ?? 0,
      host: options.host ?? "127.0.0.1"
    }).pipe(Effect.provide(services))
    return { url: server.url, port: server.port }
  })
