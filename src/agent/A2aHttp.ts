/**
 * The A2A server of an agent (docs/bridges.md, "A2A"): JSON-RPC 2.0 on `POST /` in A2A 1.0 (`SendMessage`,
 * `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, `SubscribeToTask`) and under the 0.3 names, over the same parts as
 * `/v1/run` (auth middleware, execution, gates, memory), and the signed card. A blocking `SendMessage` runs the handler
 * in its request, as `/v1/run` does; a streamed or non-blocking one runs it as a task of `A2aTasks` that outlives the
 * request. A human gate pauses the task in `TASK_STATE_INPUT_REQUIRED` with the approval request as a data part; the
 * grantor's signed approval, sent as the next message on that task, resumes it. Every failure is a JSON-RPC error
 * object (HTTP 200) with the mesh's code in `data.code`; failures of the handler end the task failed (or rejected, when
 * the mandate refused an action).
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as ApiGroup from "../http/ApiGroup.js"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { AgentApi, type Caller, CurrentCaller } from "./AgentApi.js"
import { AgentForbidden, type RunError } from "./AgentError.js"
import { presentedByGrantor } from "./Auth.js"
import { A2aCard } from "./A2aCard.js"
import {
  Codes,
  dataOf,
  type Dialect,
  errorText,
  isTerminal,
  type Message,
  METHODS,
  readMessage,
  resultText,
  readCount,
  readListQuery,
  type RpcError,
  type RpcId,
  rpcError,
  sendResult,
  type StreamResult,
  streamResult,
  taskResult,
  textOf,
  type TaskPage,
  UNSUPPORTED,
  VERSION_0_3,
  VERSION_1_0,
  VERSION_HEADER
} from "./A2aProtocol.js"
import { type A2aTask, A2aTasks, holderOf, REPLY_ARTIFACT, snapshot } from "./A2aTasks.js"
import type { A2aTaskCursor } from "../core/A2aTaskStore.js"
import { updatedOf } from "../core/A2aTaskStore.js"
import { Execution, type Outcome } from "./Execution.js"
import { type Approval, Gates, storeUnavailable, type TaskState } from "./Gates.js"
import { Identity } from "./Identity.js"
import { AgentMemory } from "../core/AgentMemory.js"
import { MandateCache } from "../core/MandateCache.js"
import * as Sse from "../core/Sse.js"
import { isRecord } from "../core/internal/record.js"
import { Entropy } from "../core/Entropy.js"
import { CorrelationId } from "../http/CorrelationId.js"
import { holdAnswer } from "../http/LeanRequest.js"
import type { RefusalWriter } from "../http/Serve.js"

const isSessionId = (s: string) => /^[A-Za-z0-9._:-]{1,128}$/.test(s)

const rpcResponse = (text: string, version: string) =>
  HttpServerResponse.raw(text, {
    status: 200,
    contentType: "application/json",
    headers: { "content-length": String(Buffer.byteLength(text)), "a2a-version": version }
  })

const versionOf = (dialect: Dialect) => (dialect === "1.0" ? VERSION_1_0 : VERSION_0_3)

/** A failed request: the JSON-RPC error for `id`. */
class RpcFailure {
  constructor(readonly error: RpcError) {}
}
const fail = (code: number, message: string, meshCode?: string) => Effect.fail(new RpcFailure(rpcError(code, message, meshCode)))

/**
 * The `A2A-Version` a request names, checked: absent is 0.3 (A2A 1.0 §3.6.2); a version this server lacks is refused
 * (the failure to answer with), one it speaks is undefined.
 */
const checkVersion = (header: string | undefined): Effect.Effect<never, RpcFailure> | undefined => {
  if (header === undefined || header === VERSION_1_0 || header === VERSION_0_3 || header.trim() === "") return undefined
  const m = /^\s*(\d+)(?:\.(\d+))?/.exec(header)
  const v = m === null ? "" : `${m[1]}.${m[2] ?? "0"}`
  return v === VERSION_1_0 || v === VERSION_0_3
    ? undefined
    : fail(Codes.VERSION_NOT_SUPPORTED, `A2A version ${header} is not supported; this server speaks ${VERSION_1_0} and ${VERSION_0_3}`, "VERSION_NOT_SUPPORTED")
}

/** The mesh-side failure of a run, as the status message of a failed (or rejected) task. */
const failureMessage = (task: A2aTask, e: RunError, messageId: string): Message => ({
  messageId,
  role: "ROLE_AGENT",
  contextId: task.contextId,
  taskId: task.id,
  parts: [{ text: e.message }],
  metadata: { code: e.code, _tag: e._tag }
})

/** The status message of a task paused at a human gate: what to approve, as text and as data. */
const pauseMessage = (task: A2aTask, outcome: Extract<Outcome, { _tag: "Paused" }>, messageId: string): Message => ({
  messageId,
  role: "ROLE_AGENT",
  contextId: task.contextId,
  taskId: task.id,
  parts: [
    { text: `approval required for ${outcome.request.capability}: the grantor ${outcome.request.grantor} signs an approval of task ${outcome.request.taskId} and sends it as { approval } on this task` },
    { data: { approvalRequired: outcome.request }, mediaType: "application/json" }
  ],
  metadata: { code: "APPROVAL_REQUIRED" }
})

/** The approval a message carries: a data part `{ approval }`, or a signed approval itself. */
const approvalOf = (m: Message): unknown => {
  for (const d of dataOf(m)) {
    if (isRecord(d) && "approval" in d) return d.approval
    if (isRecord(d) && d.type === "MeshApproval") return d
  }
  return undefined
}

/** A mesh error as the JSON-RPC error of a request (not of a task). */
const asRpc = (e: RunError): RpcFailure =>
  new RpcFailure(
    rpcError(
      e._tag === "AgentUnavailable" || e._tag === "HandlerFailed" || e._tag === "ProviderFailed" ? Codes.INTERNAL_ERROR : e._tag === "AgentNotFound" ? Codes.TASK_NOT_FOUND : Codes.INVALID_PARAMS,
      e.message,
      e.code
    )
  )

/** A request's `historyLength`: absent, or a whole number of at least 0 (else Invalid Params). */
const historyLengthOf = (raw: unknown): Effect.Effect<number | undefined, RpcFailure> => {
  const n = readCount(raw, "historyLength")
  return typeof n === "object" ? fail(Codes.INVALID_PARAMS, n.invalid) : Effect.succeed(n)
}

/** A `ListTasks` page token: where the previous page ended, opaque to the client. */
const pageToken = (c: A2aTaskCursor): string => Buffer.from(`${c.updated}.${c.id}`, "utf8").toString("base64url")

const readPageToken = (token: string): A2aTaskCursor | undefined => {
  const m = /^(\d{1,16})\.(.+)$/s.exec(Buffer.from(token, "base64url").toString("utf8"))
  return m === null || pageToken({ updated: Number(m[1]), id: m[2]! }) !== token ? undefined : { updated: Number(m[1]), id: m[2]! }
}

/** A request id as JSON-RPC allows it (a string, a number, or null), else undefined. */
const readId = (raw: unknown): RpcId | undefined =>
  raw === null || typeof raw === "string" || (typeof raw === "number" && Number.isFinite(raw)) ? raw : undefined

const stringField = (r: Readonly<Record<string, unknown>> | undefined, f: string): string | undefined => (r !== undefined && typeof r[f] === "string" ? (r[f] as string) : undefined)

const handlers = Effect.gen(function* () {
  const execution = yield* Execution
  const gates = yield* Gates
  const tasks = yield* A2aTasks
  const memory = yield* AgentMemory
  const { did } = yield* Identity
  const mandateCache = Option.getOrUndefined(yield* Effect.serviceOption(MandateCache))
  const entropy = yield* Entropy
  // Read without a fiber, so a request whose handler answers at once is answered on the calling stack (Serve).
  const clock = yield* Effect.clock

  /** Applies how a run ended (at `now`) to its task. */
  const conclude = (task: A2aTask, result: Either.Either<Outcome, RunError>, now: number): Effect.Effect<void> => {
    if (Either.isLeft(result)) {
      const e = result.left
      return tasks.settle(task, now, e instanceof AgentForbidden ? "TASK_STATE_REJECTED" : "TASK_STATE_FAILED", failureMessage(task, e, entropy.uuid()))
    }
    const outcome = result.right
    if (outcome._tag === "Paused") {
      task.gateTaskId = outcome.request.taskId
      return tasks.settle(task, now, "TASK_STATE_INPUT_REQUIRED", pauseMessage(task, outcome, entropy.uuid()))
    }
    // The reply is the task's artifact (A2A's place for a task's output); the session's memory keeps the turn.
    task.text = outcome.message
    return tasks.settle(task, now, "TASK_STATE_COMPLETED")
  }

  /** How a run ended, applied to its task at the clock's time. */
  const concludeNow = (task: A2aTask, result: Either.Either<Outcome, RunError>) =>
    Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      return Effect.as(conclude(task, result, now), now)
    })

  /** The run of a task in the background: chunks go to its followers as the reply artifact grows. */
  const background = (task: A2aTask, state: TaskState, approval: Approval | undefined, streaming: boolean) =>
    tasks.run(
      task,
      Effect.flatMap(
        Effect.either(
          execution.execute(state, approval, streaming, (chunk) => {
            const append = task.text.length > 0
            task.text += chunk
            tasks.publish(task, {
              artifactUpdate: { taskId: task.id, contextId: task.contextId, artifact: { artifactId: REPLY_ARTIFACT, name: REPLY_ARTIFACT, parts: [{ text: chunk }] }, append, lastChunk: false }
            })
          })
        ),
        (result) => concludeNow(task, result)
      )
    )

  const sse = (id: RpcId, dialect: Dialect, events: Stream.Stream<StreamResult>) =>
    HttpServerResponse.stream(
      Stream.map(events, (r) => Buffer.from(`data: ${resultText(id, streamResult(dialect, r))}\n\n`)),
      { contentType: Sse.CONTENT_TYPE, headers: { ...Sse.RESPONSE_HEADERS, "a2a-version": versionOf(dialect) } }
    )

  /** The run state of a new task: its session's history loaded, its mandate checked against the caller. */
  const stateOf = (task: A2aTask, message: Message, meta: Readonly<Record<string, unknown>> | undefined, caller: Caller) => {
    const mandate = stringField(meta, "mandate")
    const capability = stringField(meta, "capability")
    const build = (history: TaskState["history"]): TaskState => {
      const data = dataOf(message)
      return {
        message: textOf(message),
        sessionId: task.contextId,
        history,
        context: { a2a: { taskId: task.id, contextId: task.contextId, messageId: message.messageId, ...(data.length === 0 ? {} : { data }) } },
        caller,
        ...(mandate === undefined ? {} : { mandate }),
        ...(capability === undefined ? {} : { capability }),
        journal: [],
        emitted: 0
      }
    }
    // Nothing to check and nothing to load (the usual case) costs no effect at all.
    if ((mandate === undefined || caller.did === undefined) && memory.mode === "none") return Effect.succeed(build([]))
    return Effect.gen(function* () {
      if (mandate !== undefined && caller.did !== undefined) yield* presentedByGrantor(mandate, caller, mandateCache)
      return build(memory.mode === "none" ? [] : yield* Effect.mapError(memory.load(did, caller.principal, task.contextId), storeUnavailable))
    })
  }

  /** The task's run, by the request's configuration: in the request (blocking), or in the background (streamed or not). */
  const start = (
    id: RpcId,
    dialect: Dialect,
    req: HttpServerRequest.HttpServerRequest,
    task: A2aTask,
    state: TaskState,
    approval: Approval | undefined,
    kept: boolean,
    how: { readonly background: boolean; readonly streaming: boolean; readonly historyLength: number | undefined }
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, RpcFailure> => {
    const answer = () => rpcResponse(resultText(id, sendResult(dialect, snapshot(task, how.historyLength))), versionOf(dialect))
    if (!how.background) {
      const ran = Effect.flatMap(Effect.either(execution.execute(state, approval, false, () => undefined)), (result) => concludeNow(task, result))
      // The answer goes out once its task is kept: held back by the lean server, so this request needs no fiber to wait.
      const keep = (now: number) => Effect.suspend(() => tasks.keepEnded(task, now, holdAnswer(req)))
      return Effect.map(kept ? ran : Effect.flatMap(ran, keep), answer)
    }
    const keep = kept ? Effect.void : Effect.mapError(tasks.keep(task), asRpc)
    if (!how.streaming) return Effect.map(Effect.zipRight(keep, background(task, state, approval, false)), answer)
    return Effect.flatMap(keep, () => {
      // Followed before the run starts, so no event of it is missed.
      const events = tasks.follow(task, () => [{ task: snapshot(task, how.historyLength) }])
      return Effect.as(background(task, state, approval, true), sse(id, dialect, events))
    })
  }

  /** The next message of a task waiting for input: the grantor's approval, which resumes it. */
  const resumeTask = (message: Message, taskId: string, caller: Caller) =>
    Effect.gen(function* () {
      const found = yield* Effect.mapError(tasks.find(taskId, caller.principal), asRpc)
      if (found === undefined) return yield* fail(Codes.TASK_NOT_FOUND, `no task ${taskId}`, "TASK_NOT_FOUND")
      if (found.state !== "TASK_STATE_INPUT_REQUIRED" || found.gateTaskId === undefined) {
        return yield* fail(Codes.UNSUPPORTED_OPERATION, `task ${found.id} is ${found.state}: only a task waiting for input takes another message`, "TASK_NOT_PAUSED")
      }
      const given = approvalOf(message)
      if (given === undefined) return yield* fail(Codes.INVALID_PARAMS, "the task waits for the grantor's signed approval: send it as a data part { approval }", "APPROVAL_MALFORMED")
      const claimed = yield* Effect.mapError(gates.resume(found.gateTaskId, given, caller), asRpc)
      const task = found
      task.gateTaskId = undefined
      task.history.push({ ...message, contextId: task.contextId })
      yield* tasks.settle(task, yield* Clock.currentTimeMillis, "TASK_STATE_WORKING")
      return { task, state: claimed.state, approval: claimed.approval }
    })

  /**
   * `SendMessage` and `SendStreamingMessage`: a new task, or the next message of a task waiting for input. Per
   * request, so a new task is built of plain combinators rather than a generator.
   */
  const send = (
    id: RpcId,
    dialect: Dialect,
    req: HttpServerRequest.HttpServerRequest,
    params: Readonly<Record<string, unknown>>,
    streaming: boolean,
    caller: Caller,
    holder: string
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, RpcFailure> => {
    const message = readMessage(dialect, params.message)
    if (typeof message === "string") return fail(Codes.INVALID_PARAMS, message)
    const config = isRecord(params.configuration) ? params.configuration : {}
    const historyLength = readCount(config.historyLength, "historyLength")
    if (typeof historyLength === "object") return fail(Codes.INVALID_PARAMS, historyLength.invalid)
    const how = { background: streaming || config.returnImmediately === true || config.blocking === false, streaming, historyLength }
    if (message.taskId !== undefined) {
      return Effect.flatMap(resumeTask(message, message.taskId, caller), (resumed) => start(id, dialect, req, resumed.task, resumed.state, resumed.approval, true, how))
    }
    const contextId = message.contextId ?? entropy.uuid()
    if (!isSessionId(contextId)) return fail(Codes.INVALID_PARAMS, "message.contextId must be 1 to 128 of A-Z a-z 0-9 . _ : -")
    const meta = params.metadata === undefined && message.metadata === undefined ? undefined : { ...(isRecord(params.metadata) ? params.metadata : {}), ...message.metadata }
    const task = tasks.make(contextId, caller.principal, message, clock.unsafeCurrentTimeMillis(), holder)
    return Effect.flatMap(Effect.mapError(stateOf(task, message, meta, caller), asRpc), (state) => start(id, dialect, req, task, state, undefined, false, how))
  }

  const taskParam = (params: Readonly<Record<string, unknown>>, caller: Caller) => {
    if (typeof params.id !== "string" || params.id.length === 0) return fail(Codes.INVALID_PARAMS, "params.id must be a task id")
    return Effect.flatMap(Effect.mapError(tasks.find(params.id, caller.principal), asRpc), (task) =>
      task === undefined ? fail(Codes.TASK_NOT_FOUND, `no task ${params.id}`, "TASK_NOT_FOUND") : Effect.succeed(task))
  }

  const get = (id: RpcId, dialect: Dialect, params: Readonly<Record<string, unknown>>, caller: Caller) =>
    Effect.gen(function* () {
      const historyLength = yield* historyLengthOf(params.historyLength)
      const task = yield* taskParam(params, caller)
      return rpcResponse(resultText(id, taskResult(dialect, snapshot(task, historyLength))), versionOf(dialect))
    })

  /**
   * `ListTasks`: the caller's own tasks (its principal, and for an anonymous caller its address: the holder its task
   * bytes count against), newest status first, a page at a time.
   */
  const list = (id: RpcId, dialect: Dialect, params: Readonly<Record<string, unknown>>, holder: string, caller: Caller) =>
    Effect.gen(function* () {
      const q = readListQuery(params)
      if (typeof q === "string") return yield* fail(Codes.INVALID_PARAMS, q)
      const after = q.pageToken === undefined ? undefined : readPageToken(q.pageToken)
      if (q.pageToken !== undefined && after === undefined) return yield* fail(Codes.INVALID_PARAMS, "pageToken is not one this agent gave")
      const page = yield* Effect.mapError(
        tasks.list({ principal: caller.principal, holder, contextId: q.contextId, state: q.state, updatedAfter: q.updatedAfter, after, limit: q.pageSize + 1 }),
        asRpc
      )
      // One more than the page is read: whether it exists says whether there is a next page.
      const shown = page.tasks.slice(0, q.pageSize)
      const last = shown[shown.length - 1]
      const next = page.tasks.length > q.pageSize && last !== undefined ? pageToken({ updated: updatedOf({ timestamp: last.timestamp }, 0), id: last.id }) : ""
      const result: TaskPage = {
        tasks: shown.map((t) => snapshot(t, q.historyLength, q.includeArtifacts)),
        nextPageToken: next,
        pageSize: q.pageSize,
        totalSize: page.total
      }
      return rpcResponse(resultText(id, result), versionOf(dialect))
    })

  const cancel = (id: RpcId, dialect: Dialect, params: Readonly<Record<string, unknown>>, caller: Caller) =>
    Effect.gen(function* () {
      const task = yield* taskParam(params, caller)
      if (isTerminal(task.state)) return yield* fail(Codes.TASK_NOT_CANCELABLE, `task ${task.id} is ${task.state}`, "TASK_NOT_CANCELABLE")
      yield* tasks.interrupt(task)
      task.gateTaskId = undefined
      yield* tasks.settle(task, yield* Clock.currentTimeMillis, "TASK_STATE_CANCELED")
      return rpcResponse(resultText(id, taskResult(dialect, snapshot(task))), versionOf(dialect))
    })

  const subscribe = (id: RpcId, dialect: Dialect, params: Readonly<Record<string, unknown>>, caller: Caller) =>
    Effect.gen(function* () {
      const task = yield* taskParam(params, caller)
      if (isTerminal(task.state)) return yield* fail(Codes.UNSUPPORTED_OPERATION, `task ${task.id} is ${task.state}: nothing more to follow`, "TASK_ENDED")
      return sse(id, dialect, tasks.follow(task, () => [{ task: snapshot(task) }]))
    })

  /** The method a request calls, with its params: the answer, or the failure to answer with. */
  const dispatch = (
    payload: unknown,
    id: RpcId,
    req: HttpServerRequest.HttpServerRequest,
    caller: Caller
  ): { readonly dialect: Dialect; readonly answer: Effect.Effect<HttpServerResponse.HttpServerResponse, RpcFailure> } => {
    const failing = (answer: Effect.Effect<never, RpcFailure>) => ({ dialect: "1.0" as const, answer })
    if (!isRecord(payload) || payload.jsonrpc !== "2.0" || typeof payload.method !== "string") {
      return failing(fail(Codes.INVALID_REQUEST, Array.isArray(payload) ? "batches are not supported" : "not a JSON-RPC 2.0 request"))
    }
    if (readId(payload.id) === undefined) return failing(fail(Codes.INVALID_REQUEST, "a request needs an id: a string or a number"))
    const version = checkVersion(req.headers[VERSION_HEADER])
    if (version !== undefined) return failing(version)
    const method = METHODS.get(payload.method)
    if (method === undefined) {
      const code = UNSUPPORTED.get(payload.method)
      return failing(
        code === undefined
          ? fail(Codes.METHOD_NOT_FOUND, `method ${JSON.stringify(payload.method.slice(0, 100))} not found`)
          : fail(code, `${payload.method} is not offered by this agent`)
      )
    }
    const dialect = method.dialect
    const params = payload.params
    if (!isRecord(params)) return { dialect, answer: fail(Codes.INVALID_PARAMS, "params must be an object") }
    const holder = () => holderOf(caller, Option.getOrUndefined(req.remoteAddress))
    switch (method.op) {
      case "send":
        return { dialect, answer: send(id, dialect, req, params, false, caller, holder()) }
      case "stream":
        return { dialect, answer: send(id, dialect, req, params, true, caller, holder()) }
      case "get":
        return { dialect, answer: get(id, dialect, params, caller) }
      case "cancel":
        return { dialect, answer: cancel(id, dialect, params, caller) }
      case "subscribe":
        return { dialect, answer: subscribe(id, dialect, params, caller) }
      case "list":
        return { dialect, answer: list(id, dialect, params, holder(), caller) }
    }
  }

  // Per request, so built of plain combinators rather than generators: a request answered at once runs without a fiber.
  const rpc = (payload: unknown, req: HttpServerRequest.HttpServerRequest) =>
    Effect.flatMap(CurrentCaller, (caller) => {
      // The id is read first, so an Invalid Request answer names the request whenever its id is readable.
      const id = (isRecord(payload) ? readId(payload.id) : undefined) ?? null
      const { answer, dialect } = dispatch(payload, id, req, caller)
      return Effect.catchAll(answer, (e) =>
        Effect.map(CorrelationId, (cid) =>
          rpcResponse(errorText(id, { ...e.error, data: { ...(isRecord(e.error.data) ? e.error.data : {}), correlationId: cid } }), versionOf(dialect)))
      )
    })

  return { rpc }
})

/**
 * The serving layer's refusals on `POST /`, as JSON-RPC answers (HTTP 200, as JSON-RPC over HTTP answers errors):
 * unreadable JSON is a parse error, a body that is not JSON an unsupported content type, a body over the limit (left
 * unread) an invalid request; `data.code` keeps the serving layer's code.
 */
export const refusal: RefusalWriter = ({ code, correlationId, message }) => {
  const rpc = code === "INVALID_JSON" ? Codes.PARSE_ERROR : code === "UNSUPPORTED_MEDIA_TYPE" ? Codes.CONTENT_TYPE_NOT_SUPPORTED : Codes.INVALID_REQUEST
  return { status: 200, body: errorText(null, rpcError(rpc, message, code, correlationId)) }
}

/** The handlers of the A2A groups of `AgentApi`. */
export const layer = Layer.mergeAll(
  ApiGroup.group(AgentApi, "a2a", (h) => Effect.map(handlers, ({ rpc }) => h.handle("rpc", ({ payload, request }) => rpc(payload, request)))),
  ApiGroup.group(AgentApi, "a2aCard", (h) =>
    Effect.map(A2aCard, (card) =>
      h.handle("card", () =>
        Effect.map(card.text, (text) =>
          HttpServerResponse.raw(text, { status: 200, contentType: "application/json", headers: { "content-length": String(Buffer.byteLength(text)), "cache-control": "public, max-age=300" } })
        )
      )
    )
  )
)
