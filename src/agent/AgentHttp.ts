/**
 * The handlers of `AgentApi`: each endpoint reads the request, asks the parts (execution, gates, streamed runs,
 * discovery) and writes the answer; no rule of the agent lives here. A run or a resume answers as JSON, or as an
 * event stream when the caller accepts one; a `Last-Event-ID` continues a stream and never starts the work again.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as ApiGroup from "../http/ApiGroup.js"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { AgentApi, type ApprovalRequired, type Caller, CurrentCaller, type RunReply, type RunRequest } from "./AgentApi.js"
import { AgentBadRequest, type AgentForbidden, AgentUnavailable } from "./AgentError.js"
import { presentedByGrantor } from "./Auth.js"
import { Discovery } from "./Discovery.js"
import { Execution, type Outcome } from "./Execution.js"
import { type Approval, forbidden, Gates, storeUnavailable, type TaskState } from "./Gates.js"
import { Idempotency } from "./Idempotency.js"
import { Identity } from "./Identity.js"
import { RunStreams } from "./RunStreams.js"
import { AgentMemory } from "../core/AgentMemory.js"
import type { StoredReply } from "../core/IdempotencyStore.js"
import { normalizeDid } from "../core/Did.js"
import { KeyResolver, type KeyResolverApi } from "../core/KeyResolver.js"
import { Keys } from "../core/Keys.js"
import { chainOf, decodeUnverified, verifyMandate } from "../core/Mandate.js"
import { VERSION } from "../core/Version.js"
import { CorrelationId } from "../http/CorrelationId.js"
import { errorObject } from "../http/ErrorBody.js"
import { wasLogged } from "../http/FailureLog.js"
import * as Metrics from "../http/Metrics.js"
import * as Sse from "../core/Sse.js"
import { Entropy } from "../core/Entropy.js"
import { MandateCache, type MandateCacheApi } from "../core/MandateCache.js"

/**
 * A JSON response kept as text: the lean writer sends it as is, with its length (no encode and decode again). A
 * reply answered from the idempotency store says so in `Idempotent-Replayed`.
 */
const textResponse = (reply: StoredReply, replayed = false): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.raw(reply.body, {
    status: reply.status,
    contentType: "application/json",
    headers: { "content-length": String(Buffer.byteLength(reply.body)), ...(replayed ? { "idempotent-replayed": "true" } : {}) }
  })

const acceptsStream = (req: HttpServerRequest.HttpServerRequest): boolean => Sse.isEventStream(req.headers["accept"])

const paused = (state: TaskState, outcome: Extract<Outcome, { _tag: "Paused" }>): ApprovalRequired => ({
  status: "approval_required",
  sessionId: state.sessionId,
  approvalRequired: outcome.request
})

/**
 * Who a relaying caller acts for. A payment mandate presented under mesh-sig (a saga runner's step) is verified whole,
 * granted to this agent by the caller (`presentedByGrantor` holds the caller end), and its root grantor — the one
 * whose signed mandate the payment was cut from — becomes `caller.onBehalfOf`, so the handler's own checks see who
 * asked and not only who relayed it. A payment mandate that does not verify refuses the run (`MANDATE_INVALID`). Other
 * kinds are left to the guard, which verifies them when first used.
 */
export const withOnBehalfOf = (
  token: string,
  caller: Caller,
  agentDid: string,
  resolver: KeyResolverApi,
  keys: Keys["Type"],
  cache: MandateCacheApi | undefined
): Effect.Effect<Caller, AgentForbidden | AgentUnavailable> => {
  const decoded = decodeUnverified(token, cache)
  if (caller.did === undefined || Either.isLeft(decoded) || decoded.right.kind !== "payment") return Effect.succeed(caller)
  return verifyMandate(token, resolver, { kinds: ["payment"], expectedGrantee: agentDid, ...(cache === undefined ? {} : { cache }) }).pipe(
    Effect.provideService(Keys, keys),
    Effect.map((m): Caller => {
      const root = chainOf(m)[0]!.grantor
      return { ...caller, onBehalfOf: normalizeDid(root) ?? root }
    }),
    Effect.mapError((e) =>
      e.reason === "RESOLVER_UNAVAILABLE"
        ? new AgentUnavailable({ code: "RESOLVER_UNAVAILABLE", message: e.message })
        : forbidden("MANDATE_INVALID", `the payment mandate does not verify: ${e.reason}`, e.reason)
    )
  )
}

/**
 * A mandate field that is present must hold a token: an empty or malformed one is refused (`MANDATE_INVALID`, reason
 * `MALFORMED`) before the handler runs, rather than taken for no mandate, so a caller whose token was lost on the way
 * (an empty shell variable) learns it at once. Signatures and the rest are checked where the mandate is used.
 */
export const presentedMandateProblem = (token: string, cache: MandateCacheApi | undefined): AgentForbidden | undefined => {
  if (token.trim().length === 0) return forbidden("MANDATE_INVALID", "MALFORMED: the mandate field is empty; send a mandate token, or leave the field out", "MALFORMED")
  const decoded = decodeUnverified(token, cache)
  return Either.isLeft(decoded) ? forbidden("MANDATE_INVALID", `${decoded.left.reason}: ${decoded.left.message}`, decoded.left.reason) : undefined
}

/** The run errors answered with a 5xx status. */
const SERVER_FAILURES: ReadonlySet<string> = new Set(["HandlerFailed", "ProviderFailed", "AgentUnavailable"])

const replyOf = (state: TaskState, outcome: Extract<Outcome, { _tag: "Completed" }>): RunReply => ({
  message: outcome.message,
  sessionId: state.sessionId,
  ...(outcome.commitToken === undefined ? {} : { commitToken: outcome.commitToken })
})

const runs = Effect.gen(function* () {
  const execution = yield* Execution
  const gates = yield* Gates
  const streams = yield* RunStreams
  const memory = yield* AgentMemory
  const { did } = yield* Identity
  const idempotency = yield* Idempotency
  // The guard parses the same token through this cache: the grantor check costs no second parse.
  const mandateCache = Option.getOrUndefined(yield* Effect.serviceOption(MandateCache))
  const entropy = yield* Entropy
  const resolver = yield* KeyResolver
  const keys = yield* Keys

  /** Runs the handler in the background, its chunks and its end streamed as events. */
  const streamed = (state: TaskState, approval: Approval | undefined, caller: Caller, cid: string) =>
    streams.start(
      caller.principal,
      (chunk) =>
        execution.execute(state, approval, true, chunk).pipe(
          // A streamed run's failure reaches the client as an event, not a status: its server-side ones are logged here.
          Effect.tapError((e) =>
            SERVER_FAILURES.has(e._tag) && !wasLogged(e)
              ? Effect.annotateLogs(Effect.logError(`streamed run ended with ${e.code}: ${e.message}`), "correlationId", cid)
              : Effect.void
          ),
          Effect.match({
            onSuccess: (outcome) =>
              outcome._tag === "Completed"
                ? { type: "done" as const, data: replyOf(state, outcome) }
                : { type: "approval_required" as const, data: paused(state, outcome) },
            onFailure: (e) => ({ type: "error" as const, data: errorObject({ ...e }, e._tag, e.message, e.code, cid) })
          })
        ),
      () => ({ type: "error", data: errorObject(undefined, "HandlerFailed", "the server stopped", "HANDLER_FAILED", cid) })
    )

  /** A plain (unstreamed) answer, as the status and the JSON text sent. */
  const plain = (state: TaskState, approval: Approval | undefined) =>
    Effect.map(
      execution.execute(state, approval, false, () => undefined),
      (outcome): StoredReply =>
        outcome._tag === "Completed"
          ? { status: 200, body: JSON.stringify(replyOf(state, outcome)) }
          : { status: 202, body: JSON.stringify(paused(state, outcome)) }
    )

  // Per request, so built of plain combinators rather than generators.
  const answer = (state: TaskState, approval: Approval | undefined, req: HttpServerRequest.HttpServerRequest, caller: Caller) =>
    acceptsStream(req)
      ? Effect.flatMap(CorrelationId, (cid) => streamed(state, approval, caller, cid))
      : Effect.map(plain(state, approval), (reply) => textResponse(reply))

  /** A reconnect: the run named by `Last-Event-ID`, from the event after it. */
  const reconnect = (req: HttpServerRequest.HttpServerRequest, lastEventId: string, caller: Caller) =>
    acceptsStream(req)
      ? streams.reconnect(lastEventId, caller.principal)
      : // Without a stream to continue, a Last-Event-ID must not start the work a second time.
        Effect.fail(new AgentBadRequest({ code: "INVALID_REQUEST", message: "Last-Event-ID continues a stream: send Accept: text/event-stream" }))

  /** The task a run request starts: its mandate checked against the caller, its session's history loaded. */
  const taskOf = (payload: RunRequest, authenticated: Caller) => {
    if (payload.mandate === undefined) return taskFor(payload, authenticated)
    const refused = presentedMandateProblem(payload.mandate, mandateCache)
    if (refused !== undefined) return Effect.fail(refused)
    return authenticated.did !== undefined
      ? Effect.flatMap(withOnBehalfOf(payload.mandate, authenticated, did, resolver, keys, mandateCache), (caller) => taskFor(payload, caller))
      : taskFor(payload, authenticated)
  }

  const taskFor = (payload: RunRequest, caller: Caller) => {
    const sessionId = payload.sessionId ?? entropy.uuid()
    const stateWith = (history: NonNullable<RunRequest["history"]>): TaskState => ({
      message: payload.message,
      sessionId,
      history,
      context: payload.context ?? {},
      caller,
      ...(payload.mandate === undefined ? {} : { mandate: payload.mandate }),
      ...(payload.capability === undefined ? {} : { capability: payload.capability }),
      ...(payload.commit === undefined ? {} : { commit: payload.commit }),
      journal: [],
      emitted: 0
    })
    const state =
      memory.mode === "none"
        ? Effect.succeed(stateWith(payload.history ?? []))
        : Effect.map(Effect.mapError(memory.load(did, caller.principal, sessionId), storeUnavailable), stateWith)
    return payload.mandate !== undefined && caller.did !== undefined ? Effect.zipRight(presentedByGrantor(payload.mandate, caller, mandateCache), state) : state
  }

  const run = (payload: RunRequest, req: HttpServerRequest.HttpServerRequest) =>
    Effect.flatMap(CurrentCaller, (caller) => {
      const lastEventId = req.headers["last-event-id"]
      if (lastEventId !== undefined) return reconnect(req, lastEventId, caller)
      const key = req.headers["idempotency-key"]
      if (key === undefined) return Effect.flatMap(taskOf(payload, caller), (state) => answer(state, undefined, req, caller))
      return Effect.map(
        idempotency.once(caller, key, { body: payload, streaming: acceptsStream(req) }, Effect.flatMap(taskOf(payload, caller), (state) => plain(state, undefined))),
        (answered) => textResponse(answered.reply, answered.replayed)
      )
    })

  const resume = (payload: { readonly taskId: string; readonly approval: unknown }, req: HttpServerRequest.HttpServerRequest) =>
    Effect.flatMap(CurrentCaller, (caller) => {
      const lastEventId = req.headers["last-event-id"]
      if (lastEventId !== undefined) return reconnect(req, lastEventId, caller)
      return Effect.flatMap(gates.resume(payload.taskId, payload.approval, caller), (claimed) => answer(claimed.state, claimed.approval, req, caller))
    })

  return { run, resume }
})

const info = Effect.gen(function* () {
  const identity = yield* Identity
  const discovery = yield* Discovery
  const startedAt = yield* Clock.currentTimeMillis
  const health = Effect.map(Clock.currentTimeMillis, (now) => ({
    status: "ok" as const,
    name: identity.name,
    did: identity.did,
    version: VERSION,
    uptimeSeconds: Math.floor((now - startedAt) / 1000)
  }))
  return { health, discovery: discovery.document }
})

/** The handlers of every group of `AgentApi`, over the parts in context. */
export const layer = Layer.mergeAll(
  ApiGroup.group(AgentApi, "run", (h) =>
    Effect.map(runs, ({ resume, run }) => h.handle("run", ({ payload, request }) => run(payload, request)).handle("resume", ({ payload, request }) => resume(payload, request)))
  ),
  ApiGroup.group(AgentApi, "info", (h) =>
    Effect.map(info, ({ discovery, health }) =>
      h.handle("health", () => health).handle("discovery", () => discovery).handle("metrics", () => Metrics.served))
  ),
  ApiGroup.group(AgentApi, "docs", (h) => h.handle("openapi", () => Effect.succeed(OpenApi.fromApi(AgentApi))))
)
