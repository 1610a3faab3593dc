/**
 * What the registry says on the wire, apart from its rules: the records it returns and the documents a write proof
 * signs. `Registry` applies them over its store; `HubApi` and `MeshClient` (which runs on Workers and Edge
 * runtimes, docs/runtimes.md) need only these, so they import no SQL.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Schema from "effect/Schema"

/** An agent as the registry returns it. */
export const AgentRecord = Schema.Struct({
  did: Schema.String,
  didHash: Schema.String,
  manifestCID: Schema.String,
  publicKeyB64: Schema.String,
  keyVersion: Schema.Number,
  /** Where the agent is called; "" for a caller-only identity, registered without one. */
  endpointUrl: Schema.String,
  document: Schema.Unknown,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  /** When the agent was last heard from (registration, update or heartbeat); null if never since migration 0017. */
  lastSeenAt: Schema.NullOr(Schema.String),
  /** Heard from within the hub's stale interval (`staleAfterMs`, default 90 s; docs/hub.md, "Liveness"). */
  live: Schema.Boolean
})
/** An agent as the registry returns it. */
export type AgentRecord = typeof AgentRecord.Type

/** A tool an MCP server offers: a name, optionally with its input JSON Schema. */
export const McpTool = Schema.Union(Schema.String, Schema.Struct({ name: Schema.String, inputSchema: Schema.optional(Schema.Unknown) }))

/** An MCP server as the registry returns it. */
export const McpRecord = Schema.Struct({
  did: Schema.String,
  didHash: Schema.String,
  name: Schema.String,
  endpointUrl: Schema.String,
  tools: Schema.Array(Schema.Struct({ name: Schema.String, inputSchema: Schema.optional(Schema.Unknown) })),
  createdAt: Schema.String
})
/** An MCP server as the registry returns it. */
export type McpRecord = typeof McpRecord.Type

/** The kinds of skill. */
export const SkillType = Schema.Literal("rag", "web-search", "memory", "code", "data", "custom")

/** A skill as the registry returns it. */
export const SkillRecord = Schema.Struct({
  did: Schema.String,
  didHash: Schema.String,
  name: Schema.String,
  skillType: SkillType,
  createdAt: Schema.String
})
/** A skill as the registry returns it. */
export type SkillRecord = typeof SkillRecord.Type

/**
 * An A2A agent as the registry returns it: its DID here, the URL of its agent card and the card as the hub last
 * fetched it (docs/bridges.md, "A2A").
 */
export const A2aRecord = Schema.Struct({
  did: Schema.String,
  didHash: Schema.String,
  name: Schema.String,
  cardUrl: Schema.String,
  card: Schema.Unknown,
  fetchedAt: Schema.String,
  createdAt: Schema.String
})
/** An A2A agent as the registry returns it. */
export type A2aRecord = typeof A2aRecord.Type

/** A search hit across agents, MCP servers, skills and A2A agents. */
export const SearchHit = Schema.Struct({
  kind: Schema.Literal("agent", "mcp", "skill", "a2a"),
  did: Schema.String,
  didHash: Schema.String,
  name: Schema.String,
  /** Agents only: heard from within the stale interval. */
  live: Schema.optional(Schema.Boolean)
})

/** What a heartbeat answers. */
export const Heartbeat = Schema.Struct({ didHash: Schema.String, lastSeenAt: Schema.String, live: Schema.Boolean, staleAfterSeconds: Schema.Number })
/** What a heartbeat answers. */
export type Heartbeat = typeof Heartbeat.Type

/**
 * The hub a write proof is meant for: the origin (scheme, host, port as the WHATWG URL `origin`) of the hub's URL,
 * e.g. `https://hub.example`. Naming it in every signed write keeps a proof captured on one hub from being replayed
 * on another. Undefined for anything that is not an absolute http(s) URL.
 */
export const hubOrigin = (url: string): string | undefined => {
  try {
    const u = new URL(url)
    return u.protocol === "http:" || u.protocol === "https:" ? u.origin : undefined
  } catch {
    return undefined
  }
}

/**
 * What a registration proof signs: the request's fields as sent and the hub's origin, under a type no other signed
 * message has. A caller-only registration has no `endpointUrl`, and its document leaves the member out.
 */
export const registrationDocument = (input: {
  readonly hub: string
  readonly did: string
  readonly manifestCID: string
  readonly publicKeyB64: string
  readonly endpointUrl?: string | undefined
}) => ({
  type: "AgentRegistration",
  hub: input.hub,
  did: input.did,
  manifestCID: input.manifestCID,
  publicKeyB64: input.publicKeyB64,
  ...(input.endpointUrl === undefined ? {} : { endpointUrl: input.endpointUrl })
})

/** What both rotation proofs sign; `keyVersion` is the version being replaced, so a rotation proof works once. */
export const rotationDocument = (input: { readonly hub: string; readonly did: string; readonly keyVersion: number; readonly publicKeyB64: string }) => ({
  type: "AgentKeyRotation",
  hub: input.hub,
  did: input.did,
  keyVersion: input.keyVersion,
  publicKeyB64: input.publicKeyB64
})

/**
 * What an update proof signs: the patch's members as sent (absent ones left out) for the current key version, so the
 * proof cannot be replayed after a rotation or with another patch.
 */
export const updateDocument = (input: {
  readonly hub: string
  readonly did: string
  readonly keyVersion: number
  readonly endpointUrl?: string | undefined
  readonly manifestCID?: string | undefined
}) => ({
  type: "AgentUpdate",
  hub: input.hub,
  did: input.did,
  keyVersion: input.keyVersion,
  ...(input.endpointUrl === undefined ? {} : { endpointUrl: input.endpointUrl }),
  ...(input.manifestCID === undefined ? {} : { manifestCID: input.manifestCID })
})

/** What a deletion proof signs, for the current key version. */
export const deletionDocument = (input: { readonly hub: string; readonly did: string; readonly keyVersion: number }) => ({
  type: "AgentDeletion",
  hub: input.hub,
  did: input.did,
  keyVersion: input.keyVersion
})

/** The proof purpose of registration and rotation proofs (revocations use `assertionMethod`). */
export const WRITE_PROOF_PURPOSE = "authentication"
