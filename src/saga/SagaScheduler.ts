/**
 * Runs sagas durably. Each saga is one `@effect/workflow` workflow; each forward step and each compensation is an
 * `Activity`, so the engine journals which finished and, after a crash, replays those and re-runs only the one in
 * flight. Compensations are registered with `Workflow.withCompensation` as each step commits, so a failure runs them
 * in reverse, and only for the steps that committed.
 *
 * A re-run step must charge nobody twice, so every effect in it is idempotent under a key made of the saga id and the
 * step name: the child mandate is minted once and stored (`SagaStore.childToken`), the ledger answers a repeated
 * allocation with the first, the agent answers a repeated `Idempotency-Key` with its stored reply, and a second
 * release of an allocation is recognised as already done.
 *
 * The scheduler acts as one identity, the runner: callers grant it their spending mandate (intent or cart), it owns
 * the pool in the ledger, signs each step's payment mandate and signs its calls to agents (mesh-sig).
 *
 * Which engine runs the workflows is a layer choice (`layer`: @effect/cluster's SQL-backed `SingleRunner`, durable;
 * `layerTest`: the in-memory engine); nothing here depends on it.
 *
 * Floor: saga (docs/architecture.md §3).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import { EntityAddress } from "@effect/cluster/EntityAddress"
import { EntityId } from "@effect/cluster/EntityId"
import { EntityType } from "@effect/cluster/EntityType"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { AgentClient, type SignAs } from "../agent/AgentClient.js"
import { decodeUnverified as decodeCommitToken } from "../core/CommitToken.js"
import { toBase64Url } from "../core/internal/bytes.js"
import { normalizeDid } from "../core/Did.js"
import { Entropy } from "../core/Entropy.js"
import { KeyResolver } from "../core/KeyResolver.js"
import { Keys } from "../core/Keys.js"
import { attenuateToPayment, decodeUnverified } from "../core/Mandate.js"
import { formatUsdString, type Micros, parseUsd } from "../core/Money.js"
import { Ledger } from "../hub/Ledger.js"
import { Registry } from "../hub/Registry.js"
import {
  type AgentEntry,
  DEFAULT_SAGA_PAGE,
  type FindAgent,
  isFinal,
  MAX_SAGA_PAGE,
  plan,
  SagaBusy,
  type SagaEvent,
  type SagaInput,
  SagaInvalid,
  SagaMandateRefused,
  SagaNotFound,
  type SagaPage,
  type SagaRefused,
  type SagaResult,
  SagaUnavailable
} from "./Saga.js"
import * as SagaEngine from "./SagaEngine.js"
import * as SagaStore from "./SagaStore.js"

/** The identity that runs sagas: the grantee of callers' mandates, owner of their pools, signer of step mandates and calls. */
export type SagaRunner = SignAs

/** How the scheduler runs. */
export interface SchedulerOptions {
  readonly runner: SagaRunner
  /** How a failing compensation is retried before the saga ends `compensation_failed`; default 4 retries, exponential from 200 ms. */
  readonly compensationRetry?: Schedule.Schedule<unknown, unknown>
  /** How a call that failed for a transient reason (agent unreachable or busy) is repeated; default 5 retries, exponential from 50 ms. */
  readonly callRetry?: Schedule.Schedule<unknown, unknown>
  /** Sagas one caller may have running at once; a further submission is refused 429 `RATE_LIMITED`. Default 8. */
  readonly maxRunningPerCaller?: number
  /** Sagas running at once, all callers together; a further submission is refused 503 `OVERLOADED`. Default 64. */
  readonly maxRunning?: number
  /**
   * Steps and compensations in flight at once across every saga; the rest wait their turn, so saga work never holds
   * more of the process than this and requests keep being served. Default 8.
   */
  readonly maxStepsInFlight?: number
  /**
   * Run as one runner of a cluster sharing the sagas through the (Postgres) database, instead of owning them all
   * (`layer` only; docs/scaling.md §7).
   */
  readonly cluster?: SagaEngine.ClusterOptions
  /** How long after its creation a saga that was never handed to the engine is ended `NOT_STARTED`; default 30 s. */
  readonly notStartedAfterMs?: number
}

/** The bounds' defaults (docs/sagas.md §1, docs/security.md). */
export const DEFAULT_MAX_RUNNING_PER_CALLER = 8
/** The bounds' defaults (docs/sagas.md §1, docs/security.md). */
export const DEFAULT_MAX_RUNNING = 64
/** The bounds' defaults (docs/sagas.md §1, docs/security.md). */
export const DEFAULT_MAX_STEPS_IN_FLIGHT = 8
/**
 * How long a reader waits for news before reading the saga again anyway. News arrives in this process for sagas run
 * here, and on Postgres for sagas run by any hub (`SagaStore.changes`), so this only covers news that was lost: a
 * dropped listening connection, or another process writing the same SQLite file.
 */
const FALLBACK_WAIT = "5 seconds"
/**
 * A saga stored but never handed to the engine (its hub died between the two, before answering the submitter) is
 * ended `compensated` with code `NOT_STARTED` this long after it was created; no step of it ran, and its submitter
 * was never told it started. Every hub looks for such sagas a third of this often.
 */
export const DEFAULT_NOT_STARTED_AFTER_MS = 30_000
/** How long a refused submission is told to wait: a running saga's steps take seconds. */
const BUSY_RETRY_AFTER_SECONDS = 5

/** The operations of the scheduler. */
export interface SagaSchedulerApi {
  /** The runner's DID: callers grant their mandates to it. */
  readonly runner: string
  /**
   * Checks the saga, opens (or finds) the mandate's pool and starts the saga; answers at once, status `running`.
   * `caller` is the DID that proved it asked (over HTTP, the request's signer): it must be the mandate's grantor.
   */
  readonly submit: (caller: string, input: SagaInput) => Effect.Effect<SagaResult, SagaRefused>
  /** `submit`, then waits until the saga has ended. */
  readonly run: (caller: string, input: SagaInput) => Effect.Effect<SagaResult, SagaRefused | SagaNotFound>
  /** A saga's state now; with `caller`, only a saga that caller started (another's is `NOT_FOUND`). */
  readonly get: (sagaId: string, caller?: string) => Effect.Effect<SagaResult, SagaNotFound | SagaUnavailable>
  /** Waits until the saga has ended. */
  readonly await: (sagaId: string) => Effect.Effect<SagaResult, SagaNotFound | SagaUnavailable>
  /** The saga's progress events after `afterSeq` (0: all), ending with the final one; with `caller`, as `get`. */
  readonly events: (sagaId: string, afterSeq?: number, caller?: string) => Stream.Stream<SagaEvent, SagaNotFound | SagaUnavailable>
  /**
   * The sagas `caller` started, newest first, a page at a time: `limit` (1 to 200, default 50) after `cursor` (the
   * last page's `nextCursor`; `INVALID_REQUEST` when it is not one).
   */
  readonly list: (caller: string, page?: { readonly limit?: number; readonly cursor?: string }) => Effect.Effect<SagaPage, SagaInvalid | SagaUnavailable>
}

/** The `SagaScheduler` service. */
export class SagaScheduler extends Context.Tag("agent-mesh/SagaScheduler")<SagaScheduler, SagaSchedulerApi>() {}

/** Where the scheduler finds agents (by didHash). */
export class SagaAgents extends Context.Tag("agent-mesh/SagaAgents")<SagaAgents, FindAgent>() {}

/** Agents from the hub's registry, in process. */
export const layerAgentsFromRegistry: Layer.Layer<SagaAgents, never, Registry> = Layer.effect(
  SagaAgents,
  Effect.map(Registry, (registry): FindAgent => (didHash) =>
    registry.resolveAgent(didHash).pipe(
      Effect.map((r): AgentEntry | undefined => ({ did: r.did, didHash: r.didHash, endpointUrl: r.endpointUrl })),
      Effect.catchAll((e) => (e._tag === "EntryNotFound" ? Effect.succeed(undefined) : Effect.fail(new SagaUnavailable({ code: "STORE_UNAVAILABLE", message: e.message }))))
    )
  )
)

/** A failed forward step, as the workflow journals it. */
export class StepFailed extends Schema.TaggedError<StepFailed>()("StepFailed", {
  step: Schema.String,
  code: Schema.String,
  message: Schema.String
}) {}

const StepCommitted = Schema.Struct({ allocationId: Schema.String, usedUsd: Schema.String, commitToken: Schema.NullOr(Schema.String) })
const Compensated = Schema.Struct({ ok: Schema.Boolean, code: Schema.NullOr(Schema.String), message: Schema.NullOr(Schema.String) })

/** The saga workflow: its payload is the saga id; the plan is read from the store, where it was written before the start. */
export const SagaWorkflow = Workflow.make({
  name: "agent-mesh/Saga",
  payload: { sagaId: Schema.String },
  idempotencyKey: (p) => p.sagaId,
  error: StepFailed
})

const defaultCompensationRetry = Schedule.exponential("200 millis").pipe(Schedule.intersect(Schedule.recurs(4)))
const defaultCallRetry = Schedule.exponential("50 millis").pipe(Schedule.intersect(Schedule.recurs(5)))

/** Failures that say nothing about the step itself (the agent or its resolver busy or unreachable): retried. */
const TRANSIENT = new Set(["AGENT_UNREACHABLE", "RESOLVER_UNAVAILABLE", "STORE_UNAVAILABLE", "RATE_LIMITED", "OVERLOADED", "SERVICE_UNAVAILABLE"])
const isTransient = (e: { readonly code: string; readonly status?: number | undefined }) => TRANSIENT.has(e.code) || e.status === 503 || e.status === 429

const unavailable = (message: string) => new SagaUnavailable({ code: "STORE_UNAVAILABLE", message })

/** The idempotency key of a step's allocation and call; a compensation's call adds `:compensate`. */
export const stepKey = (sagaId: string, step: string): string => `${sagaId}:${step}`

/**
 * The workflow's implementation: registers the saga workflow with the engine. Every step and compensation runs under
 * one of `permits`, shared by all sagas.
 */
const layerWorkflow = (options: SchedulerOptions, permits: Effect.Semaphore) =>
  SagaWorkflow.toLayer(({ sagaId }) =>
    Effect.gen(function* () {
      const store = yield* SagaStore.SagaStore
      const ledger = yield* Ledger
      const agents = yield* AgentClient
      const keys = yield* Keys
      const runner = options.runner
      const callRetry = options.callRetry ?? defaultCallRetry
      const saga = yield* Effect.orDie(store.load(sagaId))
      if (saga === undefined) return yield* Effect.dieMessage(`saga ${sagaId} is not stored`)
      const steps = saga.plan.steps
      const submitter = saga.plan.grantor
      // The caller's mandate is read once for the whole saga, not at every step's child; one that does not read is
      // passed on as a token, so each step refuses it as before.
      const parent = Either.getOrElse(decodeUnverified(saga.plan.mandate), () => saga.plan.mandate)
      const event = (type: Parameters<typeof store.append>[1], step: string | null, data: Record<string, unknown> = {}) => Effect.orDie(store.append(sagaId, type, step, data))

      const forward = (idx: number) => {
        const step = steps[idx]!
        const key = stepKey(sagaId, step.name)
        const fail = (code: string, message: string) => Effect.fail(new StepFailed({ step: step.name, code, message }))
        // Refused before anything was allocated: nothing to give back.
        const refused = (code: string, message: string) =>
          Effect.orDie(store.updateStep(sagaId, idx, { status: "failed", errorCode: code, errorMessage: message }, { type: "step_failed", step: step.name, data: { code, message } })).pipe(
            Effect.zipRight(fail(code, message))
          )
        return Activity.make({
          name: `forward/${idx}/${step.name}`,
          success: StepCommitted,
          error: StepFailed,
          execute: permits.withPermits(1)(Effect.gen(function* () {
            const started = { type: "step_started" as const, step: step.name, data: { agentDid: step.agentDid, capability: step.capability, budgetUsd: formatUsdString(step.budgetMicros as Micros) } }
            const child = yield* store.childToken(
              sagaId,
              idx,
              attenuateToPayment({
                parent,
                granteeDid: step.agentDid,
                amountUsd: step.budgetMicros / 1_000_000,
                merchant: step.agentDid,
                grantorPrivateKey: runner.privateKey
              }).pipe(Effect.map((m) => m.token), Effect.provideService(Keys, keys)),
              started
            ).pipe(
              // A mandate that cannot be made is refused before anything was written (its step_started comes first); the
              // store failing may have written it already.
              Effect.catchAll((e) => (e._tag === "SagaUnavailable" ? refused(e.code, e.message) : Effect.zipRight(event(started.type, started.step, started.data), refused(e.code, e.message))))
            )
            const allocation = yield* ledger.allocate(runner.did, saga.poolId, { childToken: child, idempotencyKey: key }).pipe(
              Effect.catchAll((e) => refused(e.code, e.message))
            )
            // The allocation's id is written with the step's outcome: a step re-run after a crash allocates again under the
            // same idempotency key and is answered the same allocation.
            const refund = (code: string, message: string) =>
              ledger.release(runner.did, allocation.allocationId, { usedUsd: 0 }).pipe(
                Effect.catchTag("AlreadyReleased", () => Effect.void),
                Effect.ignore,
                Effect.zipRight(Effect.orDie(store.updateStep(
                  sagaId, idx, { status: "failed", allocationId: allocation.allocationId, usedMicros: 0, errorCode: code, errorMessage: message },
                  { type: "step_failed", step: step.name, data: { code, message } }
                ))),
                Effect.zipRight(fail(code, message))
              )
            const reply = yield* agents
              .call(step.endpointUrl, step.capability, {
                signAs: runner,
                mandate: child,
                capability: step.capability,
                // Who asked, for the agent's own checks: the payment mandate's chain is rooted in the submitter's
                // signed mandate, so the agent need not take the runner's word for it (docs/sagas.md §3).
                context: { sagaId, step: step.name, params: step.params, submitter },
                // The budget caps what the agent may sign for, and is what it signs when it reports no cost.
                commit: { sagaId, step: step.name, amountUsd: formatUsdString(step.budgetMicros as Micros) },
                idempotencyKey: key
              })
              .pipe(
                // Safe to repeat: the agent answers the same Idempotency-Key with its stored reply.
                Effect.retry({ schedule: callRetry, while: isTransient }),
                Effect.catchAll((e) => refund(e.code, e.message))
              )
            if (!("message" in reply)) return yield* refund("HUMAN_GATE_REQUIRED", "a saga step cannot pause at a human gate")
            // No receipt, no payment: what a step used is what its agent signed for, and the ledger keeps the proof. The
            // ledger's release verifies the token (signature, issuer = this step's agent, saga and step = this step's
            // key, amount); here it is only read for the amount it names.
            const commitToken = reply.commitToken
            if (commitToken === undefined) return yield* refund("COMMIT_INVALID", "the agent answered without a commit token")
            const receipt = decodeCommitToken(commitToken)
            const amount = Either.isRight(receipt) ? parseUsd(receipt.right.amountUsd) : undefined
            if (amount === undefined || Either.isLeft(amount)) return yield* refund("COMMIT_INVALID", "the agent's commit token does not read as one")
            if (amount.right > step.budgetMicros) return yield* refund("INVALID_AMOUNT", "the agent signed for more than the step's budget")
            const used = amount.right
            const usedUsd = formatUsdString(used as Micros)
            yield* ledger.release(runner.did, allocation.allocationId, { usedUsd: used / 1_000_000, commitToken }).pipe(
              // The store or the key resolver busy says nothing about the receipt: asked again, as a call is.
              Effect.retry({ schedule: callRetry, while: (e) => e._tag === "LedgerUnavailable" }),
              Effect.catchTag("AlreadyReleased", () => Effect.void),
              Effect.catchTag("CommitTokenRefused", (e) => refund("COMMIT_INVALID", `the agent's commit token does not hold: ${e.message}`)),
              Effect.catchAll((e) => fail(e.code, e.message))
            )
            yield* Effect.orDie(store.updateStep(
              sagaId, idx, { status: "committed", allocationId: allocation.allocationId, usedMicros: used, commitToken, result: reply.message },
              { type: "step_committed", step: step.name, data: { usedUsd, commitToken } }
            ))
            return { allocationId: allocation.allocationId, usedUsd, commitToken }
          }))
        })
      }

      // A compensation undoes what the forward step did: it carries that step's receipt and reply and the same payment
      // mandate, never params of the submitter's choosing.
      const compensate = (idx: number, committed: typeof StepCommitted.Type) => {
        const step = steps[idx]!
        return Activity.make({
          name: `compensate/${idx}/${step.name}`,
          success: Compensated,
          execute: permits.withPermits(1)(Effect.gen(function* () {
            yield* event("step_compensating", step.name)
            const c = step.compensation
            const forwardResult = c === undefined ? null : ((yield* Effect.orDie(store.result(sagaId)))?.steps[idx]?.result ?? null)
            const child = c === undefined ? undefined : yield* Effect.orDie(store.childToken(sagaId, idx, Effect.dieMessage(`step ${step.name} committed without a child mandate`)))
            const outcome =
              c === undefined
                ? Either.right(undefined)
                : yield* agents
                    .call(step.endpointUrl, c.capability, {
                      signAs: runner,
                      ...(child === undefined ? {} : { mandate: child }),
                      capability: c.capability,
                      context: { sagaId, step: step.name, submitter, compensates: step.capability, commitToken: committed.commitToken, result: forwardResult },
                      idempotencyKey: `${stepKey(sagaId, step.name)}:compensate`
                    })
                    .pipe(
                      Effect.retry({ schedule: callRetry, while: isTransient }),
                      Effect.flatMap((r) => ("message" in r ? Effect.void : Effect.fail({ code: "HUMAN_GATE_REQUIRED", message: "a compensation cannot pause at a human gate" }))),
                      Effect.retry(options.compensationRetry ?? defaultCompensationRetry),
                      Effect.either
                    )
            if (Either.isRight(outcome)) {
              yield* Effect.orDie(store.updateStep(sagaId, idx, { status: "compensated" }, { type: "step_compensated", step: step.name, data: {} }))
              return { ok: true, code: null, message: null }
            }
            const { code, message } = outcome.left
            yield* Effect.orDie(store.updateStep(sagaId, idx, { status: "compensation_failed", errorCode: code, errorMessage: message }, { type: "step_compensation_failed", step: step.name, data: { code, message } }))
            return { ok: false, code, message }
          }))
        })
      }

      // Registered first, so it runs last: after every compensation has run.
      yield* Workflow.addFinalizer((exit) =>
        Effect.gen(function* () {
          // Interrupted only: the process is stopping, and the workflow resumes on the next start.
          if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) return
          if (Exit.isSuccess(exit)) {
            yield* store.finish(sagaId, "committed", null, null, { type: "saga_committed", step: null, data: {} })
            return
          }
          const failure = Cause.failureOption(exit.cause)
          const failed = failure._tag === "Some" && failure.value instanceof StepFailed ? failure.value : undefined
          const result = yield* store.result(sagaId)
          const broken = result?.steps.find((s) => s.status === "compensation_failed")
          if (broken !== undefined) {
            yield* store.finish(sagaId, "compensation_failed", broken.name, broken.errorCode, { type: "saga_compensation_failed", step: broken.name, data: { code: broken.errorCode } })
          } else {
            const code = failed?.code ?? "INTERNAL_ERROR"
            yield* store.finish(sagaId, "compensated", failed?.step ?? null, code, { type: "saga_compensated", step: failed?.step ?? null, data: { code } })
          }
        }).pipe(Effect.orDie)
      )
      for (let idx = 0; idx < steps.length; idx++) {
        yield* forward(idx).pipe(
          Workflow.withCompensation((committed, cause) => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.asVoid(compensate(idx, committed))))
        )
      }
    })
  )

/** The scheduler's operations over its store and the engine (the workflow registered by `layerWorkflow`). */
export const make = (options: SchedulerOptions) =>
  Effect.gen(function* () {
    const store = yield* SagaStore.SagaStore
    const ledger = yield* Ledger
    const resolver = yield* KeyResolver
    const findAgent = yield* SagaAgents
    const engine = yield* WorkflowEngine.WorkflowEngine
    const keys = yield* Keys
    const runner = options.runner.did.toLowerCase()

    const maxPerCaller = options.maxRunningPerCaller ?? DEFAULT_MAX_RUNNING_PER_CALLER
    const maxRunning = options.maxRunning ?? DEFAULT_MAX_RUNNING
    // Counting the running sagas and adding one is a single step in this process, so concurrent submissions cannot
    // all pass one count; hubs sharing a database each hold the bound on their own count (docs/sagas.md §1).
    const admission = yield* Effect.makeSemaphore(1)
    const notFound = new SagaNotFound({ code: "NOT_FOUND", message: "no such saga" })

    // Only the durable engines keep the messages that say whether a saga's workflow was ever started.
    const notStartedAfter = options.notStartedAfterMs ?? DEFAULT_NOT_STARTED_AFTER_MS
    const sharding = yield* Effect.serviceOption(Sharding.Sharding)
    const messages = yield* Effect.serviceOption(MessageStorage.MessageStorage)
    if (Option.isSome(sharding) && Option.isSome(messages)) {
      const shardGroup = Context.get(SagaWorkflow.annotations, ClusterSchema.ShardGroup)
      const entityType = EntityType.make(`Workflow/${SagaWorkflow.name}`)
      const addressOf = (sagaId: string) =>
        Effect.map(SagaWorkflow.executionId({ sagaId }), (execution) => {
          // The engine names the workflow's entity by its execution id, derived from the saga id.
          const entityId = EntityId.make(execution)
          return new EntityAddress({ entityType, entityId, shardId: sharding.value.getShardId(entityId, shardGroup(entityId)) })
        })
      const started = (address: EntityAddress) => Effect.map(messages.value.requestIdForPrimaryKey({ address, tag: "run", id: "" }), Option.isSome)
      // The quiet sagas already reported, by the time of their latest event: one line per quiet spell, not per sweep.
      const reported = new Map<string, number>()
      const sweep = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const quiet = new Map<string, number>()
        for (const { id: sagaId, lastEventAt } of yield* store.runningSince(now - notStartedAfter)) {
          const address = yield* addressOf(sagaId)
          if (!(yield* started(address))) {
            // Conditional on the saga still running, so of several hubs sweeping at once one ends it and says so.
            yield* store.finish(sagaId, "compensated", null, "NOT_STARTED", { type: "saga_compensated", step: null, data: { code: "NOT_STARTED" } })
            continue
          }
          if (lastEventAt >= now - notStartedAfter) continue
          // A started saga gone quiet: its workflow's pending messages are handed to their shard's owner again. A
          // runner marks a message read when it polls it, and does not read it again for ten minutes; a poll that
          // raced a shard's move to another runner can leave the message marked and undelivered. The owner skips a
          // message it is still processing, so this wakes only a saga that nothing runs.
          quiet.set(sagaId, lastEventAt)
          if (reported.get(sagaId) !== lastEventAt) {
            // A warning: a step's call quiet this long is rare, and a lost delivery is worth seeing.
            yield* Effect.logWarning("saga quiet: its workflow's pending messages are handed to their runner again").pipe(Effect.annotateLogs({ sagaId, quietForMs: now - lastEventAt }))
          }
          yield* messages.value.resetAddress(address)
          yield* sharding.value.pollStorage
        }
        reported.clear()
        for (const [id, at] of quiet) reported.set(id, at)
      })
      yield* sweep.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("saga sweep failed; trying again later", cause)),
        Effect.repeat(Schedule.spaced(Math.ceil(notStartedAfter / 3))),
        Effect.forkScoped
      )
    }

    const get = (sagaId: string, caller?: string) =>
      Effect.gen(function* () {
        if (caller !== undefined) {
          const stored = yield* store.load(sagaId)
          // Another's saga is answered as no saga at all: its existence is not the reader's to learn.
          if (stored === undefined || stored.caller !== (normalizeDid(caller) ?? caller)) return yield* Effect.fail(notFound)
        }
        const r = yield* store.result(sagaId)
        return r === undefined ? yield* Effect.fail(notFound) : r
      })

    const awaitEnd = (sagaId: string) =>
      Effect.scoped(
        Effect.gen(function* () {
          const news = yield* PubSub.subscribe(store.changes)
          // Only this saga's final event ends the wait: reading the saga on every step's news would cost each step a read.
          const ended = Effect.asVoid(Effect.repeat(news.take, { until: (c) => c.sagaId === sagaId && isFinal(c.type) }))
          while (true) {
            const r = yield* get(sagaId)
            if (r.status !== "running") return r
            yield* Effect.raceFirst(ended, Effect.sleep(FALLBACK_WAIT))
          }
        })
      )

    const submit = (caller: string, input: SagaInput): Effect.Effect<SagaResult, SagaRefused> =>
      Effect.gen(function* () {
        const accepted = yield* plan(input, { caller, runner, resolver, findAgent }).pipe(Effect.provideService(Keys, keys))
        const pool = yield* ledger.openPool(runner, input.mandate).pipe(
          Effect.catchAll((e): Effect.Effect<never, SagaRefused> =>
            e._tag === "LedgerUnavailable"
              ? Effect.fail(unavailable(e.message))
              : Effect.fail(new SagaMandateRefused({ code: "MANDATE_INVALID", reason: e.code, message: e.message }))
          )
        )
        const sagaId = `saga_${toBase64Url((yield* Entropy).bytes(16))}`
        const owner = normalizeDid(accepted.grantor) ?? accepted.grantor
        yield* admission.withPermits(1)(
          Effect.gen(function* () {
            const running = yield* store.running(owner)
            if (running.caller >= maxPerCaller) {
              return yield* Effect.fail(new SagaBusy({ code: "RATE_LIMITED", message: `the caller has ${maxPerCaller} sagas running; wait for one to end`, retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS }))
            }
            if (running.total >= maxRunning) {
              return yield* Effect.fail(new SagaBusy({ code: "OVERLOADED", message: "the hub runs as many sagas as it takes; retry later", retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS }))
            }
            yield* store.create(
              { id: sagaId, caller: owner, runner, poolId: pool.poolId, plan: accepted },
              { type: "saga_started", step: null, data: { poolId: pool.poolId, steps: accepted.steps.map((s) => s.name) } }
            )
          })
        )
        yield* SagaWorkflow.execute({ sagaId }, { discard: true }).pipe(Effect.provideService(WorkflowEngine.WorkflowEngine, engine))
        return yield* Effect.catchTag(get(sagaId), "SagaNotFound", () => Effect.dieMessage(`saga ${sagaId} vanished`))
      })

    const events = (sagaId: string, afterSeq = 0, caller?: string): Stream.Stream<SagaEvent, SagaNotFound | SagaUnavailable> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const news = yield* PubSub.subscribe(store.changes)
          const ownNews = Effect.asVoid(Effect.repeat(news.take, { until: (c) => c.sagaId === sagaId }))
          yield* get(sagaId, caller)
          let seq = afterSeq
          let done = false
          const next: Effect.Effect<ReadonlyArray<SagaEvent>, SagaUnavailable> = Effect.gen(function* () {
            while (true) {
              const batch = yield* store.eventsAfter(sagaId, seq)
              if (batch.length > 0) {
                seq = batch[batch.length - 1]!.seq
                if (batch.some((e) => isFinal(e.type))) done = true
                return batch
              }
              yield* Effect.raceFirst(ownNews, Effect.sleep(FALLBACK_WAIT))
            }
          })
          return Stream.repeatEffectOption(Effect.suspend(() => (done ? Effect.fail(Option.none()) : Effect.mapError(next, Option.some)))).pipe(
            Stream.flattenIterables
          )
        })
      )

    const list = (caller: string, page: { readonly limit?: number; readonly cursor?: string } = {}) =>
      Effect.gen(function* () {
        const cursor = page.cursor === undefined || page.cursor === "" ? undefined : SagaStore.parseCursor(page.cursor)
        if (page.cursor !== undefined && page.cursor !== "" && cursor === undefined) {
          return yield* Effect.fail(new SagaInvalid({ code: "INVALID_REQUEST", message: "cursor is not a nextCursor this hub gave" }))
        }
        const limit = Math.max(1, Math.min(MAX_SAGA_PAGE, Math.floor(page.limit ?? DEFAULT_SAGA_PAGE) || DEFAULT_SAGA_PAGE))
        return yield* store.list(normalizeDid(caller) ?? caller, limit, cursor)
      })

    return {
      runner,
      list,
      submit,
      run: (caller, input) => Effect.flatMap(submit(caller, input), (r) => awaitEnd(r.sagaId)),
      get,
      await: awaitEnd,
      events
    } satisfies SagaSchedulerApi
  })

/** What the scheduler needs around it besides the engine. */
export type SchedulerRequirements = Ledger | AgentClient | KeyResolver | Keys | SagaAgents | SqlClient.SqlClient

/**
 * The scheduler on an engine: the store, the workflow registered, the service. The runner's key is imported once
 * here rather than at every step's mandate and call; a key that does not import is passed on as given, so each step
 * refuses it (MALFORMED_KEY) as before.
 */
export const layerOn = (options: SchedulerOptions) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const keys = yield* Keys
      const privateKey = yield* Effect.orElseSucceed(keys.importPrivateKey(options.runner.privateKey), () => options.runner.privateKey)
      const imported: SchedulerOptions = { ...options, runner: { ...options.runner, privateKey } }
      const permits = yield* Effect.makeSemaphore(options.maxStepsInFlight ?? DEFAULT_MAX_STEPS_IN_FLIGHT)
      return Layer.scoped(SagaScheduler, make(imported)).pipe(
        Layer.provideMerge(layerWorkflow(imported, permits)),
        Layer.provideMerge(SagaStore.layer)
      )
    })
  )

/**
 * The durable scheduler: @effect/cluster's workflow engine over the same SQL database (its tables are its own), as the
 * one runner of every saga, or with `options.cluster` as one runner of a cluster on Postgres (`SagaEngine`).
 */
export const layer = (options: SchedulerOptions): Layer.Layer<SagaScheduler | SagaStore.SagaStore, never, SchedulerRequirements> =>
  layerOn(options).pipe(
    Layer.provide(options.cluster === undefined ? SagaEngine.layerSingle : SagaEngine.layerCluster(options.cluster))
  ) as Layer.Layer<SagaScheduler | SagaStore.SagaStore, never, SchedulerRequirements>

/** The scheduler on the in-memory engine (not durable): for tests. */
export const layerTest = (options: SchedulerOptions): Layer.Layer<SagaScheduler | SagaStore.SagaStore, never, SchedulerRequirements> =>
  layerOn(options).pipe(Layer.provide(WorkflowEngine.layerMemory))
