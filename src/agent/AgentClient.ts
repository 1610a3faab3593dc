/**
 * Calls between agents: `call` resolves an agent's `didHash` through the hub (cached), posts to its `/v1/run` and,
 * with `signAs`, signs the request with mesh-sig; `stream` reads the reply as SSE and, when the connection drops
 * mid-stream, reconnects with `Last-Event-ID` so no event is lost or repeated. A target that starts with `http://`
 * or `https://` is used as the agent's base URL as is. A call made while serving a request carries that request's
 * correlation id and a W3C `traceparent` (the current span's while tracing, else the incoming one), both covered by
 * the mesh-sig signature, so one user request can be followed across agents (docs/operations.md, "Traces").
 *
 * A `didHash` the hub knows as an A2A agent (registered from its card, docs/bridges.md "A2A") is called over A2A
 * instead: JSON-RPC `SendMessage` (or `SendStreamingMessage`) at the JSON-RPC interface its card names, 1.0 when the
 * card offers it, else 0.3; the reply is the task's artifacts, a failed task an `AgentCallError` with the agent's
 * code, and the same auth options apply (bearer token, mesh-sig).
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Clock from "effect/Clock"
import * as Option from "effect/Option"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ApprovalRequired, ChatMessage, RunReply } from "./AgentApi.js"
import { verificationMethodId } from "../core/Did.js"
import { signRequest } from "../core/HttpSignature.js"
import { Keys, type PrivateKeyInput } from "../core/Keys.js"
import * as MeshClient from "../hub/MeshClient.js"
import * as Sse from "../core/Sse.js"
import * as A2a from "./A2aProtocol.js"
import { CorrelationId, HEADER as CORRELATION_HEADER } from "../http/CorrelationId.js"
import { HEADER as TRACEPARENT, outgoing, traced, tracedStream } from "../http/Tracing.js"
import { tryParseJsonStrict } from "../core/internal/json.js"
import { isRecord } from "../core/internal/record.js"
import { Entropy } from "../core/Entropy.js"

/**
 * A call failed; `code` is the agent's (or the hub's) error code, or one of AGENT_NOT_FOUND, AGENT_NOT_CALLABLE (a
 * caller-only identity, registered without an endpoint), AGENT_UNREACHABLE,
 * ADDRESS_NOT_PUBLIC (the connection refused a non-public address: a hub's outbound rule), BAD_RESPONSE, SSE_LIMIT_EXCEEDED (a streamed reply sent an event or a stream past the client's `sse` limits),
 * REPLY_TOO_LARGE (a reply that is not an event stream declared or sent more than `maxReplyBytes`).
 */
export class AgentCallError extends Schema.TaggedError<AgentCallError>()("AgentCallError", {
  code: Schema.String,
  message: Schema.String,
  status: Schema.optional(Schema.Number),
  correlationId: Schema.optional(Schema.String)
}) {}

/** The caller's identity for mesh-sig. */
export interface SignAs {
  readonly did: string
  readonly privateKey: PrivateKeyInput
}

/** What a call sends beside the message. */
export interface CallOptions {
  readonly sessionId?: string
  readonly history?: ReadonlyArray<ChatMessage>
  readonly context?: Readonly<Record<string, unknown>>
  /** A task mandate granted to the called agent. */
  readonly mandate?: string
  /** Sign the request with mesh-sig as this identity. */
  readonly signAs?: SignAs
  /** Send `Authorization: Bearer <token>` (agents with bearer auth). */
  readonly bearerToken?: string
  /** The capability asked for; the handler sees it and a commit token records it. */
  readonly capability?: string
  /** Ask the agent for a commit token (a signed receipt) for this saga step; the reply carries it as `commitToken`. */
  readonly commit?: { readonly sagaId: string; readonly step: string; readonly amountUsd?: string }
  /** Sent as `Idempotency-Key`: the agent answers a repeat with the stored reply and never runs the handler twice. */
  readonly idempotencyKey?: string
  /** Sent as `X-Correlation-Id`; default the correlation id of the request being served, if any. */
  readonly correlationId?: string
  /** Sent as `traceparent`; default the current span's while tracing, else the served request's own, if any. */
  readonly traceparent?: string
}

/** A call's result: the reply, or the task paused at a human gate. */
export type CallResult = RunReply | ApprovalRequired

/** One event of a streamed call. */
export type StreamEvent =
  | { readonly type: "chunk"; readonly text: string }
  | { readonly type: "done"; readonly message: string; readonly sessionId: string; readonly commitToken?: string }
  | ({ readonly type: "approval_required" } & ApprovalRequired)

/** Client settings. */
export interface AgentClientOptions {
  /** The hub that resolves `didHash` targets. */
  readonly hubUrl?: string
  /** How long a resolved endpoint is reused; default 30 s. */
  readonly cacheTtlMs?: number
  /** Reconnects of a dropped stream; default 3. */
  readonly reconnects?: number
  /** How large a streamed reply may be: default 1 MiB per event, 64 MiB per stream (each connection counted apart). */
  readonly sse?: Sse.SseLimits
  /** How large any other reply (JSON, an error body, the discovery document) may be, in bytes; default 4 MiB. */
  readonly maxReplyBytes?: number
}

/** The operations of an agent client. */
export interface AgentClientApi {
  /** The base URL of the agent with this `didHash` (or the URL itself). */
  readonly endpointOf: (target: string) => Effect.Effect<string, AgentCallError>
  /** Runs `message` on the target agent. */
  readonly call: (target: string, message: string, options?: CallOptions) => Effect.Effect<CallResult, AgentCallError>
  /** Runs `message` and streams the reply's events. */
  readonly stream: (target: string, message: string, options?: CallOptions) => Stream.Stream<StreamEvent, AgentCallError>
  /** The agent's signed discovery document (`/.well-known/mesh-agent.json`), as a JSON object. */
  readonly discover: (target: string) => Effect.Effect<Readonly<Record<string, unknown>>, AgentCallError>
  /** Resumes a task paused at a human gate with the grantor's signed approval. */
  readonly resume: (
    target: string,
    taskId: string,
    approval: unknown,
    options?: Pick<CallOptions, "signAs" | "bearerToken">
  ) => Effect.Effect<CallResult, AgentCallError>
}

/** The code of a reply that is not an event stream and is larger than the client's `maxReplyBytes`. */
export const REPLY_TOO_LARGE = "REPLY_TOO_LARGE"

/** The code of a call the client's connection refused because the agent's address is not public (a hub's outbound rule). */
export const ADDRESS_NOT_PUBLIC = "ADDRESS_NOT_PUBLIC"

const unreachable = (e: { readonly message: string; readonly cause?: unknown }) =>
  isRecord(e.cause) && e.cause.code === "ENOTPUBLIC"
    ? new AgentCallError({ code: ADDRESS_NOT_PUBLIC, message: "the agent's address is not public, and this hub calls public addresses only; start the hub with --outbound-urls any to reach agents on its own networks" })
    : new AgentCallError({ code: "AGENT_UNREACHABLE", message: e.message })
const badResponse = (message: string, status?: number) =>
  new AgentCallError(status === undefined ? { code: "BAD_RESPONSE", message } : { code: "BAD_RESPONSE", message, status })

/** An error body `{ _tag, error, code, correlationId }` as an `AgentCallError`. */
const fromErrorBody = (body: unknown, status?: number): AgentCallError =>
  isRecord(body) && typeof body.code === "string"
    ? new AgentCallError({
        code: body.code,
        message: typeof body.error === "string" ? body.error : body.code,
        ...(status === undefined ? {} : { status }),
        ...(typeof body.correlationId === "string" ? { correlationId: body.correlationId } : {})
      })
    : badResponse(`unexpected answer${status === undefined ? "" : ` (HTTP ${status})`}`, status)

const isHttpUrl = (s: string) => /^https?:\/\//i.test(s)

// A reply with no body at all (204, HEAD) reads as empty text, as `response.text` read it.
const bodyOf = (response: HttpClientResponse.HttpClientResponse) =>
  Stream.catchAll(response.stream, (e) => (e.reason === "EmptyBody" ? Stream.empty : Stream.fail(e)))

type Post = (
  url: string,
  payload: unknown,
  options: Pick<CallOptions, "signAs" | "bearerToken" | "correlationId" | "traceparent">,
  headers: Record<string, string>
) => Effect.Effect<HttpClientResponse.HttpClientResponse, AgentCallError>

/** The correlation id and trace context a call carries (`CallOptions`), added to `headers`. */
const withTraceContext = (headers: Record<string, string>, o: Pick<CallOptions, "correlationId" | "traceparent">) =>
  Effect.gen(function* () {
    const out = { ...headers }
    const cid = o.correlationId ?? Option.getOrUndefined(yield* Effect.serviceOption(CorrelationId))
    if (cid !== undefined) out[CORRELATION_HEADER] = cid
    const parent = o.traceparent ?? (yield* outgoing)
    if (parent !== undefined) out[TRACEPARENT] = parent
    return out
  })

/** A POST of `payload` over `http`, signed and authorized as asked. */
const poster = (http: HttpClient.HttpClient, keys: Context.Tag.Service<Keys>): Post => {
  const untraced = HttpClient.withTracerPropagation(http, false)
  return (url, payload, options, headers) =>
  Effect.gen(function* () {
    const body = new TextEncoder().encode(JSON.stringify(payload))
    const sent = yield* withTraceContext(headers, options)
    let request = HttpClientRequest.post(url).pipe(
      HttpClientRequest.setHeaders(sent),
      HttpClientRequest.bodyUint8Array(body, "application/json")
    )
    if (options.bearerToken !== undefined) request = HttpClientRequest.bearerToken(request, options.bearerToken)
    if (options.signAs !== undefined) {
      const signed = yield* signRequest(
        // The correlation id and traceparent are signed too: a relay cannot swap them.
        { method: "POST", url, body, headers: sent },
        { privateKey: options.signAs.privateKey, keyId: verificationMethodId(options.signAs.did.toLowerCase()) }
      ).pipe(
        Effect.provideService(Keys, keys),
        Effect.mapError((e) => new AgentCallError({ code: e.code, message: e.message }))
      )
      request = HttpClientRequest.setHeaders(request, signed)
    }
    // The client's own propagation would replace the signed traceparent after signing; ours is already set.
    return yield* Effect.mapError(untraced.execute(request), unreachable)
  })
}

/** Where a call goes: a mesh agent's base URL, or an A2A agent's JSON-RPC endpoint and the dialect it speaks. */
type Target = { readonly kind: "mesh"; readonly url: string } | { readonly kind: "a2a"; readonly url: string; readonly dialect: A2a.Dialect }

/**
 * Resolves targets: a URL as is, a `didHash` through the hub (an agent, else an A2A agent by its stored card), each
 * answer reused for `ttl` ms.
 */
const endpoints = (hub: MeshClient.MeshClientApi | undefined, ttl: number) => {
  const cache = new Map<string, { readonly target: Target; readonly until: number }>()
  const failed = (target: string) => (e: { readonly _tag: string; readonly code: string; readonly message: string }) =>
    e._tag === "NotFound"
      ? new AgentCallError({ code: "AGENT_NOT_FOUND", message: `no agent ${target} in the hub` })
      : new AgentCallError({ code: e.code, message: e.message })
  return (target: string): Effect.Effect<Target, AgentCallError> => {
    if (isHttpUrl(target)) return Effect.succeed({ kind: "mesh", url: target.replace(/\/+$/, "") })
    if (hub === undefined) return Effect.fail(new AgentCallError({ code: "AGENT_NOT_FOUND", message: `no hubUrl to resolve ${target}` }))
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const hit = cache.get(target)
      if (hit !== undefined && hit.until > now) return Effect.succeed(hit.target)
      const a2a = Effect.flatMap(Effect.mapError(hub.resolveA2a(target), failed(target)), (record): Effect.Effect<Target, AgentCallError> => {
        const found = A2a.jsonRpcInterface(record.card)
        return found === undefined
          ? Effect.fail(badResponse(`the card of the A2A agent ${target} names no JSON-RPC interface`))
          : Effect.succeed({ kind: "a2a", url: found.url, dialect: found.dialect })
      })
      return hub.resolveAgent(target).pipe(
        Effect.flatMap((record): Effect.Effect<Target, AgentCallError> =>
          record.endpointUrl === ""
            ? Effect.fail(new AgentCallError({ code: "AGENT_NOT_CALLABLE", message: `${target} (${record.did}) is registered as a caller only, with no endpoint to call` }))
            : Effect.succeed({ kind: "mesh", url: record.endpointUrl.replace(/\/+$/, "") })
        ),
        Effect.catchAll((e) => (e._tag === "NotFound" ? a2a : Effect.fail(failed(target)(e)))),
        Effect.tap((t) => Effect.sync(() => cache.set(target, { target: t, until: now + ttl })))
      )
    })
  }
}

// --- A2A targets ---------------------------------------------------------------------------------------------------

const A2A_ERRORS: ReadonlyMap<number, string> = new Map([
  [A2a.Codes.PARSE_ERROR, "A2A_PARSE_ERROR"],
  [A2a.Codes.INVALID_REQUEST, "A2A_INVALID_REQUEST"],
  [A2a.Codes.METHOD_NOT_FOUND, "A2A_METHOD_NOT_FOUND"],
  [A2a.Codes.INVALID_PARAMS, "A2A_INVALID_PARAMS"],
  [A2a.Codes.INTERNAL_ERROR, "A2A_INTERNAL_ERROR"],
  [A2a.Codes.TASK_NOT_FOUND, "TASK_NOT_FOUND"],
  [A2a.Codes.UNSUPPORTED_OPERATION, "A2A_UNSUPPORTED_OPERATION"],
  [A2a.Codes.VERSION_NOT_SUPPORTED, "A2A_VERSION_NOT_SUPPORTED"]
])

/** A JSON-RPC error object as an `AgentCallError`: the mesh code an agent-mesh server puts in `data.code`, else one named after the JSON-RPC code. */
const fromRpcError = (error: unknown): AgentCallError => {
  const e = isRecord(error) ? error : {}
  const data = isRecord(e.data) ? e.data : {}
  const code = typeof data.code === "string" ? data.code : (typeof e.code === "number" ? A2A_ERRORS.get(e.code) : undefined) ?? "A2A_ERROR"
  return new AgentCallError({ code, message: typeof e.message === "string" ? e.message : code, ...(typeof data.correlationId === "string" ? { correlationId: data.correlationId } : {}) })
}

/** The JSON-RPC request of a call to an A2A agent, in its dialect. */
const a2aRequest = (dialect: A2a.Dialect, message: string, o: CallOptions, streaming: boolean, messageId: string) => {
  const metadata = {
    ...(o.mandate === undefined ? {} : { mandate: o.mandate }),
    ...(o.capability === undefined ? {} : { capability: o.capability }),
    ...(o.context === undefined ? {} : { context: o.context })
  }
  const meta = Object.keys(metadata).length === 0 ? {} : { metadata }
  const context = o.sessionId === undefined ? {} : { contextId: o.sessionId }
  return dialect === "1.0"
    ? { jsonrpc: "2.0", id: 1, method: streaming ? "SendStreamingMessage" : "SendMessage", params: { message: { messageId, role: "ROLE_USER", parts: [{ text: message }], ...context }, ...meta } }
    : { jsonrpc: "2.0", id: 1, method: streaming ? "message/stream" : "message/send", params: { message: { kind: "message", messageId, role: "user", parts: [{ kind: "text", text: message }], ...context }, ...meta } }
}

const a2aHeaders = (dialect: A2a.Dialect, accept: string): Record<string, string> => ({ accept, [A2a.VERSION_HEADER]: dialect === "1.0" ? A2a.VERSION_1_0 : A2a.VERSION_0_3 })

/** A task that stopped short of completing, as the caller sees it: a human gate's approval request, or an error. */
const unfinished = (task: A2a.Task): Effect.Effect<CallResult, AgentCallError> => {
  const m = task.status.message
  if (task.status.state === "TASK_STATE_INPUT_REQUIRED") {
    const asked = m === undefined ? undefined : A2a.dataOf(m).find((d) => isRecord(d) && isRecord(d.approvalRequired))
    if (isRecord(asked)) return Effect.succeed({ status: "approval_required", sessionId: task.contextId, approvalRequired: asked.approvalRequired } as unknown as ApprovalRequired)
  }
  const code = m !== undefined && typeof m.metadata?.code === "string" ? m.metadata.code : `A2A_${task.status.state.replace("TASK_STATE_", "")}`
  return Effect.fail(new AgentCallError({ code, message: m === undefined || A2a.textOf(m) === "" ? `the A2A task ended ${task.status.state}` : A2a.textOf(m) }))
}

/** The `result` of a `SendMessage` (either dialect) as a call's result. */
const a2aResult = (result: unknown, sessionId: string | undefined): Effect.Effect<CallResult, AgentCallError> => {
  const wrapped = isRecord(result) && isRecord(result.task) ? result.task : isRecord(result) && isRecord(result.message) ? result.message : result
  const task = A2a.readTask(wrapped)
  if (task !== undefined) {
    return task.status.state === "TASK_STATE_COMPLETED" ? Effect.succeed({ message: A2a.taskText(task), sessionId: task.contextId }) : unfinished(task)
  }
  const message = A2a.readAnyMessage(wrapped)
  if (message !== undefined) return Effect.succeed({ message: A2a.textOf(message), sessionId: message.contextId ?? sessionId ?? "" })
  return Effect.fail(badResponse("the A2A agent answered neither a task nor a message"))
}

/** The JSON-RPC answer of an A2A agent as a call's result. */
const readA2aResult = (maxReply: number, sessionId: string | undefined) => (response: HttpClientResponse.HttpClientResponse): Effect.Effect<CallResult, AgentCallError> =>
  Effect.flatMap(readJson(maxReply)(response), (body) => {
    if (!isRecord(body) || body.jsonrpc !== "2.0") return Effect.fail(fromErrorBody(body, response.status))
    if ("error" in body) return Effect.fail(fromRpcError(body.error))
    return a2aResult(body.result, sessionId)
  })

/** The events of an A2A stream (either dialect) as a call's stream events; the reply so far is kept to say it whole at the end. */
const a2aEvents = (dialect: A2a.Dialect, sessionId: string | undefined) => {
  let text = ""
  let context = sessionId ?? ""
  return (e: Sse.SseEvent): Effect.Effect<ReadonlyArray<StreamEvent>, AgentCallError> => {
    const parsed = tryParseJsonStrict(e.data)
    if (!parsed.ok || !isRecord(parsed.value)) return Effect.fail(badResponse("an A2A event is not a JSON-RPC response"))
    const body = parsed.value
    if ("error" in body) return Effect.fail(fromRpcError(body.error))
    const r = body.result
    if (!isRecord(r)) return Effect.fail(badResponse("an A2A event has no result"))
    const kind = dialect === "0.3" ? r.kind : "task" in r ? "task" : "message" in r ? "message" : "statusUpdate" in r ? "status-update" : "artifactUpdate" in r ? "artifact-update" : undefined
    const value = dialect === "0.3" ? r : kind === "task" ? r.task : kind === "message" ? r.message : kind === "status-update" ? r.statusUpdate : r.artifactUpdate
    const done = (): ReadonlyArray<StreamEvent> => [{ type: "done", message: text, sessionId: context }]
    const chunk = (t: string): ReadonlyArray<StreamEvent> => {
      if (t.length === 0) return []
      text += t
      return [{ type: "chunk", text: t }]
    }
    if (kind === "task") {
      const task = A2a.readTask(value)
      if (task === undefined) return Effect.fail(badResponse("an A2A task event is not a task"))
      context = task.contextId
      const first = chunk(A2a.taskText(task).slice(text.length))
      if (task.status.state === "TASK_STATE_COMPLETED") return Effect.succeed([...first, ...done()])
      if (A2a.isTerminal(task.status.state) || A2a.isInterrupted(task.status.state)) {
        return Effect.map(unfinished(task), (paused) => [...first, { type: "approval_required" as const, ...(paused as ApprovalRequired) }])
      }
      return Effect.succeed(first)
    }
    if (kind === "message") {
      const m = A2a.readAnyMessage(value)
      return Effect.succeed([...chunk(m === undefined ? "" : A2a.textOf(m)), ...done()])
    }
    if (kind === "artifact-update" && isRecord(value)) {
      const parts = isRecord(value.artifact) && Array.isArray(value.artifact.parts) ? value.artifact.parts : []
      return Effect.succeed(chunk(parts.map((p) => (isRecord(p) && typeof p.text === "string" ? p.text : "")).join("")))
    }
    if (kind === "status-update" && isRecord(value)) {
      const state = isRecord(value.status) ? A2a.readState(value.status.state) : undefined
      if (state === undefined || (!A2a.isTerminal(state) && !A2a.isInterrupted(state))) return Effect.succeed([])
      if (state === "TASK_STATE_COMPLETED") return Effect.succeed(done())
      const message = isRecord(value.status) ? A2a.readAnyMessage(value.status.message) : undefined
      const task: A2a.Task = { id: String(value.taskId ?? ""), contextId: context, status: { state, ...(message === undefined ? {} : { message }) } }
      return Effect.map(unfinished(task), (paused) => [{ type: "approval_required" as const, ...(paused as ApprovalRequired) }])
    }
    return Effect.succeed([])
  }
}

/** A streamed call to an A2A agent: its events until the task ends (or waits for input). */
const a2aStream = (post: Post, sse: Sse.SseLimits | undefined, maxReply: number, target: Extract<Target, { kind: "a2a" }>, message: string, o: CallOptions, messageId: string): Stream.Stream<StreamEvent, AgentCallError> =>
  Stream.unwrap(
    Effect.map(post(target.url, a2aRequest(target.dialect, message, o, true, messageId), o, a2aHeaders(target.dialect, "text/event-stream")), (response) => {
      if (response.status !== 200 || !Sse.isEventStream(response.headers["content-type"])) {
        // A JSON-RPC error before the stream started comes as a plain JSON answer.
        return Stream.fromEffect(Effect.flatMap(readA2aResult(maxReply, o.sessionId)(response), () => Effect.fail(badResponse("the A2A agent answered a stream request without a stream"))))
      }
      const read = a2aEvents(target.dialect, o.sessionId)
      let finished = false
      return Sse.parse(Stream.mapError(response.stream, unreachable), sse).pipe(
        Stream.catchTag("SseLimitExceeded", (e) => Stream.fail(new AgentCallError({ code: "SSE_LIMIT_EXCEEDED", message: e.message }))),
        Stream.mapEffect(read),
        Stream.flattenIterables,
        Stream.tap((e) => Effect.sync(() => void (finished ||= e.type !== "chunk"))),
        Stream.takeUntil((e) => e.type !== "chunk"),
        Stream.concat(Stream.suspend(() => (finished ? Stream.empty : Stream.fail(unreachable({ message: "the A2A stream ended before the task did" })))))
      )
    })
  )

const runPayload = (message: string, o: CallOptions) => ({
  message,
  ...(o.sessionId === undefined ? {} : { sessionId: o.sessionId }),
  ...(o.history === undefined ? {} : { history: o.history }),
  ...(o.context === undefined ? {} : { context: o.context }),
  ...(o.mandate === undefined ? {} : { mandate: o.mandate }),
  ...(o.capability === undefined ? {} : { capability: o.capability }),
  ...(o.commit === undefined ? {} : { commit: o.commit })
})

const runHeaders = (o: CallOptions, accept: string): Record<string, string> =>
  o.idempotencyKey === undefined ? { accept } : { accept, "idempotency-key": o.idempotencyKey }

/** A response body read under `maxReply` bytes, whatever the peer declares or sends. */
const readBody = (maxReply: number) => (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string, AgentCallError> =>
  Sse.readReply(bodyOf(response), { maxBytes: maxReply, contentLength: response.headers["content-length"] }).pipe(
    Effect.catchTag("ReplyTooLarge", (e) => Effect.fail(new AgentCallError({ code: REPLY_TOO_LARGE, message: e.message, status: response.status }))),
    Effect.mapError((e) => (e instanceof AgentCallError ? e : unreachable(e)))
  )

/** A response body as strict JSON (I-JSON: no duplicate names, no `__proto__`), read under `maxReply` bytes. */
const readJson = (maxReply: number) => (response: HttpClientResponse.HttpClientResponse): Effect.Effect<unknown, AgentCallError> =>
  Effect.flatMap(readBody(maxReply)(response), (text) => {
    const parsed = tryParseJsonStrict(text)
    return parsed.ok
      ? Effect.succeed(parsed.value)
      : Effect.fail(badResponse(`the agent answered HTTP ${response.status} without JSON (${parsed.error.reason})`, response.status))
  })

const readResult = (maxReply: number) => (response: HttpClientResponse.HttpClientResponse): Effect.Effect<CallResult, AgentCallError> =>
  Effect.flatMap(
    readJson(maxReply)(response),
    (body): Effect.Effect<CallResult, AgentCallError> => {
      if (response.status === 200 && isRecord(body) && typeof body.message === "string" && typeof body.sessionId === "string") {
        return Effect.succeed({
          message: body.message,
          sessionId: body.sessionId,
          ...(typeof body.commitToken === "string" ? { commitToken: body.commitToken } : {})
        })
      }
      if (response.status === 202 && isRecord(body) && body.status === "approval_required") return Effect.succeed(body as unknown as ApprovalRequired)
      return Effect.fail(fromErrorBody(body, response.status))
    }
  )

const toEvent = (e: Sse.SseEvent): Effect.Effect<StreamEvent | undefined, AgentCallError> => {
  const parsed = tryParseJsonStrict(e.data)
  if (!parsed.ok) return Effect.fail(badResponse(`an event's data is not JSON (${parsed.error.reason})`))
  const data = parsed.value
  if (!isRecord(data)) return Effect.fail(badResponse("an event's data is not an object"))
  switch (e.event) {
    case "chunk":
      return Effect.succeed({ type: "chunk", text: String(data.text ?? "") })
    case "done":
      return Effect.succeed({
        type: "done",
        message: String(data.message ?? ""),
        sessionId: String(data.sessionId ?? ""),
        ...(typeof data.commitToken === "string" ? { commitToken: data.commitToken } : {})
      })
    case "approval_required":
      return Effect.succeed({ type: "approval_required", ...(data as unknown as ApprovalRequired) })
    case "error":
      return Effect.fail(fromErrorBody(data))
    default:
      return Effect.succeed(undefined)
  }
}

/**
 * The events of a streamed run posted to `url`; when the connection drops before the final event, it reconnects
 * from the last event seen (`Last-Event-ID`), at most `left` more times.
 */
const resumable = (post: Post, sse: Sse.SseLimits | undefined, maxReply: number, payload: unknown, o: CallOptions) => {
  const attempt = (url: string, lastId: string | undefined, left: number): Stream.Stream<StreamEvent, AgentCallError> => {
    let last = lastId
    let finished = false
    const again = (cause: AgentCallError): Stream.Stream<StreamEvent, AgentCallError> =>
      finished ? Stream.empty : left > 0 && last !== undefined ? attempt(url, last, left - 1) : Stream.fail(cause)
    const headers: Record<string, string> = { accept: "text/event-stream", ...(last === undefined ? {} : { "last-event-id": last }) }
    return Stream.unwrap(
      Effect.map(post(url, payload, o, headers), (response) => {
        if (response.status !== 200 || !Sse.isEventStream(response.headers["content-type"])) {
          // Whatever the body holds, it is read under the same cap: answering without SSE is no way around the limits.
          const body = Effect.catchIf(readJson(maxReply)(response), (e) => e.code !== REPLY_TOO_LARGE, () => Effect.succeed(undefined))
          return Stream.fromEffect(Effect.flatMap(body, (b) => Effect.fail(fromErrorBody(b, response.status))))
        }
        const events = Sse.parse(Stream.mapError(response.stream, unreachable), sse).pipe(
          Stream.catchTag("SseLimitExceeded", (e) => Stream.fail(new AgentCallError({ code: "SSE_LIMIT_EXCEEDED", message: e.message }))),
          Stream.mapEffect((e) => {
            if (e.id !== undefined) last = e.id
            if (e.event === "done" || e.event === "approval_required" || e.event === "error") finished = true
            return toEvent(e)
          }),
          Stream.filter((e): e is StreamEvent => e !== undefined)
        )
        // A drop before the final event is a transport failure: reconnect from the last event seen.
        let dropped: AgentCallError | undefined
        return Stream.concat(
          Stream.catchAll(events, (e) => (e.code === "AGENT_UNREACHABLE" ? Stream.sync(() => void (dropped = e)).pipe(Stream.drain) : Stream.fail(e))),
          Stream.suspend(() => again(dropped ?? unreachable({ message: "the stream ended before its final event" })))
        )
      })
    )
  }
  return attempt
}

/** Builds the client over an `HttpClient`. */
export const make = (options: AgentClientOptions = {}): Effect.Effect<AgentClientApi, never, HttpClient.HttpClient | Keys> =>
  Effect.gen(function* () {
    const http = yield* HttpClient.HttpClient
    const post = poster(http, yield* Keys)
    const entropy = yield* Entropy
    const reconnects = options.reconnects ?? 3
    const maxReply = options.maxReplyBytes ?? Sse.DEFAULT_MAX_REPLY_BYTES
    const hub = options.hubUrl === undefined ? undefined : yield* MeshClient.make({ hubUrl: options.hubUrl, retry: { times: 2 } })
    const targetOf = endpoints(hub, options.cacheTtlMs ?? 30_000)
    const endpointOf = (target: string) => Effect.map(targetOf(target), (t) => t.url)

    const call = (target: string, message: string, o: CallOptions = {}) =>
      Effect.flatMap(targetOf(target), (t) =>
        t.kind === "a2a"
          ? Effect.flatMap(post(t.url, a2aRequest(t.dialect, message, o, false, entropy.uuid()), o, a2aHeaders(t.dialect, "application/json")), readA2aResult(maxReply, o.sessionId))
          : Effect.flatMap(post(`${t.url}/v1/run`, runPayload(message, o), o, runHeaders(o, "application/json")), readResult(maxReply))
      ).pipe(traced("agent.call", { kind: "client", attributes: { "mesh.agent.target": target } }))

    const resume = (target: string, taskId: string, approval: unknown, o: Pick<CallOptions, "signAs" | "bearerToken" | "correlationId" | "traceparent"> = {}) =>
      Effect.flatMap(endpointOf(target), (base) =>
        Effect.flatMap(post(`${base}/v1/resume`, { taskId, approval }, o, { accept: "application/json" }), readResult(maxReply))
      ).pipe(traced("agent.resume", { kind: "client", attributes: { "mesh.agent.target": target } }))

    const discover = (target: string) =>
      Effect.flatMap(endpointOf(target), (base) =>
        Effect.flatMap(
          Effect.mapError(http.execute(HttpClientRequest.get(`${base}/.well-known/mesh-agent.json`, { acceptJson: true })), unreachable),
          (response) =>
            Effect.flatMap(readJson(maxReply)(response), (body): Effect.Effect<Readonly<Record<string, unknown>>, AgentCallError> =>
              response.status === 200 && isRecord(body) ? Effect.succeed(body) : Effect.fail(fromErrorBody(body, response.status))
            )
        )
      )

    const stream = (target: string, message: string, o: CallOptions = {}): Stream.Stream<StreamEvent, AgentCallError> =>
      Stream.unwrap(
        Effect.map(targetOf(target), (t) =>
          t.kind === "a2a"
            ? a2aStream(post, options.sse, maxReply, t, message, o, entropy.uuid())
            : resumable(post, options.sse, maxReply, runPayload(message, o), o)(`${t.url}/v1/run`, undefined, reconnects)
        )
      ).pipe(
        tracedStream("agent.stream", { kind: "client", attributes: { "mesh.agent.target": target } })
      )

    return { endpointOf, call, stream, discover, resume }
  })

/** The `AgentClient` service. */
export class AgentClient extends Context.Tag("agent-mesh/AgentClient")<AgentClient, AgentClientApi>() {}

/** The client as a layer. */
export const layer = (options: AgentClientOptions = {}): Layer.Layer<AgentClient, never, HttpClient.HttpClient | Keys> =>
  Layer.effect(AgentClient, make(options))

/** Calls the agent with this `didHash` (resolved through the client's hub) → `{ message, sessionId }`, or the pause. */
export const callAgent = (didHash: string, message: string, options?: CallOptions): Effect.Effect<CallResult, AgentCallError, AgentClient> =>
  Effect.flatMap(AgentClient, (c) => c.call(didHash, message, options))

/** `callAgent`, streamed. */
export const callAgentStream = (didHash: string, message: string, options?: CallOptions): Stream.Stream<StreamEvent, AgentCallError, AgentClient> =>
  Stream.unwrap(Effect.map(AgentClient, (c) => c.stream(didHash, message, options)))
