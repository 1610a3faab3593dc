/**
 * One execution of the handler over a task state, and the guard it hands the handler. The mutable state of an
 * execution (the guard calls so far, the chunks produced, whether it paused or ended) lives in one object per
 * execution, made and read here only.
 *
 * Human gates replay: a task paused at a gate keeps its input and the list of guard calls that had passed; on resume
 * the handler runs again from the start, guard calls identical to those pass at once (nothing is charged twice), the
 * approval applies to the one call identical to the paused one, and chunks already streamed are not sent again. A
 * handler that takes other steps is checked afresh from the first difference. So a handler should put each side
 * effect after the guard that covers it and produce the same steps for the same input.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type { ApprovalRequest, CommitRequest } from "./AgentApi.js"
import { AgentBadRequest, AgentConflict, AgentForbidden, AgentNotFound, AgentUnavailable, HandlerFailed, ProviderFailed, type RunError } from "./AgentError.js"
import { type Approval, forbidden, Gates, type GatesApi, stepKey, storeUnavailable, type TaskState } from "./Gates.js"
import {
  AgentHandler,
  type Charge,
  type ChargeError,
  type ComputeMeter,
  type ComputeReservation,
  consume,
  GatePaused,
  type GuardError,
  type GuardOptions,
  type HandlerOutput,
  type McpAccess,
  mcpCapability,
  type McpToolArgs,
  type RunInput,
  type TraceContext
} from "./Handler.js"
import { McpClient, type McpClientApi, McpError } from "./McpClient.js"
import * as AgentCalls from "./AgentCalls.js"
import * as Option from "effect/Option"
import { Identity } from "./Identity.js"
import { AgentMemory } from "../core/AgentMemory.js"
import * as CommitToken from "../core/CommitToken.js"
import { Keys } from "../core/Keys.js"
import { formatUsd, formatUsdString, InvalidAmount, type Micros, parseUsd } from "../core/Money.js"
import { KeyResolver } from "../core/KeyResolver.js"
import * as SpendingGuard from "../core/SpendingGuard.js"
import type { SpendingGuardApi } from "../core/SpendingGuard.js"
import { TaskStore } from "../core/TaskStore.js"
import { TaskGuard, type TaskGuardApi } from "../core/TaskGuard.js"
import { runEnded, runStarted } from "../core/MeshMetrics.js"
import { CorrelationId } from "../http/CorrelationId.js"
import { markLogged } from "../http/FailureLog.js"
import { traceContextOf, Tracing } from "../http/Tracing.js"
import { settle } from "../node/internal/promiseRuntime.js"

/** How an execution ended: the reply, or a pause at a human gate. */
export type Outcome =
  | { readonly _tag: "Completed"; readonly message: string; readonly commitToken?: string }
  | { readonly _tag: "Paused"; readonly request: ApprovalRequest }

/** The execution settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly systemPrompt?: string
  /** Whether this runtime is sandboxed (mandates with `sandbox: true` need it). Default false. */
  readonly sandboxed?: boolean
  /** The capabilities the agent declares: a run may name only these, and a commit token names one of them. */
  readonly capabilities?: ReadonlyArray<string>
}

/** Runs the handler. */
export interface ExecutionApi {
  /**
   * Runs the handler once over `state`, applying `approval` (on resume) to the guard call it was given for; `emit`
   * gets each chunk the caller has not received yet, and the reply is remembered in the session on completion.
   */
  readonly execute: (
    state: TaskState,
    approval: Approval | undefined,
    streaming: boolean,
    emit: (chunk: string) => void
  ) => Effect.Effect<Outcome, RunError>
}

/** The handler execution of one agent server. */
export class Execution extends Context.Tag("agent-mesh/agent/Execution")<Execution, ExecutionApi>() {}

/** The mutable side of one execution of the handler. */
interface Run {
  readonly state: TaskState
  /** The approval being applied on resume, consumed by the guard call with the very step it was asked for. */
  approval: Approval | undefined
  passed: Array<string>
  calls: number
  produced: number
  paused: ApprovalRequest | undefined
  pausing: boolean
  /** Set when the execution is over (finished, failed or cancelled): its guard allows nothing more. */
  ended: boolean
  /** What the handler reported it used, for the commit token. */
  cost: Micros | undefined
}

const isRunError = (e: unknown): e is RunError =>
  e instanceof AgentForbidden || e instanceof AgentNotFound || e instanceof AgentConflict || e instanceof HandlerFailed ||
  e instanceof ProviderFailed || e instanceof AgentUnavailable || e instanceof AgentBadRequest

/** Runs an Effect as a Promise that rejects with its failure (not a FiberFailure), for `guard`. */
const promiseRunner = (runtime: Runtime.Runtime<never>) => <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Runtime.runPromiseExit(runtime)(effect).then(settle)

/** The error an execution ends with: a run error as it is, anything else a logged 500 without its details. */
const failedWith = (cause: Cause.Cause<unknown>): Effect.Effect<never, RunError> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
  const failure = Cause.failureOption(cause)
  const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
  if (isRunError(error)) return Effect.fail(error)
  // Logged here, with the cause and the request's correlation id; the serving path then logs nothing more of it.
  return Effect.zipRight(
    withCorrelationId(Effect.logError("handler failed", cause)),
    Effect.fail(markLogged(new HandlerFailed({ code: "HANDLER_FAILED", message: "the agent's handler failed" })))
  )
}

/** `log` annotated with the correlation id of the request being served, when there is one. */
const withCorrelationId = <A, E, R>(log: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.serviceOption(CorrelationId), (cid) => (cid._tag === "Some" ? Effect.annotateLogs(log, "correlationId", cid.value) : log))

/** What the guard of an execution needs from the server. */
interface GuardDeps {
  readonly guard: TaskGuardApi
  readonly gates: GatesApi
  readonly did: string
  readonly sandboxed: boolean
  /** Absent where the server runs without a key resolver and task store (none of its own builds do). */
  readonly spending: SpendingGuardApi | undefined
}

/**
 * What `RunInput.charge` does for one execution: the spending guard charges the amount under the presented mandate,
 * with this agent as presenter and, unless named, as merchant; the amount is added to the run's reported cost.
 */
const chargeFor = (deps: GuardDeps, x: Run) => (usd: number | string, options: { readonly merchant?: string } = {}): Effect.Effect<Charge, ChargeError> =>
  Effect.suspend(() => {
    if (x.ended) return Effect.fail(forbidden("RUN_CANCELLED", "the run is over; nothing more may be charged"))
    const token = x.state.mandate
    if (token === undefined) {
      return Effect.fail(forbidden("MANDATE_REQUIRED", `this call is paid: send a payment or cart mandate granted to ${deps.did} as "mandate" (mesh call --mandate <token>)`))
    }
    const amount = parseUsd(usd)
    if (Either.isLeft(amount)) return Effect.fail(amount.left)
    if (deps.spending === undefined) return Effect.fail(new AgentUnavailable({ code: "STORE_UNAVAILABLE", message: "this server has no spending guard" }))
    return deps.spending.authorize(token, { amountUsd: formatUsd(amount.right), merchant: options.merchant ?? deps.did, presenter: deps.did }).pipe(
      Effect.map((a): Charge => {
        x.cost = ((x.cost ?? 0) + a.amountMicros) as Micros
        return { amountUsd: formatUsdString(a.amountMicros), mandateJti: a.mandate.jti, mandateKind: a.mandate.kind as Charge["mandateKind"] }
      }),
      Effect.catchTags({
        SpendingConstraintViolation: (e) =>
          e.code === "INVALID_AMOUNT" ? Effect.fail(new InvalidAmount({ code: "INVALID_AMOUNT", message: e.message })) : Effect.fail(forbidden(e.code, e.message, e.reason)),
        TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e))
      })
    )
  })

/** Stores the task at the gate and stops the handler there; concurrent guard calls that reach a gate only stop. */
const pause = (deps: GuardDeps, x: Run, capability: string, guardOptions: GuardOptions, step: string) =>
  Effect.gen(function* () {
    if (x.pausing) return yield* Effect.fail(new GatePaused({ taskId: x.paused?.taskId ?? "", capability }))
    x.pausing = true
    const state: TaskState = { ...x.state, journal: x.passed.slice(), emitted: x.produced }
    x.paused = yield* deps.gates.pause(state, capability, guardOptions, step)
    return yield* Effect.fail(new GatePaused({ taskId: x.paused.taskId, capability }))
  })

/** The human's decision on this step, if one was given for it: consumed by the first call that asks it. */
const humanDecision = (x: Run, step: string): Approval["decision"] | undefined => {
  if (x.approval === undefined || x.approval.step !== step) return undefined
  const decision = x.approval.decision
  x.approval = undefined
  return decision
}

/** The guard one execution hands its handler. */
const guardFor = (deps: GuardDeps, x: Run) => (capability: string, guardOptions: GuardOptions = {}): Effect.Effect<void, GuardError> =>
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
    const decision = humanDecision(x, step)
    if (decision === "deny") return Effect.fail(forbidden("HUMAN_GATE_DENIED", `a human denied ${capability}`))
    return deps.guard
      .check(token, {
        presenter: deps.did,
        capability,
        reversible: guardOptions.reversible ?? false,
        sandboxed: deps.sandboxed,
        humanApproved: decision === "approve",
        ...(guardOptions.dataScopes === undefined ? {} : { dataScopes: guardOptions.dataScopes }),
        ...(guardOptions.llmTokens === undefined ? {} : { llmTokens: guardOptions.llmTokens }),
        ...(guardOptions.webRequests === undefined ? {} : { webRequests: guardOptions.webRequests })
      })
      .pipe(
        Effect.zipRight(Effect.sync(() => void x.passed.push(step))),
        Effect.catchTags({
          TaskConstraintViolation: (e) =>
            e.code === "HUMAN_GATE_REQUIRED" ? pause(deps, x, capability, guardOptions, step) : Effect.fail(forbidden(e.code, e.message, e.reason)),
          TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e))
        })
      )
  })

const unmetered: ComputeReservation = { llmTokens: 0, settle: () => Effect.void }

/**
 * The compute meter one execution hands its handler: reservations go to the guard under the presented mandate (none
 * presented: nothing is charged), and stop once the execution is over.
 */
const meterFor = (deps: GuardDeps, x: Run): ComputeMeter => ({
  metered: x.state.mandate !== undefined,
  reserve: (llmTokens) =>
    Effect.suspend(() => {
      const token = x.state.mandate
      if (token === undefined) return Effect.succeed(unmetered)
      if (x.ended || x.paused !== undefined) return Effect.fail(forbidden("RUN_CANCELLED", "the run is over; no more model calls"))
      return deps.guard.reserveCompute(token, deps.did, { llmTokens }).pipe(
        Effect.map((mandate): ComputeReservation => ({
          llmTokens,
          settle: (spent) =>
            deps.guard.settleCompute(mandate, { llmTokens }, { llmTokens: spent }).pipe(
              // Fail-safe: the reservation stays charged as it was, so nothing can be spent past a limit.
              Effect.catchAll((e) => Effect.logWarning("could not settle a compute reservation", e))
            )
        })),
        Effect.catchTags({
          // Compute passes no human gate: that code cannot come from a reservation.
          TaskConstraintViolation: (e) => (e.code === "HUMAN_GATE_REQUIRED" ? Effect.die(e) : Effect.fail(forbidden(e.code, e.message, e.reason))),
          TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e))
        })
      )
    })
})

const notConfigured = (server: string) =>
  Effect.fail(new McpError({ code: "MCP_NOT_CONFIGURED", message: `this agent has no MCP client configured (set mcpServers or hubUrl) for ${server}` }))

/** A handler's access to one MCP server: each call asks the guard for `mcp:<server>/<tool>` first. */
const mcpFor = (
  client: McpClientApi | undefined,
  guardEffect: RunInput["guardEffect"],
  runPromise: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
) => <Tools extends McpToolArgs = McpToolArgs>(server: string): McpAccess<Tools> => {
  const listToolsEffect = () => (client === undefined ? notConfigured(server) : client.listTools(server))
  const callToolEffect = (tool: string, args: Readonly<Record<string, unknown>> = {}, options: GuardOptions = {}) =>
    client === undefined
      ? notConfigured(server)
      : Effect.zipRight(
        guardEffect(mcpCapability(server, tool), { description: `call the tool ${tool} of the MCP server ${server}`, ...options }),
        client.callTool(server, tool, args)
      )
  return {
    server,
    listToolsEffect,
    callToolEffect,
    listTools: () => runPromise(listToolsEffect()),
    callTool: (tool, args, options) => runPromise(callToolEffect(tool, args, options))
  }
}

/**
 * What the handler receives, and how it is cancelled: cancelling ends the execution first, so a handler woken by
 * the abort finds its guard closed. A class rather than an object literal: a literal with getters is built by a slow
 * path and kept as a dictionary, about a microsecond and a kilobyte per request, where this costs a few dozen
 * nanoseconds. `signal` and `trace`, made only when read, are its two getters.
 */
class HandlerInput implements RunInput {
  readonly message: string
  readonly sessionId: string
  readonly history: RunInput["history"]
  readonly context: RunInput["context"]
  readonly caller: RunInput["caller"]
  readonly capability: string | undefined
  readonly commit: RunInput["commit"]
  readonly guard: RunInput["guard"]
  readonly reportCost: RunInput["reportCost"]
  readonly charge: RunInput["charge"]
  readonly mcp: RunInput["mcp"]
  readonly call: RunInput["call"]
  readonly callEffect: RunInput["callEffect"]
  readonly callStream: RunInput["callStream"]
  readonly callStreamEffect: RunInput["callStreamEffect"]
  readonly #x: Run
  readonly #context: Context.Context<never>
  readonly #tracing: boolean
  #controller: AbortController | undefined = undefined
  constructor(
    x: Run,
    readonly guardEffect: RunInput["guardEffect"],
    readonly chargeEffect: RunInput["chargeEffect"],
    readonly compute: ComputeMeter,
    readonly systemPrompt: string | undefined,
    runPromise: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>,
    mcpClient: McpClientApi | undefined,
    calls: AgentCalls.Calls,
    context: Context.Context<never>,
    tracing: boolean
  ) {
    this.#x = x
    this.#context = context
    this.#tracing = tracing
    const state = x.state
    this.message = state.message
    this.sessionId = state.sessionId
    this.history = state.history
    this.context = state.context
    this.caller = state.caller
    this.capability = state.capability
    this.commit = state.commit
    this.guard = (capability, o) => runPromise(guardEffect(capability, o))
    this.charge = (usd, o) => runPromise(chargeEffect(usd, o))
    this.reportCost = (usd) => {
      const parsed = parseUsd(usd)
      if (Either.isLeft(parsed)) throw parsed.left
      const micros = parsed.right
      const amountUsd = x.state.commit?.amountUsd
      const budget = amountUsd === undefined ? undefined : Either.getOrUndefined(parseUsd(amountUsd))
      if (budget !== undefined && micros > budget) {
        throw new InvalidAmount({ code: "INVALID_AMOUNT", message: `reported cost ${String(usd)} USD exceeds the step's ${amountUsd} USD` })
      }
      x.cost = micros
    }
    this.mcp = mcpFor(mcpClient, guardEffect, runPromise)
    this.call = calls.call
    this.callEffect = calls.callEffect
    this.callStream = calls.callStream
    this.callStreamEffect = calls.callStreamEffect
  }
  // Read on first use: most handlers never pass it on.
  get trace(): TraceContext {
    return traceContextOf(this.#context, this.#tracing)
  }
  // Made on first use: most handlers never look at their signal.
  get signal(): AbortSignal {
    this.#controller ??= new AbortController()
    if (this.#x.ended) this.#controller.abort()
    return this.#controller.signal
  }
  /** Ends the execution of `input`, then aborts its signal if it was made (static: not a method handlers see). */
  static cancel(input: HandlerInput): void {
    input.#x.ended = true
    input.#controller?.abort()
  }
}

/**
 * The capability a run names, checked against the declared ones; for a commit, the one the token will record: the
 * run's, or the agent's only declared capability. Refused before the handler runs, so nothing is done unsigned.
 */
const capabilityOf = (state: TaskState, declared: ReadonlyArray<string>): Either.Either<string | undefined, AgentBadRequest> => {
  const refuse = (message: string) => Either.left(new AgentBadRequest({ code: "INVALID_REQUEST", message }))
  const asked = state.capability
  if (asked !== undefined && declared.length > 0 && !declared.includes(asked)) return refuse(`this agent does not offer the capability ${asked}`)
  const capability = asked ?? (declared.length === 1 ? declared[0] : undefined)
  if (state.commit !== undefined && capability === undefined) return refuse("a commit names its capability: send capability")
  return Either.right(capability)
}

/** The execution over the handler, guard, gates and memory in context. */
export const make = (options: Options): Effect.Effect<ExecutionApi, never, AgentHandler | TaskGuard | Gates | AgentMemory | Identity | Keys> =>
  Effect.gen(function* () {
    const handler = yield* AgentHandler
    const memory = yield* AgentMemory
    const identity = yield* Identity
    const { did } = identity
    const keys = yield* Keys
    const declared = options.capabilities ?? []

    /** The agent's signed receipt for a completed step; a failure to sign is the server's, logged. */
    const commitToken = (state: TaskState, commit: CommitRequest, capability: string, reply: string, cost: Micros | undefined) =>
      Effect.gen(function* () {
        const requested = commit.amountUsd === undefined ? undefined : Either.getOrUndefined(parseUsd(commit.amountUsd))
        const now = yield* Clock.currentTimeMillis
        return yield* CommitToken.sign(
          {
            sagaId: commit.sagaId,
            step: commit.step,
            capability,
            amountUsd: formatUsdString(cost ?? requested ?? (0 as Micros)),
            resultDigest: yield* CommitToken.digestResult(reply),
            at: new Date(now).toISOString(),
            issuer: did
          },
          identity.privateKey
        )
      }).pipe(
        Effect.provideService(Keys, keys),
        Effect.tapError((e) => withCorrelationId(Effect.logError(`commit token for ${state.sessionId} not signed`, e))),
        Effect.mapError(() => markLogged(new HandlerFailed({ code: "HANDLER_FAILED", message: "the agent could not sign the commit token" })))
      )
    // The spending guard runs on the stores the task guard runs on, when the server has them (every server it builds).
    const resolver = Option.getOrUndefined(yield* Effect.serviceOption(KeyResolver))
    const taskStore = Option.getOrUndefined(yield* Effect.serviceOption(TaskStore))
    const spending = resolver === undefined || taskStore === undefined
      ? undefined
      : yield* SpendingGuard.make.pipe(Effect.provideService(KeyResolver, resolver), Effect.provideService(TaskStore, taskStore), Effect.provideService(Keys, keys))
    const deps: GuardDeps = { guard: yield* TaskGuard, gates: yield* Gates, did, sandboxed: options.sandboxed ?? false, spending }
    const runtime = yield* Effect.runtime<never>()
    const runPromise = promiseRunner(runtime)
    // Optional: a server configured without MCP has none, and its handlers' MCP calls fail MCP_NOT_CONFIGURED.
    const mcpClient = Option.getOrUndefined(yield* Effect.serviceOption(McpClient))
    // Optional too: an agent without a hub has none, and its handlers' agent calls fail HUB_NOT_CONFIGURED.
    const callsOf = AgentCalls.make({ client: Option.getOrUndefined(yield* Effect.serviceOption(AgentCalls.AgentCalls)), identity, runtime })
    // Read once: the span below costs nothing per run while tracing is off.
    const tracing = yield* Tracing

    /** The reply remembered in the session, and the commit token signed when one was asked for. */
    const completed = (state: TaskState, capability: string | undefined, text: string, cost: Micros | undefined): Effect.Effect<Outcome, RunError> => {
      const outcome: Effect.Effect<Outcome, RunError> =
        state.commit === undefined || capability === undefined
          ? Effect.succeed({ _tag: "Completed", message: text })
          : Effect.map(commitToken(state, state.commit, capability, text, cost), (token): Outcome => ({ _tag: "Completed", message: text, commitToken: token }))
      // Memory none remembers nothing: no store call at all.
      if (memory.mode === "none") return outcome
      return Effect.zipRight(
        memory
          .append(did, state.caller.principal, state.sessionId, [{ role: "user", content: state.message }, { role: "assistant", content: text }])
          .pipe(Effect.mapError(storeUnavailable)),
        outcome
      )
    }

    // Plain functions and the context read once rather than a generator: this runs once per request, and a handler
    // that answers a string synchronously (the common case) completes without another effect step, and without a
    // fiber where the server runs it on the request's stack (http/RunSync.ts answers `Effect.context()`).
    const run = (state: TaskState, approval: Approval | undefined, streaming: boolean, emit: (chunk: string) => void): Effect.Effect<Outcome, RunError> =>
      Effect.flatMap(Effect.context<never>(), (context): Effect.Effect<Outcome, RunError> => {
        const asked = capabilityOf(state, declared)
        if (Either.isLeft(asked)) return Effect.fail(asked.left)
        const capability = asked.right
        const x: Run = { state, approval, passed: state.journal.slice(), calls: 0, produced: 0, paused: undefined, pausing: false, ended: false, cost: undefined }
        const guardEffect = guardFor(deps, x)
        const calls = callsOf({ mandate: state.mandate, guardEffect, context })
        const input = new HandlerInput(x, guardEffect, chargeFor(deps, x), meterFor(deps, x), options.systemPrompt, runPromise, mcpClient, calls, context, tracing)
        let text = ""
        const onChunk = (chunk: unknown) => {
          if (typeof chunk !== "string") return
          text += chunk
          if (++x.produced > state.emitted) emit(chunk)
        }
        let output: Either.Either<HandlerOutput, unknown>
        try {
          output = Either.right(handler(input, streaming))
        } catch (e) {
          output = Either.left(e)
        }
        if (Either.isRight(output) && typeof output.right === "string") {
          // What the general path below does for a string, without its effects: nothing here can be interrupted.
          runStarted()
          try {
            onChunk(output.right)
          } catch (e) {
            return failedWith(Cause.die(e))
          } finally {
            x.ended = true
            runEnded()
          }
          // A guard call the handler started without awaiting may have paused the task already.
          if (x.paused !== undefined) return Effect.succeed({ _tag: "Paused", request: x.paused })
          return completed(state, capability, text, x.cost)
        }
        const cancel = () => HandlerInput.cancel(input)
        const work = Either.isLeft(output) ? Effect.fail(output.left) : consume(output.right, onChunk, cancel)
        // Counted in flight from the moment its output is consumed; the flag keeps an interruption before that even.
        let counted = false
        return Effect.flatMap(
          Effect.exit(
            Effect.suspend(() => {
              counted = true
              runStarted()
              return work
            }).pipe(
              Effect.onInterrupt(() => Effect.sync(cancel)),
              Effect.ensuring(
                Effect.sync(() => {
                  x.ended = true
                  if (counted) runEnded()
                })
              )
            )
          ),
          (exit): Effect.Effect<Outcome, RunError> => {
            if (x.paused !== undefined) return Effect.succeed({ _tag: "Paused", request: x.paused })
            if (Exit.isFailure(exit)) return failedWith(exit.cause)
            return completed(state, capability, text, x.cost)
          }
        )
      })

    const execute: ExecutionApi["execute"] = tracing
      ? (state, approval, streaming, emit) =>
          Effect.withSpan(run(state, approval, streaming, emit), "agent.handler", { attributes: { "mesh.session_id": state.sessionId, "mesh.streaming": streaming } })
      : run

    return { execute }
  })

/** `Execution` with these settings. */
export const layer = (options: Options): Layer.Layer<Execution, never, AgentHandler | TaskGuard | Gates | AgentMemory | Identity | Keys> =>
  Layer.effect(Execution, make(options))
