/**
 * Agent servers: an async handler (or a model provider and a model) served as `/v1/run`, with streaming over SSE,
 * conversation memory, three auth modes, human gates under task mandates, `/health` and a signed discovery
 * document. docs/agent.md is the reference; `AgentServer.make` is the Effect API, `serve` (in `AgentPromise`) the
 * Promise one, `mesh agent <module>` the command.
 *
 * Human gates replay: a task paused at a gate keeps its input and the list of guard calls that had passed; on resume
 * the handler runs again from the start, guard calls identical to those pass at once (nothing is charged twice), the
 * approval applies to the one call identical to the paused one, and chunks already streamed are not sent again. A
 * handler that takes other steps is checked afresh from the first difference. So a handler should put each side
 * effect after the guard that covers it and produce the same steps for the same input.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as crypto from "node:crypto"
import {
  AgentApi,
  AgentAuth,
  type ApprovalRequest,
  type ApprovalRequired,
  type AuthMode,
  Caller as CallerSchema,
  type Caller,
  ChatMessage,
  CurrentCaller,
  type RunReply,
  type RunRequest
} from "./AgentApi.js"
import {
  AgentBadRequest,
  AgentConflict,
  AgentForbidden,
  type ForbiddenCode,
  AgentNotFound,
  AgentRateLimited,
  AgentUnauthorized,
  AgentUnavailable,
  HandlerFailed,
  ProviderFailed,
  type RunError
} from "./AgentError.js"
import * as AgentMemory from "../core/AgentMemory.js"
import * as AgentMemorySql from "../sql/AgentMemorySql.js"
import { resumeTask } from "../core/Approval.js"
import * as Database from "../sql/Database.js"
import { didHash, type InvalidDid, normalizeDid, verificationMethodId } from "../core/Did.js"
import { checkRequest, type HttpSignatureError, HttpSignatureRefusalCode, HttpSignatureThrottledCode, recordNonce } from "../core/HttpSignature.js"
import { KeyNotFound, KeyResolver, type KeyResolverApi, KeyResolverUnavailable, type ResolvedKey } from "../core/KeyResolver.js"
import { Keys, type MalformedKey, type PrivateKeyInput } from "../core/Keys.js"
import { decodeUnverified } from "../core/Mandate.js"
import * as MeshClient from "../hub/MeshClient.js"
import type { ModelError, ModelProviderApi } from "../core/ModelProvider.js"
import * as ModelProviderOpenAi from "../model/ModelProviderOpenAi.js"
import { makeMemory as memoryNonceStore, NonceStore, type NonceStoreApi } from "../core/NonceStore.js"
import * as NonceStoreSql from "../sql/NonceStoreSql.js"
import { signMessage } from "../core/Proof.js"
import * as TaskGuard from "../core/TaskGuard.js"
import { TaskStore } from "../core/TaskStore.js"
import * as TaskStoreSql from "../sql/TaskStoreSql.js"
import { MESH_PROTOCOL_VERSION, VERSION } from "../core/Version.js"
import { CorrelationId } from "../http/CorrelationId.js"
import { errorBody } from "../http/ErrorBody.js"
import { LeanRequest } from "../http/LeanRequest.js"
import * as Serve from "../http/Serve.js"
import * as Sse from "../core/Sse.js"
import { fromBase64, toBase64 } from "../core/internal/bytes.js"
import { lift } from "../core/internal/lift.js"

/** What a handler declares about an action it asks the guard for. */
export interface GuardOptions {
  /** Whether the action can be undone (default false: a `reversibleOnly` mandate refuses it unless declared). */
  readonly reversible?: boolean
  /** Data scopes the action touches. */
  readonly dataScopes?: ReadonlyArray<string>
  /** LLM tokens and web requests the action spends, charged against the mandate's compute limits. */
  readonly llmTokens?: number
  readonly webRequests?: number
  /** What is asked, in words, shown to the human at a gate. */
  readonly description?: string
}

/** The run paused at a human gate; thrown (or failed) out of `guard` so the handler stops there. */
export class GatePaused extends Schema.TaggedError<GatePaused>()("GatePaused", {
  taskId: Schema.String,
  capability: Schema.String
}) {}

/** What `guard` may fail with. */
export type GuardError = AgentForbidden | AgentUnavailable | GatePaused

/** What a handler receives. */
export interface RunInput {
  readonly message: string
  readonly sessionId: string
  /** Earlier turns: from the server's memory, or as the caller sent them when the server keeps none. */
  readonly history: ReadonlyArray<ChatMessage>
  readonly context: Readonly<Record<string, unknown>>
  /** Who called (the DID for mesh-sig callers). */
  readonly caller: Caller
  readonly systemPrompt: string | undefined
  /**
   * Asks the task guard before a capability, under the mandate the caller presented: resolves when allowed, rejects
   * with `AgentForbidden` (its `code` says why), or pauses the task at a human gate (rejects with `GatePaused`;
   * let it propagate).
   */
  readonly guard: (capability: string, options?: GuardOptions) => Promise<void>
  /** `guard` as an Effect. */
  readonly guardEffect: (capability: string, options?: GuardOptions) => Effect.Effect<void, GuardError>
  /** Aborted when the run is cancelled (the server stops, or a plain request's client goes away). */
  readonly signal: AbortSignal
}

/** What a handler returns: the reply, or its chunks. */
export type HandlerOutput =
  | string
  | AsyncIterable<string>
  | Promise<string | AsyncIterable<string>>
  | Effect.Effect<string, unknown>
  | Stream.Stream<string, unknown>

/** An agent's handler. */
export type Handler = (input: RunInput) => HandlerOutput

/** A caller key resolver given as a function: DID → raw public key (bytes or publicKeyB64), or null if unknown. */
export type ResolveCallerKey = (did: string) => Uint8Array | string | null | Promise<Uint8Array | string | null>

/** How to run an agent server. */
export interface AgentServerOptions {
  readonly name: string
  /** The agent's logic; without one, `provider` and `model` make it an LLM chat agent. */
  readonly handler?: Handler
  readonly systemPrompt?: string
  /** A model provider, or the settings of an OpenAI-compatible one. */
  readonly provider?: ModelProviderApi | ModelProviderOpenAi.OpenAiCompatibleOptions
  readonly model?: string
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
  /** SQLite file for paused tasks, nonces and persistent memory. Default `.mesh/agents/<name>.db`. */
  readonly database?: string
  /** The base URL callers use, when it is not the listening address (behind a proxy). */
  readonly publicUrl?: string
  /** Capabilities listed in the discovery document. */
  readonly capabilities?: ReadonlyArray<string>
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
  readonly nonceStore?: NonceStoreApi
}

/** A running agent server. */
export interface RunningAgent {
  readonly url: string
  readonly port: number
  readonly did: string
  readonly didHash: string
  readonly publicKeyB64: string
  /** Streamed runs kept for reconnects, and the bytes of their events. */
  readonly stats: () => { readonly streamedRuns: number; readonly retainedEventBytes: number }
  readonly close: Effect.Effect<void>
}

/** The options do not describe a server that can run. */
export class AgentConfigError extends Schema.TaggedError<AgentConfigError>()("AgentConfigError", {
  code: Schema.Literal("INVALID_CONFIG"),
  message: Schema.String
}) {}

/** The event types of a streamed run. */
export type RunEventType = "chunk" | "approval_required" | "done" | "error"

/** A streamed run, kept so a client that reconnects with `Last-Event-ID` misses nothing. */
interface StreamedRun {
  readonly id: string
  readonly principal: string
  /** The SSE frames still kept (UTF-8), from event number `first` on. */
  readonly events: Array<Uint8Array>
  first: number
  /** The events sent so far (kept or not). */
  sent: number
  /** Bytes held in `events`. */
  bytes: number
  readonly listeners: Set<() => void>
  done: boolean
  finishedAt: number
}

/** What a task carries across a pause (stored as JSON in the `TaskStore`). */
const TaskStateSchema = Schema.Struct({
  message: Schema.String,
  sessionId: Schema.String,
  history: Schema.Array(ChatMessage),
  context: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  caller: CallerSchema,
  mandate: Schema.optional(Schema.String),
  /** The guard calls that had passed, in call order, each as its step key (capability and every option). */
  journal: Schema.Array(Schema.String),
  /** The step key of the guard call the task paused at: an approval resumes that very call and no other. */
  gated: Schema.optional(Schema.String),
  /** Chunks the handler had produced (and the caller received) before the pause. */
  emitted: Schema.Number
})
type TaskState = typeof TaskStateSchema.Type
const decodeTaskState = Schema.decodeUnknownEither(TaskStateSchema)

type Outcome = { readonly _tag: "Completed"; readonly message: string } | { readonly _tag: "Paused"; readonly request: ApprovalRequest }

const DEFAULT_RETENTION_MS = 5 * 60_000
const MAX_RETAINED_RUNS = 1000
const DEFAULT_MAX_LIVE_RUNS = 256
/** How often finished streamed runs past their retention are let go (or every `runRetentionMs`, if shorter). */
const PRUNE_INTERVAL_MS = 60_000
/** Bytes of SSE frames one streamed run keeps for reconnects; older events are let go. */
const MAX_RUN_RETAINED_BYTES = 4 * 1024 * 1024
/** Default bytes of SSE frames all streamed runs together keep for reconnects. */
export const DEFAULT_MAX_RETAINED_EVENT_BYTES = 64 * 1024 * 1024
const SSE = Sse.CONTENT_TYPE
const utf8Encoder = new TextEncoder()
const ANONYMOUS: Caller = { auth: "none", principal: "anonymous" }
const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"])

const forbidden = (code: ForbiddenCode, message: string, reason?: string) =>
  new AgentForbidden(reason === undefined ? { code, message } : { code, message, reason })
const storeUnavailable = (e: { readonly message: string }) => new AgentUnavailable({ code: "STORE_UNAVAILABLE", message: e.message })

const isRunError = (e: unknown): e is RunError =>
  e instanceof AgentForbidden || e instanceof AgentNotFound || e instanceof AgentConflict || e instanceof HandlerFailed ||
  e instanceof ProviderFailed || e instanceof AgentUnavailable || e instanceof AgentBadRequest

const isStream = (u: unknown): u is Stream.Stream<string, unknown> => typeof u === "object" && u !== null && Stream.StreamTypeId in u
const isAsyncIterable = (u: unknown): u is AsyncIterable<string> =>
  typeof u === "object" && u !== null && Symbol.asyncIterator in u

/**
 * An async iterable whose early release aborts first and does not wait: a generator suspended at an `await` only
 * settles `return()` once that await does, which may be never (an await on the very signal being aborted).
 */
const releasing = (iterable: AsyncIterable<string>, abort: () => void): AsyncIterable<string> => ({
  [Symbol.asyncIterator]: () => {
    const inner = iterable[Symbol.asyncIterator]()
    let finished = false
    return {
      next: () =>
        inner.next().then((r) => {
          if (r.done === true) finished = true
          return r
        }),
      return: () => {
        // The stream releases its iterator after the last item too; only an early release is a cancellation.
        if (!finished) abort()
        void Promise.resolve(inner.return?.()).catch(() => undefined)
        return Promise.resolve({ done: true, value: undefined })
      }
    }
  }
})

/**
 * Runs a handler's output, giving each chunk to `onChunk`; `abort` runs when an async iterable is let go before its
 * end. Only streams and iterables go through `Stream`: a one-element stream costs far more than the reply.
 */
const consume = (output: HandlerOutput, onChunk: (chunk: unknown) => void, abort: () => void): Effect.Effect<void, unknown> => {
  const iterate = (it: AsyncIterable<string>) =>
    Stream.runForEach(Stream.fromAsyncIterable(releasing(it, abort), (e) => e), (chunk) => Effect.sync(() => onChunk(chunk)))
  if (typeof output === "string") return Effect.sync(() => onChunk(output))
  if (isStream(output)) return Stream.runForEach(output, (chunk) => Effect.sync(() => onChunk(chunk)))
  if (Effect.isEffect(output)) return Effect.map(output, onChunk)
  if (isAsyncIterable(output)) return iterate(output)
  return Effect.flatMap(
    Effect.tryPromise({ try: () => output, catch: (e) => e }),
    (v): Effect.Effect<void, unknown> =>
      typeof v === "string" ? Effect.sync(() => onChunk(v)) : isAsyncIterable(v) ? iterate(v) : Effect.die(new Error("handler resolved to neither a string nor an async iterable"))
  )
}

/** A JSON response kept as text: the lean writer sends it as is, with its length (no encode and decode again). */
const jsonResponse = (body: unknown, options?: { readonly status?: number }): HttpServerResponse.HttpServerResponse => {
  const text = JSON.stringify(body)
  return HttpServerResponse.raw(text, {
    ...options,
    contentType: "application/json",
    headers: { "content-length": String(Buffer.byteLength(text)) }
  })
}

const sseFrame = (id: string, type: RunEventType, data: unknown): Uint8Array =>
  utf8Encoder.encode(Sse.encodeEvent({ id, event: type, data: JSON.stringify(data) }))

const acceptsStream = (req: HttpServerRequest.HttpServerRequest): boolean => (req.headers["accept"] ?? "").includes(SSE)

const bodyOf = (req: HttpServerRequest.HttpServerRequest): Effect.Effect<Uint8Array> =>
  req instanceof LeanRequest ? Effect.succeed(req.body) : Effect.orDie(Effect.map(req.arrayBuffer, (b) => new Uint8Array(b)))

/** A resolver from a function: raw keys at version 1; a function that throws or rejects is an unavailable resolver. */
const resolverFromFunction = (f: ResolveCallerKey): KeyResolverApi => ({
  resolve: (did) => {
    const unavailable = (e: unknown) => new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: `resolveCallerKey failed: ${String(e)}`, did })
    const settle = (key: Uint8Array | string | null): Effect.Effect<ResolvedKey, KeyNotFound> => {
      if (key === null) return Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `no key known for ${did}`, did }))
      try {
        return Effect.succeed({ publicKey: typeof key === "string" ? fromBase64(key) : key, keyVersion: 1 })
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

const isRefusal = Schema.is(HttpSignatureRefusalCode)
const isThrottled = Schema.is(HttpSignatureThrottledCode)

/** A refused signature as the agent answers it: 401, 429 over the nonce quota, 503 when it cannot decide. */
const signatureError = ({ code, message, retryAfterSeconds }: HttpSignatureError): AgentUnauthorized | AgentRateLimited | AgentUnavailable =>
  isRefusal(code)
    ? new AgentUnauthorized({ code, message })
    : isThrottled(code)
      ? new AgentRateLimited({ code, message, retryAfterSeconds: retryAfterSeconds ?? 1 })
      : new AgentUnavailable({ code, message })

const sha256 = (s: string): Buffer => crypto.createHash("sha256").update(s).digest()

/** A guard call as one string: the capability and every option, with defaults filled in. */
const stepKey = (capability: string, o: GuardOptions): string =>
  JSON.stringify([capability, o.reversible ?? false, o.dataScopes ?? [], o.llmTokens ?? 0, o.webRequests ?? 0, o.description ?? ""])

/** Where `mesh agent` and `serve` keep an agent's database unless told otherwise. */
export const defaultDatabase = (name: string): string => `.mesh/agents/${name.replace(/[^A-Za-z0-9._-]/g, "_")}.db`

/** Starts an agent server; it stops when the scope closes. */
export const make = (
  options: AgentServerOptions
): Effect.Effect<RunningAgent, AgentConfigError | Database.DatabaseError | Serve.ServeError | InvalidDid | MalformedKey, Scope.Scope | Keys> =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const auth = options.auth ?? "none"
    const config = (message: string) => Effect.fail(new AgentConfigError({ code: "INVALID_CONFIG", message }))
    if (typeof options.name !== "string" || options.name.length === 0) return yield* config("name is required")
    if (options.handler === undefined && (options.provider === undefined || options.model === undefined)) {
      return yield* config("give a handler, or a provider and a model")
    }
    if (auth === "bearer" && (options.bearerTokens ?? []).length === 0 && options.verifyBearer === undefined) {
      return yield* config("auth bearer needs bearerTokens or verifyBearer")
    }
    if (auth === "mesh-sig" && options.resolveCallerKey === undefined && options.hubUrl === undefined) {
      return yield* config("auth mesh-sig needs resolveCallerKey or hubUrl to find caller keys")
    }
    if (auth === "mesh-sig" && options.publicUrl === undefined && !LOOPBACK.has(options.host ?? "127.0.0.1")) {
      return yield* config("auth mesh-sig on a non-loopback address needs publicUrl: the URL callers sign")
    }

    // Identity: a DID with its key, or a fresh key nobody else knows (fine for local experiments only).
    const wanted = options.did ?? `did:mesh:${options.name.toLowerCase().replace(/[^a-z0-9:._-]/g, "-")}`
    const did = normalizeDid(wanted) ?? (yield* config(`${wanted} is not a did:mesh DID${options.did === undefined ? "; pass did" : ""}`))
    const privateKey = options.privateKey === undefined ? yield* keys.generate : yield* keys.importPrivateKey(options.privateKey)
    if (options.privateKey === undefined) {
      yield* Effect.logWarning(`agent ${options.name}: no privateKey given; signing as ${did} with a fresh key nobody can resolve`)
    }
    const publicKeyB64 = toBase64(privateKey.publicKey)

    // Stores: paused tasks, nonces and persistent memory share one SQLite file.
    const database = options.database ?? defaultDatabase(options.name)
    const db = yield* Layer.build(Database.layerSqlite(database))
    const taskStore = Context.get(yield* Layer.build(TaskStoreSql.layer.pipe(Layer.provide(Layer.succeedContext(db)))), TaskStore)
    // An in-memory database dies with the process anyway: its nonces may as well live in (bounded) memory, which
    // costs a fraction of a SQL round trip per request.
    const nonceStore =
      options.nonceStore !== undefined
        ? options.nonceStore
        : database === ":memory:"
        ? memoryNonceStore()
        : Context.get(yield* Layer.build(NonceStoreSql.layer.pipe(Layer.provide(Layer.succeedContext(db)))), NonceStore)
    const memoryMode = options.memory ?? "none"
    const memory: AgentMemory.AgentMemoryApi =
      memoryMode === "persistent"
        ? yield* AgentMemorySql.make().pipe(Effect.provide(Layer.succeedContext(db)))
        : memoryMode === "session"
          ? AgentMemory.makeSession()
          : AgentMemory.none

    const http = yield* Layer.build(FetchHttpClient.layer)
    const resolver: KeyResolverApi =
      options.resolveCallerKey === undefined
        ? options.hubUrl === undefined
          ? noResolver
          : Context.get(yield* Layer.build(MeshClient.layerKeyResolver({ hubUrl: options.hubUrl }).pipe(Layer.provide(Layer.succeedContext(http)))), KeyResolver)
        : typeof options.resolveCallerKey === "function"
          ? resolverFromFunction(options.resolveCallerKey)
          : options.resolveCallerKey
    const guard = yield* TaskGuard.make.pipe(
      Effect.provideService(KeyResolver, resolver),
      Effect.provideService(TaskStore, taskStore)
    )
    const provider: ModelProviderApi | undefined =
      options.provider === undefined
        ? undefined
        : "chat" in options.provider
          ? options.provider
          : yield* ModelProviderOpenAi.make(options.provider).pipe(Effect.provide(Layer.succeedContext(http)))

    const tolerance = options.clockToleranceMs ?? 30_000
    const retention = options.runRetentionMs ?? DEFAULT_RETENTION_MS
    const maxLiveRuns = options.maxLiveRuns ?? DEFAULT_MAX_LIVE_RUNS
    const startedAt = yield* Clock.currentTimeMillis
    const scope = yield* Effect.scope
    const runtime = yield* Effect.runtime<never>()
    const runPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
      Runtime.runPromiseExit(runtime)(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        const failure = Cause.failureOption(exit.cause)
        throw failure._tag === "Some" ? failure.value : Cause.squash(exit.cause)
      })

    // --- running a task -------------------------------------------------------------------------------------

    /** The mutable side of one execution of the handler. */
    interface Execution {
      readonly state: TaskState
      /** The approval being applied on resume, consumed by the guard call with the very step it was asked for. */
      approval: { readonly step: string; readonly decision: "approve" | "deny" } | undefined
      passed: Array<string>
      calls: number
      produced: number
      paused: ApprovalRequest | undefined
      pausing: boolean
      /** Set when the execution is over (finished, failed or cancelled): its guard allows nothing more. */
      ended: boolean
    }

    const pause = (x: Execution, capability: string, guardOptions: GuardOptions, step: string) =>
      Effect.gen(function* () {
        // Concurrent guard calls may both reach a gate: the first pauses the task, the others only stop.
        if (x.pausing) return yield* Effect.fail(new GatePaused({ taskId: x.paused?.taskId ?? "", capability }))
        x.pausing = true
        const token = x.state.mandate!
        const decoded = decodeUnverified(token)
        if (Either.isLeft(decoded)) return yield* Effect.fail(forbidden("MANDATE_INVALID", decoded.left.message, decoded.left.reason))
        const mandate = decoded.right
        const now = yield* Clock.currentTimeMillis
        const taskId = `task_${crypto.randomUUID()}`
        const state: TaskState = { ...x.state, journal: x.passed.slice(), gated: step, emitted: x.produced }
        yield* taskStore
          .pause({
            taskId,
            owner: did,
            capability,
            mandateJti: mandate.jti,
            grantor: mandate.grantor,
            mandate: token,
            state,
            createdAt: now,
            expiresAt: mandate.expiresAt * 1000
          })
          .pipe(Effect.catchTags({ TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e)), PauseRefused: (e) => Effect.die(e) }))
        x.paused = {
          taskId,
          capability,
          mandateJti: mandate.jti,
          grantor: mandate.grantor,
          asked: {
            capability,
            reversible: guardOptions.reversible ?? false,
            ...(guardOptions.description === undefined ? {} : { description: guardOptions.description }),
            ...(guardOptions.dataScopes === undefined ? {} : { dataScopes: guardOptions.dataScopes })
          },
          expiresAt: new Date(mandate.expiresAt * 1000).toISOString()
        }
        yield* Effect.logInfo(`task ${taskId} paused at a human gate for ${capability}`)
        return yield* Effect.fail(new GatePaused({ taskId, capability }))
      })

    const guardFor = (x: Execution) => (capability: string, guardOptions: GuardOptions = {}): Effect.Effect<void, GuardError> =>
      Effect.suspend(() => {
        // Once paused, nothing more may happen under this execution; once it is over, nothing at all.
        if (x.paused !== undefined) return Effect.fail(new GatePaused({ taskId: x.paused.taskId, capability }))
        if (x.ended) return Effect.fail(forbidden("RUN_CANCELLED", `the run is over; ${capability} is not allowed`))
        const i = x.calls++
        const step = stepKey(capability, guardOptions)
        const journal = x.state.journal
        // A replayed call passes only if it asks exactly what passed before (capability and every option).
        if (i < journal.length && journal[i] === step && x.passed.length > i) return Effect.void
        // Diverged from the journal (or past it): from here every call is checked afresh.
        x.passed.length = Math.min(x.passed.length, i)
        const token = x.state.mandate
        if (token === undefined) return Effect.fail(forbidden("MANDATE_REQUIRED", `${capability} needs a task mandate; send one as "mandate"`))
        let humanApproved = false
        if (x.approval !== undefined && x.approval.step === step) {
          const decision = x.approval.decision
          x.approval = undefined
          if (decision === "deny") return Effect.fail(forbidden("HUMAN_GATE_DENIED", `a human denied ${capability}`))
          humanApproved = true
        }
        return guard
          .check(token, {
            presenter: did,
            capability,
            reversible: guardOptions.reversible ?? false,
            sandboxed: options.sandboxed ?? false,
            humanApproved,
            ...(guardOptions.dataScopes === undefined ? {} : { dataScopes: guardOptions.dataScopes }),
            ...(guardOptions.llmTokens === undefined ? {} : { llmTokens: guardOptions.llmTokens }),
            ...(guardOptions.webRequests === undefined ? {} : { webRequests: guardOptions.webRequests })
          })
          .pipe(
            Effect.zipRight(Effect.sync(() => void x.passed.push(step))),
            Effect.catchTags({
              TaskConstraintViolation: (e) =>
                e.code === "HUMAN_GATE_REQUIRED" ? pause(x, capability, guardOptions, step) : Effect.fail(forbidden(e.code, e.message, e.reason)),
              TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e))
            })
          )
      })

    const providerFailed = (e: ModelError) =>
      new ProviderFailed({ code: e.code, message: e.message, ...(e.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: e.retryAfterSeconds }) })

    /** The LLM chat agent: system prompt, history, message → the provider. */
    const chatHandler = (input: RunInput, streaming: boolean): HandlerOutput => {
      const messages: Array<ChatMessage> = [
        ...(input.systemPrompt === undefined ? [] : [{ role: "system" as const, content: input.systemPrompt }]),
        // Only the operator's system prompt: a caller's history may not slip in system turns of its own.
        ...input.history.filter((m) => m.role !== "system"),
        { role: "user", content: input.message }
      ]
      const request = { model: options.model!, messages }
      return streaming
        ? Stream.mapError(provider!.stream(request), providerFailed)
        : Effect.mapError(Effect.map(provider!.chat(request), (r) => r.text), providerFailed)
    }

    /** Runs the handler once over a task state; `emit` gets each new chunk. */
    const execute = (
      x: Execution,
      streaming: boolean,
      emit: (chunk: string) => void
    ): Effect.Effect<Outcome, RunError> =>
      Effect.gen(function* () {
        const skip = x.state.emitted
        // Made on first use: most handlers never look at their signal.
        let controller: AbortController | undefined
        // Cancelling ends the execution first, so a handler woken by the abort finds its guard closed.
        const cancel = () => {
          x.ended = true
          controller?.abort()
        }
        const guardEffect = guardFor(x)
        const input: RunInput = {
          message: x.state.message,
          sessionId: x.state.sessionId,
          history: x.state.history,
          context: x.state.context,
          caller: x.state.caller,
          systemPrompt: options.systemPrompt,
          guard: (capability, o) => runPromise(guardEffect(capability, o)),
          guardEffect,
          get signal() {
            controller ??= new AbortController()
            if (x.ended) controller.abort()
            return controller.signal
          }
        }
        let text = ""
        const output = yield* Effect.try({
          try: () => (options.handler === undefined ? chatHandler(input, streaming) : options.handler(input)),
          catch: (e) => e
        }).pipe(Effect.either)
        const run = Either.isLeft(output)
          ? Effect.fail(output.left)
          : consume(output.right, (chunk) => {
              if (typeof chunk !== "string") return
              text += chunk
              if (++x.produced > skip) emit(chunk)
            }, cancel)
        const exit = yield* Effect.exit(
          run.pipe(
            Effect.onInterrupt(() => Effect.sync(cancel)),
            Effect.ensuring(Effect.sync(() => void (x.ended = true)))
          )
        )
        if (x.paused !== undefined) return { _tag: "Paused", request: x.paused } as const
        if (Exit.isFailure(exit)) {
          if (Cause.isInterruptedOnly(exit.cause)) return yield* Effect.interrupt
          const failure = Cause.failureOption(exit.cause)
          const error = failure._tag === "Some" ? failure.value : Cause.squash(exit.cause)
          if (isRunError(error)) return yield* Effect.fail(error)
          yield* Effect.logError("handler failed", exit.cause)
          return yield* Effect.fail(new HandlerFailed({ code: "HANDLER_FAILED", message: "the agent's handler failed" }))
        }
        yield* memory
          .append(did, x.state.caller.principal, x.state.sessionId, [{ role: "user", content: x.state.message }, { role: "assistant", content: text }])
          .pipe(Effect.mapError(storeUnavailable))
        return { _tag: "Completed", message: text } as const
      })

    // --- streamed runs, kept for reconnects -----------------------------------------------------------------

    const runs = new Map<string, StreamedRun>()
    const maxRetained = options.maxRetainedEventBytes ?? DEFAULT_MAX_RETAINED_EVENT_BYTES
    const maxPerRun = Math.min(MAX_RUN_RETAINED_BYTES, maxRetained)
    /** Bytes held in the events of every kept run. */
    let retained = 0

    /** Lets a run's events go; a follower still reading it ends, and a reconnect finds it gone. */
    const drop = (run: StreamedRun) => {
      runs.delete(run.id)
      retained -= run.bytes
      run.bytes = 0
      run.events.length = 0
      run.first = run.sent
      for (const l of run.listeners) l()
    }

    const prune = (now: number) => {
      for (const run of runs.values()) {
        if (run.done && (now - run.finishedAt > retention || runs.size > MAX_RETAINED_RUNS)) drop(run)
      }
    }

    // Finished runs are let go on a schedule too, not only when a new run starts: an idle server frees them as well.
    yield* Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) => Effect.sync(() => prune(now))),
      Effect.repeat(Schedule.spaced(Duration.millis(Math.min(retention, PRUNE_INTERVAL_MS)))),
      Effect.forkIn(scope)
    )

    /** Lets finished runs go, those that finished first first, until at most `limit` bytes are kept. */
    const evictFinished = (limit: number) => {
      if (retained <= limit) return
      const finished = [...runs.values()].filter((r) => r.done).sort((a, b) => a.finishedAt - b.finishedAt)
      for (const run of finished) {
        if (retained <= limit) return
        drop(run)
      }
    }

    const shift = (run: StreamedRun) => {
      const n = run.events.shift()!.length
      run.bytes -= n
      retained -= n
      run.first++
    }

    const push = (run: StreamedRun, type: RunEventType, data: unknown) => {
      const frame = sseFrame(`${run.id}:${run.sent++}`, type, data)
      run.events.push(frame)
      run.bytes += frame.length
      retained += frame.length
      // A long run keeps only its latest events for reconnects: memory stays bounded per run and across runs.
      while (run.bytes > maxPerRun && run.events.length > 1) shift(run)
      evictFinished(maxRetained)
      while (retained > maxRetained && run.events.length > 1) shift(run)
      for (const l of run.listeners) l()
    }

    /** The SSE bytes of a run from event `from` on, following it live until it ends. */
    const follow = (run: StreamedRun, from: number): Stream.Stream<Uint8Array> =>
      Stream.async<Uint8Array>((emit) => {
        let next = from
        const pump = (): boolean => {
          // A follower that fell behind what is kept ends here; reconnecting tells it those events are gone.
          if (next < run.first) {
            void emit.end()
            return true
          }
          while (next < run.sent) void emit.single(run.events[next++ - run.first]!)
          if (run.done) void emit.end()
          return run.done
        }
        if (pump()) return
        const listener = () => {
          if (pump()) run.listeners.delete(listener)
        }
        run.listeners.add(listener)
        return Effect.sync(() => void run.listeners.delete(listener))
      })

    const sseResponse = (run: StreamedRun, from: number) =>
      HttpServerResponse.stream(follow(run, from), { contentType: SSE, headers: Sse.RESPONSE_HEADERS })

    /** Starts `x` in the background, streaming its events; the run outlives the request that started it. */
    const startStreamed = (x: Execution, caller: Caller, cid: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        prune(now)
        let live = 0
        for (const r of runs.values()) if (!r.done) live++
        if (live >= maxLiveRuns) {
          return yield* Effect.fail(new AgentUnavailable({ code: "AGENT_BUSY", message: `${live} streamed runs are in progress; retry shortly`, retryAfterSeconds: 1 }))
        }
        // Room for a new run: finished runs give way; live runs alone at the cap make the server busy.
        evictFinished(maxRetained - 1)
        if (retained >= maxRetained) {
          return yield* Effect.fail(
            new AgentUnavailable({ code: "AGENT_BUSY", message: `streamed runs in progress hold ${retained} bytes of events; retry shortly`, retryAfterSeconds: 1 })
          )
        }
        const run: StreamedRun = {
          id: crypto.randomUUID(),
          principal: caller.principal,
          events: [],
          first: 0,
          sent: 0,
          bytes: 0,
          listeners: new Set(),
          done: false,
          finishedAt: 0
        }
        runs.set(run.id, run)
        const finish = (type: RunEventType, data: unknown) =>
          Effect.flatMap(Clock.currentTimeMillis, (t) =>
            Effect.sync(() => {
              push(run, type, data)
              run.done = true
              run.finishedAt = t
              for (const l of run.listeners) l()
            })
          )
        yield* execute(x, true, (text) => push(run, "chunk", { text })).pipe(
          Effect.matchEffect({
            onSuccess: (outcome) =>
              outcome._tag === "Completed"
                ? finish("done", { message: outcome.message, sessionId: x.state.sessionId } satisfies RunReply)
                : finish("approval_required", { status: "approval_required", sessionId: x.state.sessionId, approvalRequired: outcome.request } satisfies ApprovalRequired),
            onFailure: (e) => finish("error", JSON.parse(errorBody({ ...e }, e._tag, e.message, e.code, cid)))
          }),
          Effect.onInterrupt(() => finish("error", JSON.parse(errorBody(undefined, "HandlerFailed", "the server stopped", "HANDLER_FAILED", cid)))),
          Effect.forkIn(scope)
        )
        return sseResponse(run, 0)
      })

    /** A reconnect: the run named by `Last-Event-ID`, from the event after it. */
    const reconnect = (req: HttpServerRequest.HttpServerRequest, lastEventId: string, caller: Caller) =>
      Effect.gen(function* () {
        const bad = (message: string) => Effect.fail(new AgentBadRequest({ code: "INVALID_REQUEST", message }))
        // Without a stream to continue, a Last-Event-ID must not start the work a second time.
        if (!acceptsStream(req)) return yield* bad("Last-Event-ID continues a stream: send Accept: text/event-stream")
        const m = /^([0-9a-f-]{36}):(\d{1,9})$/.exec(lastEventId)
        if (m === null) return yield* bad("Last-Event-ID is not an event id of this server")
        const run = runs.get(m[1]!)
        if (run === undefined) return yield* Effect.fail(new AgentNotFound({ code: "RUN_NOT_FOUND", message: "that run is unknown or no longer kept" }))
        if (run.principal !== caller.principal) return yield* Effect.fail(forbidden("NOT_RUN_OWNER", "that run was started by another caller"))
        const from = Number(m[2]) + 1
        if (from > run.sent) return yield* bad("Last-Event-ID names an event this run has not sent")
        if (from < run.first) return yield* Effect.fail(new AgentNotFound({ code: "RUN_NOT_FOUND", message: `events before ${run.first} of that run are no longer kept` }))
        return sseResponse(run, from)
      })

    const answer = (x: Execution, req: HttpServerRequest.HttpServerRequest, caller: Caller) =>
      Effect.gen(function* () {
        const cid = yield* CorrelationId
        if (acceptsStream(req)) return yield* startStreamed(x, caller, cid)
        const outcome = yield* execute(x, false, () => undefined)
        return outcome._tag === "Completed"
          ? jsonResponse({ message: outcome.message, sessionId: x.state.sessionId } satisfies RunReply)
          : jsonResponse(
              { status: "approval_required", sessionId: x.state.sessionId, approvalRequired: outcome.request } satisfies ApprovalRequired,
              { status: 202 }
            )
      })

    const run = (payload: RunRequest) =>
      Effect.gen(function* () {
        const req = yield* HttpServerRequest.HttpServerRequest
        const caller = yield* CurrentCaller
        const lastEventId = req.headers["last-event-id"]
        if (lastEventId !== undefined) return yield* reconnect(req, lastEventId, caller)
        if (payload.mandate !== undefined && caller.did !== undefined) yield* presentedByGrantor(payload.mandate, caller.did)
        const sessionId = payload.sessionId ?? crypto.randomUUID()
        const history =
          memory.mode === "none" ? (payload.history ?? []) : yield* Effect.mapError(memory.load(did, caller.principal, sessionId), storeUnavailable)
        const state: TaskState = {
          message: payload.message,
          sessionId,
          history,
          context: payload.context ?? {},
          caller,
          ...(payload.mandate === undefined ? {} : { mandate: payload.mandate }),
          journal: [],
          emitted: 0
        }
        return yield* answer(x0(state), req, caller)
      })

    /**
     * Under mesh-sig a task mandate is bound to its presenter: the leaf is granted to this agent (`aud`, checked by
     * the guard) by the one who calls with it (`iss`). Otherwise a mandate seen once could be replayed by anyone to
     * make this agent act on its grantor's authority. Under bearer and none the caller has no DID: the token is a
     * bearer credential (docs/agent.md §4). A token that does not decode is refused by the guard on first use.
     */
    const presentedByGrantor = (token: string, callerDid: string): Effect.Effect<void, AgentForbidden> => {
      const decoded = decodeUnverified(token)
      if (Either.isLeft(decoded)) return Effect.void
      const grantor = normalizeDid(decoded.right.grantor) ?? decoded.right.grantor
      return grantor === callerDid
        ? Effect.void
        : Effect.fail(forbidden("MANDATE_GRANTOR_MISMATCH", `the mandate was granted by ${grantor}, not by the caller ${callerDid}`))
    }

    const x0 = (state: TaskState, approval?: Execution["approval"]): Execution => ({
      state,
      approval,
      passed: state.journal.slice(),
      calls: 0,
      produced: 0,
      paused: undefined,
      pausing: false,
      ended: false
    })

    const resume = (payload: { readonly taskId: string; readonly approval: unknown }) =>
      Effect.gen(function* () {
        const req = yield* HttpServerRequest.HttpServerRequest
        const caller = yield* CurrentCaller
        const lastEventId = req.headers["last-event-id"]
        if (lastEventId !== undefined) return yield* reconnect(req, lastEventId, caller)
        // The reply (and the session) belong to whoever started the task: only they, or the grantor, may resume it.
        const found = yield* Effect.mapError(taskStore.paused(payload.taskId), storeUnavailable)
        if (Option.isSome(found) && found.value.owner === did) {
          const started = decodeTaskState(found.value.state)
          if (Either.isRight(started) && started.right.caller.principal !== caller.principal && caller.did !== found.value.grantor) {
            return yield* Effect.fail(forbidden("NOT_TASK_OWNER", "only the caller who started the task, or its grantor, may resume it"))
          }
        }
        // Finds the task, verifies the approval, and only then claims it: of concurrent resumes exactly one wins.
        const { decision, task: claimed } = yield* resumeTask({ taskId: payload.taskId, owner: did, approval: payload.approval }, resolver, {
          clockToleranceMs: tolerance
        }).pipe(
          Effect.provideService(Keys, keys),
          Effect.provideService(TaskStore, taskStore),
          Effect.catchTags({
            ApprovalError: (e) =>
              Effect.fail(e.code === "RESOLVER_UNAVAILABLE" ? new AgentUnavailable({ code: "RESOLVER_UNAVAILABLE", message: e.message }) : forbidden(e.code, e.message)),
            TaskNotPaused: (e) =>
              Effect.fail(
                e.code === "TASK_NOT_FOUND" ? new AgentNotFound({ code: "TASK_NOT_FOUND", message: e.message }) : new AgentConflict({ code: e.code, message: e.message })
              ),
            TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e))
          })
        )
        const state = decodeTaskState(claimed.state)
        if (Either.isLeft(state)) return yield* Effect.die(new Error(`task ${claimed.taskId} has an unreadable state`))
        yield* Effect.logInfo(`task ${claimed.taskId} ${decision === "deny" ? "denied" : "approved"} for ${claimed.capability}`)
        return yield* answer(x0(state.right, { step: state.right.gated ?? "", decision }), req, caller)
      })

    // --- auth, discovery, serving ---------------------------------------------------------------------------

    const tokenDigests = (options.bearerTokens ?? []).map(sha256)
    const bearerOk = (token: string, digest: Buffer): Effect.Effect<boolean> => {
      // Compare against every token, so the time taken says nothing about which one (or whether any) matched.
      let ok = false
      for (const d of tokenDigests) ok = crypto.timingSafeEqual(d, digest) || ok
      if (ok || options.verifyBearer === undefined) return Effect.succeed(ok)
      const verify = options.verifyBearer
      return lift(() => verify(token)).pipe(
        Effect.map((v) => v === true),
        Effect.tapError((e) => Effect.logWarning("verifyBearer threw; refusing the token", e)),
        Effect.orElseSucceed(() => false)
      )
    }
    const allowed = options.allowedCallers === undefined ? undefined : new Set(options.allowedCallers.map((d) => normalizeDid(d) ?? d))

    const authenticate: Effect.Effect<Caller, AgentUnauthorized | AgentForbidden | AgentRateLimited | AgentUnavailable, HttpServerRequest.HttpServerRequest> = auth === "none" ? Effect.succeed(ANONYMOUS) : Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      if (auth === "bearer") {
        const header = req.headers["authorization"]
        const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
        if (m === null) return yield* Effect.fail(new AgentUnauthorized({ code: "AUTH_REQUIRED", message: "send Authorization: Bearer <token>" }))
        const digest = sha256(m[1]!)
        if (!(yield* bearerOk(m[1]!, digest))) return yield* Effect.fail(new AgentUnauthorized({ code: "INVALID_TOKEN", message: "the bearer token is not accepted" }))
        return { auth, principal: `bearer:${digest.toString("hex").slice(0, 16)}` }
      }
      // The URL callers must have signed is this agent's own, never one the request names in its Host header:
      // otherwise a request signed for another agent could be replayed here.
      const target = `${(baseUrl ?? "").replace(/\/+$/, "")}${req.url}`
      const url = URL.canParse(target) ? new URL(target).href : undefined
      if (url === undefined) return yield* Effect.fail(new AgentUnauthorized({ code: "SIGNATURE_MALFORMED", message: "the request's target URI cannot be rebuilt (Host header)" }))
      const checked = yield* checkRequest(
        { method: req.method, url, headers: req.headers, body: yield* bodyOf(req) },
        { resolveKey: resolver.resolve, clockToleranceMs: tolerance }
      ).pipe(Effect.provideService(Keys, keys), Effect.mapError(signatureError))
      // Authorized before its nonce is recorded: a caller that is not allowed, however well it signs, holds no
      // room in the nonce store that allowed callers need.
      if (allowed !== undefined && !allowed.has(checked.did)) {
        return yield* Effect.fail(forbidden("CALLER_NOT_ALLOWED", `${checked.did} is not an allowed caller`))
      }
      yield* Effect.mapError(recordNonce(checked, nonceStore), signatureError)
      return { auth, did: checked.did, principal: checked.did }
    })

    let discovery: unknown = undefined
    let baseUrl = options.publicUrl
    const discoveryDocument = Effect.suspend(() =>
      discovery !== undefined
        ? Effect.succeed(discovery)
        : Effect.tap(
            signMessage(
              {
                type: "MeshAgent",
                name: options.name,
                did,
                didHash: didHash(did),
                publicKeyB64,
                meshProtocolVersion: MESH_PROTOCOL_VERSION,
                version: VERSION,
                endpoints: { run: `${baseUrl}/v1/run`, resume: `${baseUrl}/v1/resume`, health: `${baseUrl}/health` },
                auth: [auth],
                streaming: true,
                memory: memoryMode,
                capabilities: [...(options.capabilities ?? [])]
              },
              privateKey,
              verificationMethodId(did)
            ).pipe(Effect.provideService(Keys, keys), Effect.orDie),
            (doc) => Effect.sync(() => void (discovery = doc))
          )
    )

    const handlers = Layer.mergeAll(
      HttpApiBuilder.group(AgentApi, "run", (h) =>
        h.handle("run", ({ payload }) => run(payload)).handle("resume", ({ payload }) => resume(payload))
      ),
      HttpApiBuilder.group(AgentApi, "info", (h) =>
        h
          .handle("health", () =>
            Effect.map(Clock.currentTimeMillis, (now) => ({
              status: "ok" as const,
              name: options.name,
              did,
              version: VERSION,
              uptimeSeconds: Math.floor((now - startedAt) / 1000)
            }))
          )
          .handle("discovery", () => discoveryDocument)
      ),
      HttpApiBuilder.group(AgentApi, "docs", (h) => h.handle("openapi", () => Effect.succeed(OpenApi.fromApi(AgentApi))))
    ).pipe(Layer.provide(Layer.succeed(AgentAuth, authenticate)))

    const server = yield* Serve.make(AgentApi, handlers, {
      ...Serve.withPublicUrl(options.serving, options.publicUrl),
      port: options.port ?? 0,
      host: options.host ?? "127.0.0.1",
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
    })
    baseUrl ??= server.url
    yield* Effect.logInfo(`agent ${options.name} (${did}) listening on ${server.url}, auth ${auth}, memory ${memoryMode}`)
    const stats = () => ({ streamedRuns: runs.size, retainedEventBytes: retained })
    return { url: server.url, port: server.port, did, didHash: didHash(did), publicKeyB64, stats, close: server.close }
  })

/** `make` as a layer: the server runs while the layer is alive. */
export const layer = (
  options: AgentServerOptions
): Layer.Layer<never, AgentConfigError | Database.DatabaseError | Serve.ServeError | InvalidDid | MalformedKey, Keys> =>
  Layer.scopedDiscard(make(options))
