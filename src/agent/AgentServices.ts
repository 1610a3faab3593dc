/**
 * What an agent server is made of, whatever serves it: its options, their check, and the parts composed over stores
 * given as a layer. `AgentServer` gives them SQL stores and serves them on node:http; `AgentWeb` gives them memory
 * stores (or the caller's) and serves them as a fetch handler on Workers and Edge runtimes (docs/runtimes.md). This
 * module imports neither SQL nor node:http.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { AgentAuth, AuthMode } from "./AgentApi.js"
import { AgentConfigError } from "./AgentError.js"
import * as A2aCard from "./A2aCard.js"
import * as A2aTasks from "./A2aTasks.js"
import * as AgentCalls from "./AgentCalls.js"
import * as Auth from "./Auth.js"
import * as Discovery from "./Discovery.js"
import * as Execution from "./Execution.js"
import * as Gates from "./Gates.js"
import { type Handler, layerHandler } from "./Handler.js"
import * as Idempotency from "./Idempotency.js"
import * as Identity from "./Identity.js"
import * as McpClient from "./McpClient.js"
import * as RoutedChat from "./RoutedChat.js"
import * as RunStreams from "./RunStreams.js"
import * as AgentMemory from "../core/AgentMemory.js"
import type { IdempotencyStore } from "../core/IdempotencyStore.js"
import { KeyNotFound, KeyResolver, type KeyResolverApi, KeyResolverUnavailable, type ResolvedKey } from "../core/KeyResolver.js"
import type { Keys, MalformedKey, PrivateKeyInput } from "../core/Keys.js"
import { ModelProvider, type ModelProviderApi } from "../core/ModelProvider.js"
import type * as NonceStore from "../core/NonceStore.js"
import * as TaskGuard from "../core/TaskGuard.js"
import type { TaskStore } from "../core/TaskStore.js"
import { fromBase64 } from "../core/internal/bytes.js"
import { lift } from "../core/internal/lift.js"
import type * as Serve from "../http/Serve.js"
import * as MeshClient from "../hub/MeshClient.js"
import * as ModelCatalogue from "../model/ModelCatalogue.js"
import * as ModelLearner from "../model/ModelLearner.js"
import * as ModelProviderAnthropic from "../model/ModelProviderAnthropic.js"
import * as ModelProviderOpenAi from "../model/ModelProviderOpenAi.js"
import * as ModelRouter from "../model/ModelRouter.js"
import * as QualityEstimator from "../model/QualityEstimator.js"
import * as HttpClientDefault from "../http/HttpClientDefault.js"

/** A caller key resolver given as a function: DID → raw public key (bytes or publicKeyB64), or null if unknown. */
export type ResolveCallerKey = (did: string) => Uint8Array | string | null | undefined | Promise<Uint8Array | string | null | undefined>

/** How to run an agent server. */
export interface AgentServerOptions {
  readonly name: string
  /** The agent's logic; without one, `provider` and `model` make it an LLM chat agent. */
  readonly handler?: Handler
  readonly systemPrompt?: string
  /**
   * A model provider, or the settings of one: `{ baseUrl, apiKey? }` of an OpenAI-compatible server,
   * `{ type: "anthropic", … }` of the Anthropic Messages API, or a name whose settings come from the environment
   * (`"anthropic"`: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; `"openai"`: OPENAI_API_KEY, OPENAI_BASE_URL).
   */
  readonly provider?: ProviderChoice
  readonly model?: string
  /**
   * The LLM chat agent's bound on an answer (`maxTokens` of each call, below the model's own). Unset: the model's
   * bound, except under a task mandate, where each call reserves its prompt plus this bound against `computeLimit`,
   * 1024 by default.
   */
  readonly maxOutputTokens?: number
  /**
   * Models to route over with `provider` serving every one (docs/models.md), instead of one `model`: a catalogue or
   * its config. Either way an LLM agent answers through the `ModelRouter`.
   */
  readonly catalogue?: ModelCatalogue.ModelCatalogue | { readonly models: ReadonlyArray<typeof ModelCatalogue.ModelSpecConfig.Encoded> }
  /** Default "none". */
  readonly memory?: AgentMemory.MemoryMode
  /** Default "none". */
  readonly auth?: AuthMode
  readonly bearerTokens?: ReadonlyArray<string>
  readonly verifyBearer?: (token: string) => boolean | Promise<boolean>
  /** mesh-sig: only these DIDs may call (otherwise any caller whose signature verifies). */
  readonly allowedCallers?: ReadonlyArray<string>
  /**
   * Where caller keys (mesh-sig), mandate grantors and approval signers are looked up. Default: the hub at `hubUrl`.
   * A plain function knows no key versions (every key counts as version 1); pass a `KeyResolverApi` for rotation.
   */
  readonly resolveCallerKey?: KeyResolverApi | ResolveCallerKey
  /** The hub whose registry resolves DIDs by default. */
  readonly hubUrl?: string
  readonly host?: string
  /** Default 0 (any free port). */
  readonly port?: number
  /** Default 1 MiB; larger bodies get 413 before parsing. */
  readonly maxBodyBytes?: number
  /** Serving guards and limits (Host/Origin, timeouts, connections, load shedding); the host of `publicUrl` is allowed too; docs/protocol.md, "HTTP serving rules". */
  readonly serving?: Serve.Guards
  /** The agent's DID; default `did:mesh:<name>` with a fresh key (logged as a warning: nobody can know it). */
  readonly did?: string
  /** The agent's private key (seed, PKCS#8, base64 or `PrivateKey`). */
  readonly privateKey?: PrivateKeyInput
  /**
   * SQLite file for paused tasks, nonces, stored replies and persistent memory, or a `postgres://` URL shared with
   * the agent's replicas (then streamed runs are shared too, for reconnects on any replica). Default
   * `.mesh/agents/<didHash>.db`, after the agent's DID. A SQLite file is locked while the agent runs (docs/agent.md).
   */
  readonly database?: string
  /** Let this agent run on a SQLite file another live agent uses (default false: refused with DATABASE_IN_USE). */
  readonly sharedDatabase?: boolean
  /** The base URL callers use, when it is not the listening address (behind a proxy). */
  readonly publicUrl?: string
  /** Capabilities listed in the discovery document (and, without `skills`, as the A2A card's skills). */
  readonly capabilities?: ReadonlyArray<string>
  /** What the A2A card says the agent does; default a line naming it and its DID. */
  readonly description?: string
  /** The skills the A2A card lists; default one per capability. */
  readonly skills?: ReadonlyArray<A2aCard.A2aSkill>
  /** A2A tasks kept at most (running, waiting for input and finished); default 10 000. */
  readonly maxA2aTasks?: number
  /** Bytes of A2A task messages and replies kept in all (ended tasks let go first); default 64 MiB. */
  readonly maxA2aTaskBytes?: number
  /** Bytes of A2A task messages and replies kept for one caller (its ended tasks let go first); default 8 MiB. */
  readonly maxA2aTaskBytesPerCaller?: number
  /** Whether this runtime is sandboxed (mandates with `sandbox: true` need it). Default false. */
  readonly sandboxed?: boolean
  /** Allowed clock skew for signatures and approvals; default 30 s. */
  readonly clockToleranceMs?: number
  /** How long a finished streamed run stays available to reconnecting clients; default 5 minutes. */
  readonly runRetentionMs?: number
  /** Streamed runs in progress at most; more get 503 AGENT_BUSY. Default 256. */
  readonly maxLiveRuns?: number
  /**
   * Bytes of events all streamed runs together keep for reconnects; default 64 MiB. Past it the oldest finished
   * runs are let go first, then a live run's oldest events; while live runs alone hold it, new streamed runs get
   * 503 AGENT_BUSY. One run keeps at most 4 MiB (or this, if smaller).
   */
  readonly maxRetainedEventBytes?: number
  /**
   * Where mesh-sig nonces are recorded. Default: the agent's database (SQL, 6 250 live nonces per caller), or a
   * bounded memory store (100 000, 6 250 per caller) when the database is `:memory:`.
   */
  readonly nonceStore?: NonceStore.NonceStoreApi
  /** How long a reply to a request with an `Idempotency-Key` is kept for retries (in the agent's database); default 24 hours. */
  readonly idempotencyTtlMs?: number
  /**
   * What one caller may hold in the idempotency store at once: live keys and bytes of stored replies; a new key
   * beyond is 429 `IDEMPOTENCY_QUOTA_EXCEEDED` with `Retry-After`. Default 1,000 keys and 8 MiB.
   */
  readonly idempotencyQuota?: { readonly entries: number; readonly bytes: number }
  /**
   * Local MCP servers by the name handlers use in `input.mcp(name)`: a command spoken to over stdio, or a Streamable
   * HTTP URL. Registered servers need no entry: `input.mcp(didHash)` resolves them through `hubUrl`.
   */
  readonly mcpServers?: Readonly<Record<string, McpClient.LocalMcpServer>>
  /** An LLM agent's MCP servers (names or didHashes) whose tools the model is offered as function tools. */
  readonly mcpTools?: ReadonlyArray<string>
  /** Model calls with tools one answer of an LLM agent may take before it must answer in text; default 8. */
  readonly maxToolSteps?: number
}

/** The Anthropic Messages API as an agent's provider; without `apiKey` the key is ANTHROPIC_API_KEY. */
export interface AnthropicProviderOptions extends ModelProviderAnthropic.AnthropicOptions {
  readonly type: "anthropic"
}

/** What `provider` may be. */
export type ProviderChoice =
  | ModelProviderApi
  | ModelProviderOpenAi.OpenAiCompatibleOptions
  | AnthropicProviderOptions
  | "anthropic"
  | "openai"

/** Where `provider: "openai"` goes unless OPENAI_BASE_URL says otherwise. */
export const OPENAI_BASE_URL = "https://api.openai.com/v1"

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"])

/** A resolver from a function: raw keys at version 1; a function that throws or rejects is an unavailable resolver. */
const resolverFromFunction = (f: ResolveCallerKey): KeyResolverApi => ({
  resolve: (did) => {
    const unavailable = (e: unknown) => new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: `resolveCallerKey failed: ${String(e)}`, did })
    // A miss as `undefined` too (what `Map.get` answers), and anything but bytes or base64 (a caller in plain
    // JavaScript) refused as not a key, rather than handed on to fail in the verifier as a server error.
    const settle = (key: unknown): Effect.Effect<ResolvedKey, KeyNotFound> => {
      if (key === null || key === undefined) return Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `no key known for ${did}`, did }))
      if (key instanceof Uint8Array) return Effect.succeed({ publicKey: key, keyVersion: 1 })
      if (typeof key !== "string") return Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `the key given for ${did} is neither bytes nor base64`, did }))
      try {
        return Effect.succeed({ publicKey: fromBase64(key), keyVersion: 1 })
      } catch {
        return Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `the key given for ${did} is not base64`, did }))
      }
    }
    return Effect.flatMap(Effect.mapError(lift(() => f(did)), unavailable), settle)
  }
})

const noResolver: KeyResolverApi = {
  resolve: (did) => Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `no key resolver configured (set hubUrl or resolveCallerKey) for ${did}`, did }))
}

/** Refuses options that do not describe a server that can run, before anything is opened. */
export const checkOptions = (options: AgentServerOptions): Effect.Effect<void, AgentConfigError> => {
  const auth = options.auth ?? "none"
  const refuse = (message: string) => Effect.fail(new AgentConfigError({ code: "INVALID_CONFIG", message }))
  if (typeof options.name !== "string" || options.name.length === 0) return refuse("name is required")
  if (options.handler === undefined && (options.provider === undefined || (options.model === undefined && options.catalogue === undefined))) {
    return refuse("give a handler, or a provider and a model (or a catalogue)")
  }
  if (options.catalogue !== undefined && !("byId" in options.catalogue)) {
    const decoded = ModelCatalogue.decode(options.catalogue)
    if (Either.isLeft(decoded)) return refuse(`catalogue: ${decoded.left.message}`)
  }
  if (typeof options.provider === "string" && options.provider !== "anthropic" && options.provider !== "openai") {
    return refuse(`unknown provider ${JSON.stringify(options.provider)}: give "anthropic", "openai", a provider or its settings`)
  }
  if (options.maxToolSteps !== undefined && (!Number.isSafeInteger(options.maxToolSteps) || options.maxToolSteps < 0)) {
    return refuse("maxToolSteps must be a non-negative integer")
  }
  if (options.maxOutputTokens !== undefined && (!Number.isSafeInteger(options.maxOutputTokens) || options.maxOutputTokens < 1)) {
    return refuse("maxOutputTokens must be a positive integer")
  }
  if (auth === "bearer" && (options.bearerTokens ?? []).length === 0 && options.verifyBearer === undefined) {
    return refuse("auth bearer needs bearerTokens or verifyBearer")
  }
  if (auth === "mesh-sig" && options.resolveCallerKey === undefined && options.hubUrl === undefined) {
    return refuse("auth mesh-sig needs resolveCallerKey or hubUrl to find caller keys")
  }
  if (auth === "mesh-sig" && options.publicUrl === undefined && !LOOPBACK.has(options.host ?? "127.0.0.1")) {
    return refuse("auth mesh-sig on a non-loopback address needs publicUrl: the URL callers sign")
  }
  return Effect.void
}

/** Where caller keys, mandate grantors and approval signers are looked up: the function or resolver given, else the hub. */
export const layerResolver = (options: AgentServerOptions): Layer.Layer<KeyResolver, never, Keys> => {
  const given = options.resolveCallerKey
  if (given !== undefined) return Layer.succeed(KeyResolver, typeof given === "function" ? resolverFromFunction(given) : given)
  return options.hubUrl === undefined ? Layer.succeed(KeyResolver, noResolver) : MeshClient.layerKeyResolver({ hubUrl: options.hubUrl })
}

/** The provider layer for a `provider` option; settings missing from the environment are INVALID_CONFIG. */
const layerProvider = (provider: ProviderChoice): Layer.Layer<ModelProvider, AgentConfigError> => {
  if (typeof provider === "object" && "chat" in provider) return Layer.succeed(ModelProvider, provider)
  const http =
    provider === "anthropic"
      ? ModelProviderAnthropic.layerConfig()
      : provider === "openai"
        ? Layer.unwrapEffect(
          Effect.map(
            Config.all({
              apiKey: Config.option(Config.redacted("OPENAI_API_KEY")),
              baseUrl: Config.withDefault(Config.string("OPENAI_BASE_URL"), OPENAI_BASE_URL)
            }),
            ({ apiKey, baseUrl }) =>
              ModelProviderOpenAi.layer({ baseUrl, name: "openai", ...(Option.isSome(apiKey) ? { apiKey: apiKey.value } : {}) })
          )
        )
        : "type" in provider && provider.type === "anthropic"
          ? ModelProviderAnthropic.layerConfig(provider)
          : ModelProviderOpenAi.layer(provider as ModelProviderOpenAi.OpenAiCompatibleOptions)
  return http.pipe(
    Layer.provide(HttpClientDefault.layer),
    Layer.mapError((e) => new AgentConfigError({ code: "INVALID_CONFIG", message: `provider: ${String(e)}` }))
  )
}

/** The handler the server runs: the one given, or a chat handler over the provider given (or its settings). */
const layerAgentHandler = (options: AgentServerOptions) => {
  if (options.handler !== undefined) return layerHandler(options.handler)
  const catalogue = options.catalogue === undefined
    ? ModelCatalogue.single(options.model!, "default")
    : "byId" in options.catalogue
      ? options.catalogue
      : Either.getOrThrow(ModelCatalogue.decode(options.catalogue))
  const router = ModelRouter.layer(catalogue).pipe(
    Layer.provide(Layer.mergeAll(ModelRouter.layerFromModelProvider, QualityEstimator.layerHeuristic, ModelLearner.layerMemory)),
    Layer.provide(layerProvider(options.provider!))
  )
  return RoutedChat.layer({
    ...(options.maxOutputTokens === undefined ? {} : { maxOutputTokens: options.maxOutputTokens }),
    ...(options.mcpTools === undefined ? {} : { mcpServers: options.mcpTools }),
    ...(options.maxToolSteps === undefined ? {} : { maxToolSteps: options.maxToolSteps })
  }).pipe(Layer.provide(router))
}

/** The stores an agent's parts run over, and where caller keys are looked up (docs/runtimes.md, "Stores"). */
export type Stores = TaskStore | NonceStore.NonceStore | AgentMemory.AgentMemory | IdempotencyStore | KeyResolver

/** Every service the handlers of an agent server need. */
export type Services =
  | Identity.Identity
  | AgentAuth
  | Execution.Execution
  | Gates.Gates
  | RunStreams.RunStreams
  | Discovery.Discovery
  | Idempotency.Idempotency
  | AgentMemory.AgentMemory
  | A2aTasks.A2aTasks
  | A2aCard.A2aCard
  | KeyResolver

/** The agent's parts composed over `stores` (the identity is made first). */
export const layerParts = <E>(
  options: AgentServerOptions,
  stores: Layer.Layer<Stores, E, Keys>
): Layer.Layer<Services, AgentConfigError | MalformedKey | E, Keys> => {
  const guard = TaskGuard.layer.pipe(Layer.provide(stores))
  const gates = Gates.layer(options).pipe(Layer.provide(stores))
  const mcp = McpClient.layer({
    ...(options.hubUrl === undefined ? {} : { hubUrl: options.hubUrl }),
    ...(options.mcpServers === undefined ? {} : { servers: options.mcpServers })
  }).pipe(Layer.provide(HttpClientDefault.layer))
  // Handlers call other agents through the agent's hub; without one there is no client and their calls say so.
  const calls = options.hubUrl === undefined ? Layer.empty : AgentCalls.layer(options.hubUrl)
  const execution = Execution.layer(options).pipe(Layer.provide(Layer.mergeAll(stores, guard, gates, mcp, calls, layerAgentHandler(options).pipe(Layer.provide(stores)))))
  const parts = Layer.mergeAll(
    stores,
    gates,
    execution,
    Auth.layer(options).pipe(Layer.provide(stores)),
    Discovery.layer(options),
    RunStreams.layer(options).pipe(Layer.provide(stores)),
    Idempotency.layer(options).pipe(Layer.provide(stores)),
    A2aTasks.layer(options).pipe(Layer.provide(stores)),
    A2aCard.layer(options)
  )
  return parts.pipe(Layer.provideMerge(Identity.layer(options)))
}
