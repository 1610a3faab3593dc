/**
 * An agent server's HTTP contract, declared once: `/v1/run`, `/v1/resume`, `/health` and the signed discovery
 * document. The server (`AgentServer`), the OpenAPI document and typed clients come from it. `/v1/run` and
 * `/v1/resume` also answer as Server-Sent Events when the request accepts `text/event-stream` (docs/agent.md).
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import {
  AgentBadRequest,
  AgentConflict,
  AgentForbidden,
  AgentNotFound,
  AgentRateLimited,
  AgentUnauthorized,
  AgentUnavailable,
  HandlerFailed,
  ProviderFailed
} from "./AgentError.js"
import { addServingErrors, wireErrors } from "../http/ErrorBody.js"
import { MetricsText } from "../http/Metrics.js"
import * as ModelProvider from "../core/ModelProvider.js"
import { parseUsd } from "../core/Money.js"
import { VERSION } from "../core/Version.js"

/** One turn of a conversation (the model providers' message). */
export const ChatMessage = ModelProvider.ChatMessage
/** One turn of a conversation. */
export type ChatMessage = ModelProvider.ChatMessage

/** A session id: chosen by the caller or made by the server. */
export const SessionId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._:-]{1,128}$/))

/** A capability name, as a run names it and a commit token records it. */
export const CapabilityName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))

/**
 * A caller's request for a commit token (docs/agent.md §3): the saga and step the run belongs to, and the step's
 * budget, the amount signed when the handler reports no cost of its own.
 */
export const CommitRequest = Schema.Struct({
  sagaId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  step: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  amountUsd: Schema.optional(Schema.String.pipe(Schema.filter((s) => Either.isRight(parseUsd(s)) || "a non-negative USD decimal with at most six decimals")))
})
/** A caller's request for a commit token. */
export type CommitRequest = typeof CommitRequest.Type

/** What `POST /v1/run` takes. */
export const RunRequest = Schema.Struct({
  message: Schema.String,
  sessionId: Schema.optional(SessionId),
  /** Earlier turns, used when the server keeps no memory. */
  history: Schema.optional(Schema.Array(ChatMessage)),
  /** Anything the handler should see beside the message. */
  context: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  /** A task mandate granted to this agent, under which the handler's actions are checked. */
  mandate: Schema.optional(Schema.String),
  /** The capability asked for (the handler sees it); one the agent does not declare is refused. */
  capability: Schema.optional(CapabilityName),
  /** Asks for a commit token on the reply, signed by this agent over the step it ran. */
  commit: Schema.optional(CommitRequest)
})
/** What `POST /v1/run` takes. */
export type RunRequest = typeof RunRequest.Type

/** A finished run. */
export const RunReply = Schema.Struct({
  message: Schema.String,
  sessionId: Schema.String,
  /** When the request carried `commit`: the agent's signed receipt for the step (docs/protocol.md §13). */
  commitToken: Schema.optional(Schema.String)
})
/** A finished run. */
export type RunReply = typeof RunReply.Type

/** What a human must approve before a paused task goes on. */
export const ApprovalRequest = Schema.Struct({
  taskId: Schema.String,
  capability: Schema.String,
  mandateJti: Schema.String,
  /** Who must sign the approval: the mandate's grantor. */
  grantor: Schema.String,
  /** The action as the handler described it. */
  asked: Schema.Struct({
    capability: Schema.String,
    description: Schema.optional(Schema.String),
    reversible: Schema.Boolean,
    dataScopes: Schema.optional(Schema.Array(Schema.String))
  }),
  /** When the task can no longer resume (the mandate's expiry), ISO 8601. */
  expiresAt: Schema.String
})
/** What a human must approve before a paused task goes on. */
export type ApprovalRequest = typeof ApprovalRequest.Type

/** A run paused at a human gate (HTTP 202). */
export const ApprovalRequired = Schema.Struct({
  status: Schema.Literal("approval_required"),
  sessionId: Schema.String,
  approvalRequired: ApprovalRequest
})
/** A run paused at a human gate. */
export type ApprovalRequired = typeof ApprovalRequired.Type

/** What `POST /v1/resume` takes: the paused task and the grantor's signed approval (`Approval.signApproval`). */
export const ResumeRequest = Schema.Struct({ taskId: Schema.String, approval: Schema.Unknown })

/** What `GET /health` answers. */
export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  name: Schema.String,
  did: Schema.String,
  version: Schema.String,
  uptimeSeconds: Schema.Number
})

/** The auth modes an agent server can require. */
export const AuthMode = Schema.Literal("none", "bearer", "mesh-sig")
/** The auth modes an agent server can require. */
export type AuthMode = typeof AuthMode.Type

/** Who is calling, as authenticated (kept with a paused task, so it is a schema). */
export const Caller = Schema.Struct({
  auth: AuthMode,
  /** The caller's DID (mesh-sig only): for attribution. */
  did: Schema.optional(Schema.String),
  /** A stable name of the credential (`anonymous`, `bearer:<hash prefix>`, the DID); reconnects must match it. */
  principal: Schema.String,
  /**
   * Who the caller acts for, proven (mesh-sig only): the root grantor of a payment mandate the caller presented,
   * granted to this agent by the caller and verified whole (a saga runner's step: the saga's submitter).
   */
  onBehalfOf: Schema.optional(Schema.String)
})
/** Who is calling, as authenticated. */
export type Caller = typeof Caller.Type

/** The authenticated caller of the request being served. */
export class CurrentCaller extends Context.Tag("agent-mesh/agent/CurrentCaller")<CurrentCaller, Caller>() {}

/** The server's auth mode, as middleware (bearer or mesh-sig; `none` lets every caller through as `anonymous`). */
export class AgentAuth extends HttpApiMiddleware.Tag<AgentAuth>()("agent-mesh/agent/AgentAuth", {
  provides: CurrentCaller,
  failure: Schema.Union(AgentUnauthorized, AgentForbidden, AgentRateLimited, AgentUnavailable)
}) {}

// The streamed form of a 200 (docs/agent.md §3): HttpApi declares one body per status, so the alternative media
// type is written into the operation here.
const orEventStream = (operation: Record<string, unknown>): Record<string, unknown> => {
  const responses = operation.responses as Record<string, { readonly content?: object }> | undefined
  const ok = responses?.["200"]
  if (responses === undefined || ok === undefined) return operation
  const stream = { schema: { type: "string", description: "Server-Sent Events `chunk`, then one of `done`, `approval_required`, `error`." } }
  return { ...operation, responses: { ...responses, "200": { ...ok, content: { ...ok.content, "text/event-stream": stream } } } }
}

/** Running and resuming tasks. */
export class RunGroup extends HttpApiGroup.make("run")
  .add(
    HttpApiEndpoint.post("run", "/v1/run").setPayload(RunRequest).addSuccess(RunReply).addSuccess(ApprovalRequired, { status: 202 })
      .annotate(OpenApi.Transform, orEventStream)
  )
  .add(
    HttpApiEndpoint.post("resume", "/v1/resume").setPayload(ResumeRequest).addSuccess(RunReply).addSuccess(ApprovalRequired, { status: 202 })
      .annotate(OpenApi.Transform, orEventStream)
  )
  .addError(AgentForbidden)
  .addError(AgentNotFound)
  .addError(AgentConflict)
  .addError(HandlerFailed)
  .addError(ProviderFailed)
  .addError(AgentUnavailable)
  .middleware(AgentAuth) {}

/** Health and discovery, open to anyone. */
export class InfoGroup extends HttpApiGroup.make("info")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Health))
  .add(HttpApiEndpoint.get("discovery", "/.well-known/mesh-agent.json").addSuccess(Schema.Unknown))
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(MetricsText)
      .annotate(OpenApi.Description, "Prometheus text format: requests by route and status, latency, runs in flight (docs/operations.md).")
  ) {}

/** The server's OpenAPI document, open to anyone. */
export class DocsGroup extends HttpApiGroup.make("docs")
  .add(HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(Schema.Unknown).annotate(OpenApi.Description, "This OpenAPI 3.1 document.")) {}

// `POST /` answers JSON-RPC (a result or an error object, HTTP 200, the serving layer's refusals of a body included)
// or, for the streaming methods, SSE.
const jsonRpcResponses = (operation: Record<string, unknown>): Record<string, unknown> => {
  const responses = { ...(operation.responses as Record<string, unknown> | undefined) }
  responses["200"] = {
    description: "A JSON-RPC 2.0 response (result or error), or Server-Sent Events of JSON-RPC responses for SendStreamingMessage and SubscribeToTask.",
    content: { "application/json": { schema: {} }, "text/event-stream": { schema: { type: "string" } } }
  }
  return { ...operation, responses }
}

/** A2A JSON-RPC (1.0 and 0.3 method names), under the server's auth. */
export class A2aGroup extends HttpApiGroup.make("a2a")
  .add(
    HttpApiEndpoint.post("rpc", "/").setPayload(Schema.Unknown).addSuccess(Schema.Unknown)
      .annotate(OpenApi.Description, "A2A 1.0 JSON-RPC: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask (and the 0.3 names).")
      .annotate(OpenApi.Transform, jsonRpcResponses)
  )
  .middleware(AgentAuth) {}

/** The signed A2A agent card, open to anyone. */
export class A2aCardGroup extends HttpApiGroup.make("a2aCard")
  .add(HttpApiEndpoint.get("card", "/.well-known/agent-card.json").addSuccess(Schema.Unknown).annotate(OpenApi.Description, "The A2A 1.0 agent card, signed (JWS, EdDSA) by the agent's key.")) {}

/** The whole agent server. */
export class AgentApi extends addServingErrors(
  HttpApi.make("agent")
    .add(RunGroup)
    .add(InfoGroup)
    .add(DocsGroup)
    .add(A2aGroup)
    .add(A2aCardGroup)
    .addError(AgentBadRequest)
    .addError(AgentUnauthorized)
    .addError(AgentRateLimited)
)
  .annotate(OpenApi.Title, "agent-mesh agent server")
  .annotate(OpenApi.Version, VERSION)
  .annotate(OpenApi.Description, "Runs and resumes tasks of one agent. Errors are { _tag, error, code, correlationId }.")
  .annotate(OpenApi.Transform, wireErrors) {}
