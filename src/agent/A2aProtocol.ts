/**
 * The A2A protocol on the wire (docs/bridges.md, "A2A"): JSON-RPC 2.0 envelopes and error codes, the method names of
 * A2A 1.0 and of 0.3 (which deployed clients still send), and the shapes of messages, tasks and stream events in both
 * dialects. Tasks are held in the 1.0 (ProtoJSON) shape; `toLegacy` writes them in the 0.3 shape (`kind`
 * discriminators, lower-case states) for a 0.3 caller. Pure data and functions: the server (`A2aHttp`) and the client
 * (`AgentClient`) share them.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import { isRecord } from "../core/internal/record.js"

/** The A2A versions served, as the `A2A-Version` header and the card's interfaces name them. */
export const VERSION_1_0 = "1.0"
/** The earlier version whose JSON-RPC method names and shapes are accepted too. */
export const VERSION_0_3 = "0.3"
/** The header a client names its A2A version in (absent: 0.3, per the 1.0 specification). */
export const VERSION_HEADER = "a2a-version"
/** Where an agent card is served. */
export const CARD_PATH = "/.well-known/agent-card.json"

/** JSON-RPC 2.0 and A2A error codes. */
export const Codes = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  TASK_NOT_FOUND: -32001,
  TASK_NOT_CANCELABLE: -32002,
  PUSH_NOTIFICATION_NOT_SUPPORTED: -32003,
  UNSUPPORTED_OPERATION: -32004,
  CONTENT_TYPE_NOT_SUPPORTED: -32005,
  INVALID_AGENT_RESPONSE: -32006,
  EXTENDED_CARD_NOT_CONFIGURED: -32007,
  VERSION_NOT_SUPPORTED: -32009
} as const

/** The operations an agent server answers. */
export type Operation = "send" | "stream" | "get" | "cancel" | "subscribe" | "list"

/** Which shapes a request and its answer use. */
export type Dialect = "1.0" | "0.3"

/** Method name → operation and dialect. */
export const METHODS: ReadonlyMap<string, { readonly op: Operation; readonly dialect: Dialect }> = new Map([
  ["SendMessage", { op: "send", dialect: "1.0" }],
  ["SendStreamingMessage", { op: "stream", dialect: "1.0" }],
  ["GetTask", { op: "get", dialect: "1.0" }],
  ["CancelTask", { op: "cancel", dialect: "1.0" }],
  ["SubscribeToTask", { op: "subscribe", dialect: "1.0" }],
  ["ListTasks", { op: "list", dialect: "1.0" }],
  ["message/send", { op: "send", dialect: "0.3" }],
  ["message/stream", { op: "stream", dialect: "0.3" }],
  ["tasks/get", { op: "get", dialect: "0.3" }],
  ["tasks/cancel", { op: "cancel", dialect: "0.3" }],
  ["tasks/resubscribe", { op: "subscribe", dialect: "0.3" }]
] as const)

/** A2A methods this server knows but does not offer, with the A2A code that says why. */
export const UNSUPPORTED: ReadonlyMap<string, number> = new Map([
  ["CreateTaskPushNotificationConfig", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["GetTaskPushNotificationConfig", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["ListTaskPushNotificationConfigs", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["DeleteTaskPushNotificationConfig", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["tasks/pushNotificationConfig/set", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["tasks/pushNotificationConfig/get", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["tasks/pushNotificationConfig/list", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["tasks/pushNotificationConfig/delete", Codes.PUSH_NOTIFICATION_NOT_SUPPORTED],
  ["GetExtendedAgentCard", Codes.EXTENDED_CARD_NOT_CONFIGURED],
  ["agent/getAuthenticatedExtendedCard", Codes.EXTENDED_CARD_NOT_CONFIGURED]
])

/** The task states of A2A 1.0. */
export type TaskState =
  | "TASK_STATE_SUBMITTED"
  | "TASK_STATE_WORKING"
  | "TASK_STATE_COMPLETED"
  | "TASK_STATE_FAILED"
  | "TASK_STATE_CANCELED"
  | "TASK_STATE_INPUT_REQUIRED"
  | "TASK_STATE_REJECTED"
  | "TASK_STATE_AUTH_REQUIRED"

const LEGACY_STATES: Readonly<Record<TaskState, string>> = {
  TASK_STATE_SUBMITTED: "submitted",
  TASK_STATE_WORKING: "working",
  TASK_STATE_COMPLETED: "completed",
  TASK_STATE_FAILED: "failed",
  TASK_STATE_CANCELED: "canceled",
  TASK_STATE_INPUT_REQUIRED: "input-required",
  TASK_STATE_REJECTED: "rejected",
  TASK_STATE_AUTH_REQUIRED: "auth-required"
}
// ProtoJSON may write an enum as its number (a2a.proto's TaskState).
const STATE_NUMBERS: ReadonlyArray<TaskState | undefined> = [
  undefined,
  "TASK_STATE_SUBMITTED",
  "TASK_STATE_WORKING",
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_INPUT_REQUIRED",
  "TASK_STATE_REJECTED",
  "TASK_STATE_AUTH_REQUIRED"
]
const STATES_OF_LEGACY: ReadonlyMap<string, TaskState> = new Map(Object.entries(LEGACY_STATES).map(([k, v]) => [v, k as TaskState]))

/** States after which nothing more happens to a task. */
export const isTerminal = (s: TaskState): boolean =>
  s === "TASK_STATE_COMPLETED" || s === "TASK_STATE_FAILED" || s === "TASK_STATE_CANCELED" || s === "TASK_STATE_REJECTED"

/** States a task waits in for its caller (a stream of it ends there too). */
export const isInterrupted = (s: TaskState): boolean => s === "TASK_STATE_INPUT_REQUIRED" || s === "TASK_STATE_AUTH_REQUIRED"

/** A part of a message or artifact (1.0 shape): text, structured data, or a file by URL or bytes. */
export interface Part {
  readonly text?: string
  readonly data?: unknown
  readonly url?: string
  readonly raw?: string
  readonly mediaType?: string
  readonly filename?: string
  readonly metadata?: Readonly<Record<string, unknown>>
}

/** A message (1.0 shape). */
export interface Message {
  readonly messageId: string
  readonly role: "ROLE_USER" | "ROLE_AGENT"
  readonly parts: ReadonlyArray<Part>
  readonly contextId?: string
  readonly taskId?: string
  readonly metadata?: Readonly<Record<string, unknown>>
}

/** An artifact (1.0 shape). */
export interface Artifact {
  readonly artifactId: string
  readonly name?: string
  readonly parts: ReadonlyArray<Part>
}

/** A task's status (1.0 shape). */
export interface TaskStatus {
  readonly state: TaskState
  readonly message?: Message
  readonly timestamp?: string
}

/** A task (1.0 shape). */
export interface Task {
  readonly id: string
  readonly contextId: string
  readonly status: TaskStatus
  readonly artifacts?: ReadonlyArray<Artifact>
  readonly history?: ReadonlyArray<Message>
}

/** One event of a task's stream (1.0 shape: exactly one member set). */
export type StreamResult =
  | { readonly task: Task }
  | { readonly message: Message }
  | { readonly statusUpdate: { readonly taskId: string; readonly contextId: string; readonly status: TaskStatus } }
  | {
    readonly artifactUpdate: {
      readonly taskId: string
      readonly contextId: string
      readonly artifact: Artifact
      readonly append?: boolean
      readonly lastChunk?: boolean
    }
  }

/** A JSON-RPC request id. */
export type RpcId = string | number | null

/** A JSON-RPC error object. */
export interface RpcError {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

/** A JSON-RPC success envelope, as text. */
export const resultText = (id: RpcId, result: unknown): string => `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${JSON.stringify(result)}}`

/** A JSON-RPC error envelope, as text. */
export const errorText = (id: RpcId, error: RpcError): string => JSON.stringify({ jsonrpc: "2.0", id, error })

/** An error object with the mesh's own code (and the request's correlation id) as `data`. */
export const rpcError = (code: number, message: string, meshCode?: string, correlationId?: string): RpcError => ({
  code,
  message,
  ...(meshCode === undefined && correlationId === undefined
    ? {}
    : { data: { ...(meshCode === undefined ? {} : { code: meshCode }), ...(correlationId === undefined ? {} : { correlationId }) } })
})

// --- 0.3 ---------------------------------------------------------------------------------------------------------

const legacyPart = (p: Part): Record<string, unknown> => {
  const meta = p.metadata === undefined ? {} : { metadata: p.metadata }
  if (p.text !== undefined) return { kind: "text", text: p.text, ...meta }
  if (p.data !== undefined) {
    // 0.3 data parts hold objects only; anything else is wrapped, marked as the SDKs mark it.
    return isRecord(p.data) ? { kind: "data", data: p.data, ...meta } : { kind: "data", data: { value: p.data }, metadata: { ...p.metadata, data_part_compat: true } }
  }
  const file = {
    ...(p.url !== undefined ? { uri: p.url } : { bytes: p.raw ?? "" }),
    ...(p.mediaType === undefined ? {} : { mimeType: p.mediaType }),
    ...(p.filename === undefined ? {} : { name: p.filename })
  }
  return { kind: "file", file, ...meta }
}

const legacyMessage = (m: Message): Record<string, unknown> => ({
  kind: "message",
  messageId: m.messageId,
  role: m.role === "ROLE_USER" ? "user" : "agent",
  parts: m.parts.map(legacyPart),
  ...(m.contextId === undefined ? {} : { contextId: m.contextId }),
  ...(m.taskId === undefined ? {} : { taskId: m.taskId }),
  ...(m.metadata === undefined ? {} : { metadata: m.metadata })
})

const legacyStatus = (s: TaskStatus): Record<string, unknown> => ({
  state: LEGACY_STATES[s.state],
  ...(s.message === undefined ? {} : { message: legacyMessage(s.message) }),
  ...(s.timestamp === undefined ? {} : { timestamp: s.timestamp })
})

const legacyArtifact = (a: Artifact): Record<string, unknown> => ({ artifactId: a.artifactId, ...(a.name === undefined ? {} : { name: a.name }), parts: a.parts.map(legacyPart) })

/** A task in the 0.3 shape. */
export const legacyTask = (t: Task): Record<string, unknown> => ({
  kind: "task",
  id: t.id,
  contextId: t.contextId,
  status: legacyStatus(t.status),
  ...(t.artifacts === undefined ? {} : { artifacts: t.artifacts.map(legacyArtifact) }),
  ...(t.history === undefined ? {} : { history: t.history.map(legacyMessage) })
})

/** A stream event in the 0.3 shape (a status update says whether it is the last one: `final`). */
export const legacyStreamResult = (r: StreamResult): Record<string, unknown> => {
  if ("task" in r) return legacyTask(r.task)
  if ("message" in r) return legacyMessage(r.message)
  if ("statusUpdate" in r) {
    const u = r.statusUpdate
    const s = u.status.state
    return { kind: "status-update", taskId: u.taskId, contextId: u.contextId, status: legacyStatus(u.status), final: isTerminal(s) || isInterrupted(s) }
  }
  const a = r.artifactUpdate
  return {
    kind: "artifact-update",
    taskId: a.taskId,
    contextId: a.contextId,
    artifact: legacyArtifact(a.artifact),
    ...(a.append === undefined ? {} : { append: a.append }),
    ...(a.lastChunk === undefined ? {} : { lastChunk: a.lastChunk })
  }
}

/** A task as a `SendMessage` answers it: wrapped in 1.0 (`{ task }`), bare with its `kind` in 0.3. */
export const sendResult = (dialect: Dialect, t: Task): unknown => (dialect === "1.0" ? { task: t } : legacyTask(t))

/** A page of `ListTasks` (1.0 only: 0.3 has no such method). */
export interface TaskPage {
  readonly tasks: ReadonlyArray<Task>
  /** Empty on the last page (the field is always present, A2A 1.0 §3.1.4). */
  readonly nextPageToken: string
  readonly pageSize: number
  readonly totalSize: number
}

/** A task as `GetTask` and `CancelTask` answer it. */
export const taskResult = (dialect: Dialect, t: Task): unknown => (dialect === "1.0" ? t : legacyTask(t))

/** A stream event in the caller's dialect. */
export const streamResult = (dialect: Dialect, r: StreamResult): unknown => (dialect === "1.0" ? r : legacyStreamResult(r))

// --- reading requests --------------------------------------------------------------------------------------------

/**
 * An optional non-negative integer parameter (`historyLength`, `pageSize`): absent or null is undefined; a number that
 * is a whole number at least 0, or a string of digits (ProtoJSON writes int32 either way); anything else is why not.
 */
export const readCount = (raw: unknown, name: string): number | undefined | { readonly invalid: string } => {
  if (raw === undefined || raw === null) return undefined
  const n = typeof raw === "number" ? raw : typeof raw === "string" && /^[0-9]{1,10}$/.test(raw) ? Number(raw) : Number.NaN
  return Number.isSafeInteger(n) && n >= 0 ? n : { invalid: `${name} must be a whole number of at least 0` }
}

/** Most tasks one `ListTasks` page holds (A2A 1.0 §3.1.4). */
export const MAX_PAGE_SIZE = 100
/** The page size of a `ListTasks` that names none. */
export const DEFAULT_PAGE_SIZE = 50

/** What a `ListTasks` asks for, read and checked. */
export interface ListQuery {
  readonly contextId: string | undefined
  readonly state: TaskState | undefined
  readonly pageSize: number
  readonly pageToken: string | undefined
  readonly historyLength: number | undefined
  /** Epoch ms: only tasks whose status changed at or after it. */
  readonly updatedAfter: number | undefined
  readonly includeArtifacts: boolean
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$/

/** The parameters of a `ListTasks`, or why they cannot be read (an Invalid Params answer). */
export const readListQuery = (p: Readonly<Record<string, unknown>>): ListQuery | string => {
  const history = readCount(p.historyLength, "historyLength")
  if (typeof history === "object") return history.invalid
  const size = readCount(p.pageSize, "pageSize")
  if (typeof size === "object" || (size !== undefined && (size < 1 || size > MAX_PAGE_SIZE))) return `pageSize must be a whole number from 1 to ${MAX_PAGE_SIZE}`
  if (p.contextId !== undefined && p.contextId !== null && typeof p.contextId !== "string") return "contextId must be a string"
  if (p.pageToken !== undefined && p.pageToken !== null && typeof p.pageToken !== "string") return "pageToken must be a string"
  let state: TaskState | undefined
  if (p.status !== undefined && p.status !== null && p.status !== "TASK_STATE_UNSPECIFIED" && p.status !== 0) {
    state = typeof p.status === "number" ? STATE_NUMBERS[p.status] : readState(p.status)
    if (state === undefined) return `status must be one of ${Object.keys(LEGACY_STATES).join(", ")}`
  }
  let updatedAfter: number | undefined
  if (p.statusTimestampAfter !== undefined && p.statusTimestampAfter !== null) {
    updatedAfter = typeof p.statusTimestampAfter === "string" && RFC3339.test(p.statusTimestampAfter) ? Date.parse(p.statusTimestampAfter) : Number.NaN
    if (!Number.isFinite(updatedAfter)) return "statusTimestampAfter must be an RFC 3339 timestamp, e.g. 2026-01-01T00:00:00Z"
  }
  if (p.includeArtifacts !== undefined && p.includeArtifacts !== null && typeof p.includeArtifacts !== "boolean") return "includeArtifacts must be a boolean"
  return {
    contextId: typeof p.contextId === "string" && p.contextId !== "" ? p.contextId : undefined,
    state,
    pageSize: size ?? DEFAULT_PAGE_SIZE,
    pageToken: typeof p.pageToken === "string" && p.pageToken !== "" ? p.pageToken : undefined,
    historyLength: history,
    updatedAfter,
    includeArtifacts: p.includeArtifacts === true
  }
}

/** A message as received, read into the 1.0 shape; or why it cannot be read. */
export const readMessage = (dialect: Dialect, raw: unknown): Message | string => {
  if (!isRecord(raw)) return "params.message must be an object"
  if (typeof raw.messageId !== "string" || raw.messageId.length === 0) return "message.messageId must be a non-empty string"
  const role = raw.role
  const user = dialect === "1.0" ? role === "ROLE_USER" || role === 1 : role === "user"
  if (!user) return `message.role must be ${dialect === "1.0" ? "ROLE_USER" : '"user"'}`
  if (!Array.isArray(raw.parts) || raw.parts.length === 0) return "message.parts must be a non-empty array"
  const parts: Array<Part> = []
  for (const p of raw.parts as ReadonlyArray<unknown>) {
    const part = dialect === "1.0" ? readPart(p) : readLegacyPart(p)
    if (typeof part === "string") return part
    parts.push(part)
  }
  for (const f of ["contextId", "taskId"] as const) {
    if (raw[f] !== undefined && raw[f] !== "" && typeof raw[f] !== "string") return `message.${f} must be a string`
  }
  if (raw.metadata !== undefined && !isRecord(raw.metadata)) return "message.metadata must be an object"
  return {
    messageId: raw.messageId,
    role: "ROLE_USER",
    parts,
    ...(typeof raw.contextId === "string" && raw.contextId !== "" ? { contextId: raw.contextId } : {}),
    ...(typeof raw.taskId === "string" && raw.taskId !== "" ? { taskId: raw.taskId } : {}),
    ...(isRecord(raw.metadata) ? { metadata: raw.metadata } : {})
  }
}

const optionalString = (p: Record<string, unknown>, f: string): string | undefined => (typeof p[f] === "string" ? (p[f] as string) : undefined)

const readPart = (p: unknown): Part | string => {
  if (!isRecord(p)) return "each part must be an object"
  const meta = isRecord(p.metadata) ? { metadata: p.metadata } : {}
  const file = { ...(optionalString(p, "mediaType") === undefined ? {} : { mediaType: p.mediaType as string }), ...(optionalString(p, "filename") === undefined ? {} : { filename: p.filename as string }) }
  if (typeof p.text === "string") return { text: p.text, ...meta, ...file }
  if (p.data !== undefined) return { data: p.data, ...meta, ...file }
  if (typeof p.url === "string") return { url: p.url, ...meta, ...file }
  if (typeof p.raw === "string") return { raw: p.raw, ...meta, ...file }
  return "a part holds one of text, data, url or raw"
}

const readLegacyPart = (p: unknown): Part | string => {
  if (!isRecord(p)) return "each part must be an object"
  const meta = isRecord(p.metadata) ? p.metadata : undefined
  if (p.kind === "text" && typeof p.text === "string") return { text: p.text, ...(meta === undefined ? {} : { metadata: meta }) }
  if (p.kind === "data" && p.data !== undefined) {
    if (meta?.data_part_compat === true && isRecord(p.data) && "value" in p.data) {
      const { data_part_compat: _, ...rest } = meta
      return { data: p.data.value, ...(Object.keys(rest).length === 0 ? {} : { metadata: rest }) }
    }
    return { data: p.data, ...(meta === undefined ? {} : { metadata: meta }) }
  }
  if (p.kind === "file" && isRecord(p.file)) {
    const f = p.file
    const file = { ...(typeof f.mimeType === "string" ? { mediaType: f.mimeType } : {}), ...(typeof f.name === "string" ? { filename: f.name } : {}) }
    if (typeof f.uri === "string") return { url: f.uri, ...file, ...(meta === undefined ? {} : { metadata: meta }) }
    if (typeof f.bytes === "string") return { raw: f.bytes, ...file, ...(meta === undefined ? {} : { metadata: meta }) }
  }
  return "a 0.3 part is { kind: text | data | file } with its content"
}

/** The text a message carries: its text parts, one per line. */
export const textOf = (m: Message): string => {
  let out = ""
  for (const p of m.parts) if (p.text !== undefined) out = out.length === 0 ? p.text : `${out}\n${p.text}`
  return out
}

/** The structured data parts of a message. */
export const dataOf = (m: Message): ReadonlyArray<unknown> => m.parts.filter((p) => p.data !== undefined).map((p) => p.data)

/** A task as the 0.3 or 1.0 wire gives it, read into the 1.0 shape (`undefined` when it is not a task). */
export const readTask = (raw: unknown): Task | undefined => {
  if (!isRecord(raw) || typeof raw.id !== "string" || !isRecord(raw.status)) return undefined
  const state = readState(raw.status.state)
  if (state === undefined) return undefined
  const status: TaskStatus = { state, ...(readAnyMessage(raw.status.message) === undefined ? {} : { message: readAnyMessage(raw.status.message)! }) }
  const artifacts = Array.isArray(raw.artifacts) ? raw.artifacts.flatMap((a) => (isRecord(a) ? [readArtifact(a)] : [])) : undefined
  return { id: raw.id, contextId: typeof raw.contextId === "string" ? raw.contextId : "", status, ...(artifacts === undefined ? {} : { artifacts }) }
}

/** A state in either dialect, read into the 1.0 name. */
export const readState = (s: unknown): TaskState | undefined =>
  typeof s !== "string" ? undefined : s in LEGACY_STATES ? (s as TaskState) : STATES_OF_LEGACY.get(s)

const readAnyPart = (p: unknown): Part | undefined => {
  if (!isRecord(p)) return undefined
  const part = "kind" in p ? readLegacyPart(p) : readPart(p)
  return typeof part === "string" ? undefined : part
}

const readArtifact = (a: Record<string, unknown>): Artifact => ({
  artifactId: typeof a.artifactId === "string" ? a.artifactId : "",
  parts: Array.isArray(a.parts) ? a.parts.flatMap((p) => readAnyPart(p) ?? []) : []
})

/** A message from an agent in either dialect (role not checked), or undefined. */
export const readAnyMessage = (raw: unknown): Message | undefined => {
  if (!isRecord(raw) || !Array.isArray(raw.parts)) return undefined
  return {
    messageId: typeof raw.messageId === "string" ? raw.messageId : "",
    role: raw.role === "user" || raw.role === "ROLE_USER" ? "ROLE_USER" : "ROLE_AGENT",
    parts: raw.parts.flatMap((p) => readAnyPart(p) ?? []),
    ...(typeof raw.contextId === "string" ? { contextId: raw.contextId } : {}),
    ...(typeof raw.taskId === "string" ? { taskId: raw.taskId } : {}),
    ...(isRecord(raw.metadata) ? { metadata: raw.metadata } : {})
  }
}

/** The text of a task's artifacts (or, without any, of its status message). */
export const taskText = (t: Task): string => {
  const parts = (t.artifacts ?? []).flatMap((a) => a.parts)
  const texts = parts.filter((p) => p.text !== undefined).map((p) => p.text!)
  if (texts.length > 0) return texts.join("")
  return t.status.message === undefined ? "" : textOf(t.status.message)
}

// --- the agent card ----------------------------------------------------------------------------------------------

/** The JSON-RPC interface of a card a client should use: 1.0 first, else 0.3; undefined when it has none. */
export const jsonRpcInterface = (card: unknown): { readonly url: string; readonly dialect: Dialect } | undefined => {
  if (!isRecord(card)) return undefined
  const found: Array<{ url: string; dialect: Dialect }> = []
  if (Array.isArray(card.supportedInterfaces)) {
    for (const i of card.supportedInterfaces as ReadonlyArray<unknown>) {
      if (!isRecord(i) || typeof i.url !== "string" || String(i.protocolBinding ?? "").toUpperCase() !== "JSONRPC") continue
      const v = String(i.protocolVersion ?? "")
      found.push({ url: i.url, dialect: v.startsWith("1.") || v === "1" ? "1.0" : "0.3" })
    }
  }
  // A 0.3 card names its endpoint in `url` (JSON-RPC unless `preferredTransport` says otherwise).
  if (found.length === 0 && typeof card.url === "string" && (card.preferredTransport === undefined || card.preferredTransport === "JSONRPC")) {
    found.push({ url: card.url, dialect: "0.3" })
  }
  return found.find((f) => f.dialect === "1.0") ?? found[0]
}
