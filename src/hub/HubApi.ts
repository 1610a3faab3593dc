/**
 * The hub's HTTP contract, declared once: the server (`HubHttp`), the typed client (`MeshClient`) and the OpenAPI
 * document all come from it. Registry under `/v1` and `/keys`, spending ledger under `/v1/spending`, platform
 * under `/api`.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, Forbidden, NotFound, RateLimited, RegistryUnreachable, Unauthorized, Unavailable, Unprocessable } from "./HubError.js"
import { addServingErrors, wireErrors } from "../http/ErrorBody.js"
import { MetricsText } from "../http/Metrics.js"
import { Allocation, Pool, PoolAllocations } from "./LedgerWire.js"
import type { Caller as KeyCaller } from "./Registry.js"
import { A2aRecord, AgentRecord, Heartbeat, McpRecord, McpTool, SearchHit, SkillRecord, SkillType } from "./RegistryWire.js"
import { VERSION } from "../core/Version.js"
import { PublishResult } from "../model/LearnerRegistry.js"
import { LearnerStats, PublishedLearnerStats } from "../model/ModelLearner.js"

/** Who the request's API key speaks for (`Registry.Caller`: key id, owner, kind), never the stored key row. */
export class Caller extends Context.Tag("agent-mesh/hub/Caller")<Caller, KeyCaller>() {}

/** Bearer API key authentication (`Authorization: Bearer mk_…`). */
export class ApiKeyAuth extends HttpApiMiddleware.Tag<ApiKeyAuth>()("agent-mesh/hub/ApiKeyAuth", {
  provides: Caller,
  failure: Schema.Union(Unauthorized, Unavailable),
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const DidHashPath = Schema.Struct({ didHash: Schema.String })
const Page = Schema.Struct({
  limit: Schema.optional(Schema.NumberFromString),
  cursor: Schema.optional(Schema.String)
})
/** `live=true` keeps agents heard from within the stale interval, `live=false` the others (docs/hub.md, "Liveness"). */
const LiveFilter = Schema.optional(Schema.BooleanFromString)
const AgentPage = Schema.Struct({ ...Page.fields, live: LiveFilter })
const pageOf = <A, I>(item: Schema.Schema<A, I>) => Schema.Struct({ items: Schema.Array(item), nextCursor: Schema.NullOr(Schema.String) })

/**
 * Registering an agent; `proof` is by the key being registered over `registrationDocument` (docs/hub.md). Without
 * `endpointUrl` the DID is a caller only: its key resolves, but nothing can call it.
 */
export const RegisterAgent = Schema.Struct({
  did: Schema.String,
  manifestCID: Schema.String,
  publicKeyB64: Schema.String,
  endpointUrl: Schema.optional(Schema.String),
  proof: Schema.Object
})

/** Rotating an agent's key: proofs by the current key (the admin may omit it) and by the new key over `rotationDocument`. */
export const RotateAgentKey = Schema.Struct({
  publicKeyB64: Schema.String,
  proof: Schema.optional(Schema.Object),
  newKeyProof: Schema.Object
})

/** Updating an agent: `proof` by the current key over `updateDocument` (the admin may omit it). */
export const UpdateAgent = Schema.Struct({
  endpointUrl: Schema.optional(Schema.String),
  manifestCID: Schema.optional(Schema.String),
  proof: Schema.optional(Schema.Object)
})

/**
 * Deleting an agent: `{ proof }`, by the current key over `deletionDocument`. Read as any JSON (an empty body decodes
 * as undefined), because the admin may send no body at all.
 */
export const DeleteAgent = Schema.Unknown.annotations({ description: "{ proof }: a proof by the current key (the admin may send no body)" })

/** The platform's payloads are read by `Platform` itself, so each refusal gets the spec's code (an empty body is INVALID_JSON). */
const PlatformPayload = Schema.Unknown

/** A created API key; `apiKey` is shown this once. */
export const CreatedKey = Schema.Struct({
  id: Schema.String,
  apiKey: Schema.String,
  owner: Schema.String,
  kind: Schema.Literal("admin", "user", "agent"),
  label: Schema.NullOr(Schema.String)
})

/** The registry: manifests, agents, MCP servers, skills, search, DIDs, mandate revocation. */
export class RegistryGroup extends HttpApiGroup.make("registry")
  .add(
    HttpApiEndpoint.post("pinManifest", "/manifests").setPayload(Schema.Unknown).addSuccess(Schema.Struct({ cid: Schema.String }), { status: 201 })
      .addError(Unprocessable).addError(RateLimited).middleware(ApiKeyAuth)
  )
  .add(HttpApiEndpoint.get("getManifest", "/manifests/:cid").setPath(Schema.Struct({ cid: Schema.String })).addSuccess(Schema.Unknown).addError(NotFound))
  .add(
    HttpApiEndpoint.post("registerAgent", "/agents").setPayload(RegisterAgent).addSuccess(AgentRecord, { status: 201 })
      .addError(Unprocessable).addError(Conflict).addError(Unauthorized).addError(Forbidden).addError(RateLimited).middleware(ApiKeyAuth)
  )
  .add(HttpApiEndpoint.get("listAgents", "/agents").setUrlParams(AgentPage).addSuccess(pageOf(AgentRecord)))
  .add(HttpApiEndpoint.get("resolveAgent", "/agents/:didHash").setPath(DidHashPath).addSuccess(AgentRecord).addError(NotFound))
  .add(
    HttpApiEndpoint.post("heartbeat", "/agents/:didHash/heartbeat").setPath(DidHashPath).addSuccess(Heartbeat)
      .addError(NotFound).addError(Forbidden).middleware(ApiKeyAuth)
      .annotate(OpenApi.Description, "Marks the agent live now; by the API key that registered it (or the admin). `mesh agent --register` sends one every 30 s.")
  )
  .add(
    HttpApiEndpoint.patch("updateAgent", "/agents/:didHash").setPath(DidHashPath)
      .setPayload(UpdateAgent)
      .addSuccess(AgentRecord).addError(NotFound).addError(Forbidden).addError(Unprocessable).addError(Unauthorized).middleware(ApiKeyAuth)
  )
  .add(
    HttpApiEndpoint.post("rotateAgentKey", "/agents/:didHash/key").setPath(DidHashPath).setPayload(RotateAgentKey)
      .addSuccess(AgentRecord).addError(NotFound).addError(Forbidden).addError(Unprocessable).addError(Unauthorized).middleware(ApiKeyAuth)
  )
  .add(
    HttpApiEndpoint.del("deleteAgent", "/agents/:didHash").setPath(DidHashPath).setPayload(DeleteAgent).addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound).addError(Forbidden).addError(Unauthorized).middleware(ApiKeyAuth)
  )
  .add(
    HttpApiEndpoint.post("registerMcp", "/mcp")
      .setPayload(Schema.Struct({ name: Schema.String, endpointUrl: Schema.String, tools: Schema.Array(McpTool), did: Schema.String }))
      .addSuccess(McpRecord, { status: 201 }).addError(Unprocessable).addError(Conflict).addError(Forbidden).addError(RateLimited).middleware(ApiKeyAuth)
  )
  .add(HttpApiEndpoint.get("listMcp", "/mcp").setUrlParams(Page).addSuccess(pageOf(McpRecord)))
  .add(HttpApiEndpoint.get("resolveMcp", "/mcp/:didHash").setPath(DidHashPath).addSuccess(McpRecord).addError(NotFound))
  .add(
    HttpApiEndpoint.post("registerA2a", "/a2a")
      .setPayload(Schema.Struct({ cardUrl: Schema.String, did: Schema.String }))
      .addSuccess(A2aRecord, { status: 201 }).addError(Unprocessable).addError(Conflict).addError(Forbidden).addError(RateLimited).middleware(ApiKeyAuth)
      .annotate(OpenApi.Description, "Registers an A2A agent: the hub fetches its card from cardUrl and keeps it.")
  )
  .add(HttpApiEndpoint.get("resolveA2a", "/a2a/:didHash").setPath(DidHashPath).addSuccess(A2aRecord).addError(NotFound))
  .add(
    HttpApiEndpoint.post("refreshA2a", "/a2a/:didHash/refresh").setPath(DidHashPath)
      .addSuccess(A2aRecord).addError(NotFound).addError(Forbidden).addError(Unprocessable).addError(RateLimited).middleware(ApiKeyAuth)
      .annotate(OpenApi.Description, "Fetches the A2A agent's card again and keeps the new one: for the key that registered it (or the admin); a card signed by another DID than before only when its signature verifies under that DID's key.")
  )
  .add(
    HttpApiEndpoint.post("registerSkill", "/skills")
      .setPayload(Schema.Struct({ name: Schema.String, skillType: Schema.optional(SkillType), did: Schema.String }))
      .addSuccess(SkillRecord, { status: 201 }).addError(Unprocessable).addError(Conflict).addError(Forbidden).addError(RateLimited).middleware(ApiKeyAuth)
  )
  .add(HttpApiEndpoint.get("listSkills", "/skills").setUrlParams(Page).addSuccess(pageOf(SkillRecord)))
  .add(HttpApiEndpoint.get("resolveSkill", "/skills/:didHash").setPath(DidHashPath).addSuccess(SkillRecord).addError(NotFound))
  .add(
    HttpApiEndpoint.get("search", "/search")
      .setUrlParams(Schema.Struct({ q: Schema.String, limit: Schema.optional(Schema.NumberFromString), live: LiveFilter }))
      .addSuccess(Schema.Struct({ items: Schema.Array(SearchHit) }))
      .addError(BadRequest).addError(RateLimited)
  )
  .add(
    HttpApiEndpoint.get("resolveDid", "/dids/:did").setPath(Schema.Struct({ did: Schema.String }))
      .addSuccess(Schema.Struct({ did: Schema.String, keyVersion: Schema.Number, document: Schema.Unknown }))
      .addError(NotFound).addError(Unprocessable)
  )
  .add(
    HttpApiEndpoint.post("revokeMandate", "/mandates/revocations").setPayload(Schema.Unknown)
      .addSuccess(Schema.Struct({ jti: Schema.String }), { status: 201 })
      .addError(BadRequest).addError(Unauthorized).addError(NotFound).addError(Conflict).addError(Unprocessable)
  )
  .add(
    HttpApiEndpoint.get("mandateRevoked", "/mandates/revocations/:jti").setPath(Schema.Struct({ jti: Schema.String }))
      .setUrlParams(Schema.Struct({ grantor: Schema.String }))
      .addSuccess(Schema.Struct({ jti: Schema.String, grantor: Schema.String, revoked: Schema.Boolean }))
  )
  .addError(Unavailable)
  .prefix("/v1") {}

/** API keys for the signed-in user (the admin credential `mesh hub` prints on first start). */
export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.post("createKey", "/keys")
      .setPayload(Schema.Struct({ owner: Schema.String.pipe(Schema.minLength(1)), label: Schema.optional(Schema.String) }))
      .addSuccess(CreatedKey, { status: 201 }).addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("revokeKey", "/keys/:id").setPath(Schema.Struct({ id: Schema.String })).addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound).addError(Forbidden).addError(Conflict)
  )
  .addError(Unavailable)
  .middleware(ApiKeyAuth) {}

/**
 * The spending ledger. Every endpoint acts only for the grantee of the pool's mandate, proven by a mesh-sig
 * signature of the request or an agent API key bound to that DID (403 `NOT_OWNER` otherwise; 401 for a signature
 * that does not hold).
 */
export class SpendingGroup extends HttpApiGroup.make("spending")
  .add(
    HttpApiEndpoint.post("openPool", "/pools").setPayload(Schema.Struct({ mandate: Schema.String })).addSuccess(Pool, { status: 201 })
      .addError(Forbidden).addError(Unprocessable)
  )
  .add(
    HttpApiEndpoint.get("listPools", "/pools").addSuccess(Schema.Struct({ items: Schema.Array(Pool) })).addError(Forbidden)
      .annotate(OpenApi.Description, "The pools whose mandate was granted to the caller, oldest first (at most 200).")
  )
  .add(HttpApiEndpoint.get("getPool", "/pools/:poolId").setPath(Schema.Struct({ poolId: Schema.String })).addSuccess(Pool).addError(NotFound).addError(Forbidden))
  .add(
    HttpApiEndpoint.post("allocate", "/pools/:poolId/allocations").setPath(Schema.Struct({ poolId: Schema.String }))
      .setPayload(Schema.Struct({ childMandate: Schema.String, idempotencyKey: Schema.String }))
      .addSuccess(Allocation, { status: 201 }).addError(BadRequest).addError(NotFound).addError(Forbidden).addError(Conflict).addError(Unprocessable)
  )
  .add(
    HttpApiEndpoint.post("release", "/allocations/:allocationId/release").setPath(Schema.Struct({ allocationId: Schema.String }))
      // USD as a JSON number or the decimal string Money reads (docs/protocol.md §9.2); the ledger reads either exactly.
      .setPayload(Schema.Struct({ usedUsd: Schema.Union(Schema.Number, Schema.String), commitToken: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({ allocation: Allocation, pool: Pool })).addError(NotFound).addError(Forbidden).addError(Conflict).addError(Unprocessable)
  )
  .add(
    HttpApiEndpoint.get("listAllocations", "/pools/:poolId/allocations").setPath(Schema.Struct({ poolId: Schema.String }))
      .addSuccess(PoolAllocations).addError(NotFound).addError(Forbidden)
      .annotate(OpenApi.Description, "The pool and every allocation made from it, with used amounts and commit tokens: the trail `Reconciliation.verify` checks offline.")
  )
  .addError(Unauthorized)
  .addError(RateLimited)
  .addError(Unavailable)
  .middleware(ApiKeyAuth)
  .prefix("/v1/spending") {}

/**
 * The mesh's model-routing statistics (docs/models.md): what Thompson learners observed, counts only, summed over
 * publishers. Anyone may read them; publishing (a publisher's totals, replacing its previous ones) needs an API key,
 * and a pair of more than `MAX_ARM_TRIALS` trials is refused with 400 `INVALID_REQUEST` before anything is stored.
 */
export class LearnerGroup extends HttpApiGroup.make("learner")
  .add(HttpApiEndpoint.get("learnerStats", "/learner-stats").addSuccess(LearnerStats))
  .add(
    HttpApiEndpoint.post("publishLearnerStats", "/learner-stats").setPayload(PublishedLearnerStats).addSuccess(PublishResult)
      .addError(Unauthorized).middleware(ApiKeyAuth)
  )
  .addError(Unavailable)
  .prefix("/v1") {}

/** What `/api/status` answers. */
export const Status = Schema.Struct({
  status: Schema.Literal("ok", "degraded"),
  version: Schema.String,
  registry: Schema.Struct({ reachable: Schema.Boolean, mode: Schema.Literal("local", "remote") })
})

/** The platform: status and the agent-key challenge exchange. */
export class PlatformGroup extends HttpApiGroup.make("platform")
  .add(HttpApiEndpoint.get("status", "/status").addSuccess(Status))
  .add(
    HttpApiEndpoint.post("challenge", "/agent-keys/challenge")
      .setPayload(PlatformPayload.annotations({ description: "{ did, publicKeyB64 }" }))
      .addSuccess(Schema.Struct({ challengeId: Schema.String, challenge: Schema.String, expiresAt: Schema.String }), { status: 201 })
      .addError(Unprocessable).addError(RegistryUnreachable)
  )
  .add(
    HttpApiEndpoint.post("agentKey", "/agent-keys")
      .setPayload(PlatformPayload.annotations({ description: "{ challengeId, did, signature }" }))
      .addSuccess(Schema.Struct({ apiKey: Schema.String, keyId: Schema.String, did: Schema.String }), { status: 201 })
      .addError(Unauthorized).addError(Unprocessable).addError(RegistryUnreachable)
  )
  .addError(RateLimited)
  .addError(Unavailable)
  .prefix("/api") {}

/** The OpenAPI document and a browsable page over it; listed in the document, which describes all a server answers. */
export class DocsGroup extends HttpApiGroup.make("docs")
  .add(HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(Schema.Unknown).annotate(OpenApi.Description, "This OpenAPI 3.1 document."))
  .add(HttpApiEndpoint.get("docs", "/docs").addSuccess(HttpApiSchema.Text({ contentType: "text/html; charset=utf-8" })).annotate(OpenApi.Description, "A page listing every operation."))
  .annotate(OpenApi.Description, "The contract, machine-readable and browsable.") {}

/**
 * The hub's page (docs/operations.md, "The hub's page"): a registry explorer at `/` and a chat with one agent at
 * `/chat/:didHash`, one HTML shell and one ES module, the page's only assets.
 */
export class WebGroup extends HttpApiGroup.make("web")
  .add(HttpApiEndpoint.get("explorer", "/").addSuccess(HttpApiSchema.Text({ contentType: "text/html; charset=utf-8" })).annotate(OpenApi.Description, "The registry explorer: search and list agents, MCP servers and skills."))
  .add(
    HttpApiEndpoint.get("chat", "/chat/:didHash").setPath(DidHashPath).addSuccess(HttpApiSchema.Text({ contentType: "text/html; charset=utf-8" }))
      .annotate(OpenApi.Description, "A streaming chat with the agent, which the page calls directly (the agent must allow this hub's origin).")
  )
  .add(HttpApiEndpoint.get("script", "/ui/app.js").addSuccess(HttpApiSchema.Text({ contentType: "text/javascript; charset=utf-8" })).annotate(OpenApi.Description, "The page's script."))
  .add(HttpApiEndpoint.get("style", "/ui/app.css").addSuccess(HttpApiSchema.Text({ contentType: "text/css; charset=utf-8" })).annotate(OpenApi.Description, "The page's style sheet."))
  .annotate(OpenApi.Description, "A page for people: the registry explorer and a chat with an agent.") {}

/** Liveness: answered without the database and never shed under load, so a probe tells a busy hub from a dead one. */
export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .annotate(OpenApi.Description, "Liveness: answers without touching the database and is never shed under load.")
  )
  .add(
    HttpApiEndpoint.get("ready", "/ready")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ready") }))
      .addError(Unavailable)
      .annotate(OpenApi.Description, "Readiness: 200 while the database answers, 503 STORE_UNAVAILABLE when it does not.")
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(MetricsText)
      .annotate(OpenApi.Description, "Prometheus text format: requests by route and status, latency, ledger allocations, replays refused (docs/operations.md).")
  ) {}

/** The whole hub. */
export class HubApi extends addServingErrors(
  HttpApi.make("hub")
    .add(HealthGroup)
    .add(RegistryGroup)
    .add(KeysGroup)
    .add(SpendingGroup)
    .add(LearnerGroup)
    .add(PlatformGroup)
    .add(DocsGroup)
    .add(WebGroup)
)
  .addError(Unavailable)
  .addError(BadRequest)
  .annotate(OpenApi.Title, "agent-mesh hub")
  .annotate(OpenApi.Version, VERSION)
  .annotate(OpenApi.Description, "Registry, spending ledger and platform API of an agent-mesh hub. Errors are { _tag, error, code, correlationId }.")
  .annotate(OpenApi.Transform, wireErrors) {}

/** The platform alone, for a platform process running apart from the registry (`mesh platform`). */
export class PlatformApi extends addServingErrors(
  HttpApi.make("platform")
    .add(PlatformGroup)
    .add(DocsGroup)
)
  .addError(BadRequest)
  .annotate(OpenApi.Title, "agent-mesh platform")
  .annotate(OpenApi.Version, VERSION)
  .annotate(OpenApi.Description, "The platform API of an agent-mesh hub, served apart from its registry. Errors are { _tag, error, code, correlationId }.")
  .annotate(OpenApi.Transform, wireErrors) {}
