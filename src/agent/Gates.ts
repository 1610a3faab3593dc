/**
 * Human gates: a task paused at a gate is stored with what it needs to run again (its input, the guard calls that
 * had passed, the call it paused at, the chunks already sent), and a resume hands that back only to the caller who
 * started the task or its grantor, and only once an approval signed by the grantor verifies. The store, not this
 * process, picks the one winner of concurrent resumes, so two servers on one database cannot both run a task on.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type ApprovalRequest, Caller as CallerSchema, type Caller, ChatMessage, CommitRequest } from "./AgentApi.js"
import { AgentConflict, AgentForbidden, type ForbiddenCode, AgentNotFound, AgentUnavailable } from "./AgentError.js"
import type { GuardOptions } from "./Handler.js"
import { Identity } from "./Identity.js"
import { type ApprovalError, resumeTask } from "../core/Approval.js"
import { KeyResolver } from "../core/KeyResolver.js"
import { Keys } from "../core/Keys.js"
import { decodeUnverified } from "../core/Mandate.js"
import { type TaskNotPaused, TaskStore } from "../core/TaskStore.js"
import { MandateCache } from "../core/MandateCache.js"
import { Entropy } from "../core/Entropy.js"

/** What a task carries across a pause (stored as JSON in the `TaskStore`). */
export const TaskState = Schema.Struct({
  message: Schema.String,
  sessionId: Schema.String,
  history: Schema.Array(ChatMessage),
  context: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  caller: CallerSchema,
  mandate: Schema.optional(Schema.String),
  /** The capability the run was asked for. */
  capability: Schema.optional(Schema.String),
  /** The commit token asked for, made when the task completes (after a resume too). */
  commit: Schema.optional(CommitRequest),
  /** The guard calls that had passed, in call order, each as its step key (capability and every option). */
  journal: Schema.Array(Schema.String),
  /** The step key of the guard call the task paused at: an approval resumes that very call and no other. */
  gated: Schema.optional(Schema.String),
  /** Chunks the handler had produced (and the caller received) before the pause. */
  emitted: Schema.Number
})
export type TaskState = typeof TaskState.Type
const decodeTaskState = Schema.decodeUnknownEither(TaskState)

/** A human's decision on the guard call with step key `step`. */
export interface Approval {
  readonly step: string
  readonly decision: "approve" | "deny"
}

/** A guard call as one string: the capability and every option, with defaults filled in. */
export const stepKey = (capability: string, o: GuardOptions): string =>
  JSON.stringify([capability, o.reversible ?? false, o.dataScopes ?? [], o.llmTokens ?? 0, o.webRequests ?? 0, o.description ?? ""])

/** The gate settings (the field of the same name in `AgentServerOptions`). */
export interface Options {
  /** Allowed clock skew for approvals; default 30 s. */
  readonly clockToleranceMs?: number
}

/** Pausing tasks at gates and resuming them. */
export interface GatesApi {
  /** Stores the task paused at the guard call `step` and says what the human is asked. */
  readonly pause: (
    state: TaskState,
    capability: string,
    options: GuardOptions,
    step: string
  ) => Effect.Effect<ApprovalRequest, AgentForbidden | AgentUnavailable>
  /** Verifies an approval for a paused task and claims the task: its state, and the decision on its gated call. */
  readonly resume: (
    taskId: string,
    approval: unknown,
    caller: Caller
  ) => Effect.Effect<{ readonly state: TaskState; readonly approval: Approval }, AgentForbidden | AgentNotFound | AgentConflict | AgentUnavailable>
}

/** The human gates of one agent server. */
export class Gates extends Context.Tag("agent-mesh/agent/Gates")<Gates, GatesApi>() {}

/** A refusal with its code, and the reason a guard gave (if any). */
export const forbidden = (code: ForbiddenCode, message: string, reason?: string) =>
  new AgentForbidden(reason === undefined ? { code, message } : { code, message, reason })

/** A store that cannot answer, as the agent answers it. */
export const storeUnavailable = (e: { readonly message: string }) => new AgentUnavailable({ code: "STORE_UNAVAILABLE", message: e.message })

/** An approval that does not hold: 403 with its code, or 503 when the signer's key cannot be looked up. */
const approvalRefused = (e: ApprovalError): AgentForbidden | AgentUnavailable =>
  e.code === "RESOLVER_UNAVAILABLE" ? new AgentUnavailable({ code: "RESOLVER_UNAVAILABLE", message: e.message }) : forbidden(e.code, e.message)

/** A task that cannot be resumed: 404 when unknown, 409 when no longer paused. */
const notPaused = (e: TaskNotPaused): AgentNotFound | AgentConflict =>
  e.code === "TASK_NOT_FOUND" ? new AgentNotFound({ code: "TASK_NOT_FOUND", message: e.message }) : new AgentConflict({ code: e.code, message: e.message })

/** The gates over the `TaskStore` and `KeyResolver` in context, for the agent `Identity`. */
export const make = (options: Options): Effect.Effect<GatesApi, never, Identity | TaskStore | KeyResolver | Keys> =>
  Effect.gen(function* () {
    const { did } = yield* Identity
    const mandateCache = Option.getOrUndefined(yield* Effect.serviceOption(MandateCache))
    const taskStore = yield* TaskStore
    const resolver = yield* KeyResolver
    const keys = yield* Keys
    const entropy = yield* Entropy
    const tolerance = options.clockToleranceMs ?? 30_000

    const pause: GatesApi["pause"] = (state, capability, guardOptions, step) =>
      Effect.gen(function* () {
        const token = state.mandate!
        const decoded = decodeUnverified(token, mandateCache)
        if (Either.isLeft(decoded)) return yield* Effect.fail(forbidden("MANDATE_INVALID", decoded.left.message, decoded.left.reason))
        const mandate = decoded.right
        const taskId = `task_${entropy.uuid()}`
        yield* taskStore
          .pause({
            taskId,
            owner: did,
            capability,
            mandateJti: mandate.jti,
            grantor: mandate.grantor,
            mandate: token,
            state: { ...state, gated: step },
            createdAt: yield* Clock.currentTimeMillis,
            expiresAt: mandate.expiresAt * 1000
          })
          .pipe(Effect.catchTags({ TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e)), PauseRefused: (e) => Effect.die(e) }))
        yield* Effect.logInfo(`task ${taskId} paused at a human gate for ${capability}`)
        return {
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
      })

    /** The reply (and the session) belong to whoever started the task: only they, or the grantor, may resume it. */
    const mayResume = (taskId: string, caller: Caller) =>
      Effect.gen(function* () {
        const found = yield* Effect.mapError(taskStore.paused(taskId), storeUnavailable)
        if (Option.isNone(found) || found.value.owner !== did) return
        const started = decodeTaskState(found.value.state)
        if (Either.isRight(started) && started.right.caller.principal !== caller.principal && caller.did !== found.value.grantor) {
          return yield* Effect.fail(forbidden("NOT_TASK_OWNER", "only the caller who started the task, or its grantor, may resume it"))
        }
      })

    const resume: GatesApi["resume"] = (taskId, approval, caller) =>
      Effect.gen(function* () {
        yield* mayResume(taskId, caller)
        // Finds the task, verifies the approval, and only then claims it: of concurrent resumes exactly one wins.
        const { decision, task: claimed } = yield* resumeTask({ taskId, owner: did, approval }, resolver, { clockToleranceMs: tolerance }).pipe(
          Effect.provideService(Keys, keys),
          Effect.provideService(TaskStore, taskStore),
          Effect.catchTags({
            ApprovalError: (e) => Effect.fail(approvalRefused(e)),
            TaskNotPaused: (e) => Effect.fail(notPaused(e)),
            TaskStoreUnavailable: (e) => Effect.fail(storeUnavailable(e))
          })
        )
        const state = decodeTaskState(claimed.state)
        if (Either.isLeft(state)) return yield* Effect.die(new Error(`task ${claimed.taskId} has an unreadable state`))
        yield* Effect.logInfo(`task ${claimed.taskId} ${decision === "deny" ? "denied" : "approved"} for ${claimed.capability}`)
        return { state: state.right, approval: { step: state.right.gated ?? "", decision } }
      })

    return { pause, resume }
  })

/** `Gates` with these settings. */
export const layer = (options: Options): Layer.Layer<Gates, never, Identity | TaskStore | KeyResolver | Keys> => Layer.effect(Gates, make(options))
