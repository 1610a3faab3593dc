/**
 * The saga endpoints of a hub, as an `HttpApiGroup`, and `SagaHubApi`: the hub's contract with that group added.
 * The group lives here, not in `hub/`, because its handlers need the scheduler, which needs the agent client (a floor
 * above the hub); the hub's own groups are reused as they are, so the served document lists both (docs/sagas.md).
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { Overloaded } from "../http/ErrorBody.js"
import { BadRequest, NotFound, RateLimited, Unauthorized, Unavailable } from "../hub/HubError.js"
import { HubApi } from "../hub/HubApi.js"
import { SagaInput, SagaPage, SagaResult } from "./Saga.js"

/** A saga refused before it ran: an unknown agent, a budget above the mandate, a mandate that does not verify. */
export class SagaUnprocessable extends Schema.TaggedError<SagaUnprocessable>()(
  "SagaUnprocessable",
  { code: Schema.Literal("AGENT_NOT_FOUND", "LIMIT_EXCEEDED", "INVALID_AMOUNT", "MANDATE_INVALID"), message: Schema.String },
  HttpApiSchema.annotations({ status: 422 })
) {}

/** The request is signed, but not by the mandate's grantor: only the grantor starts a saga on its mandate. */
export class SagaForbidden extends Schema.TaggedError<SagaForbidden>()(
  "SagaForbidden",
  { code: Schema.Literal("MANDATE_GRANTOR_MISMATCH"), message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

/** The hub cannot run sagas now: its runner's key does not resolve on it (the operator must register the runner). */
export class SagaRunnerUnavailableError extends Schema.TaggedError<SagaRunnerUnavailableError>()(
  "SagaRunnerUnavailable",
  { code: Schema.Literal("SAGA_RUNNER_UNAVAILABLE"), message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

const SagaPath = Schema.Struct({ sagaId: Schema.String })
const Page = Schema.Struct({ limit: Schema.optional(Schema.NumberFromString), cursor: Schema.optional(Schema.String) })

// The events endpoint answers with Server-Sent Events; HttpApi declares JSON bodies, so the media type is written here.
const asEventStream = (operation: Record<string, unknown>): Record<string, unknown> => {
  const responses = operation.responses as Record<string, { readonly content?: object }> | undefined
  const ok = responses?.["200"]
  if (responses === undefined || ok === undefined) return operation
  const stream = { schema: { type: "string", description: "Server-Sent Events, one per progress event (id = seq, event = type, data = the SagaEvent as JSON); the stream ends after the saga's final event." } }
  return { ...operation, responses: { ...responses, "200": { ...ok, content: { "text/event-stream": stream } } } }
}

/**
 * Sagas: start one, list one's own, read its state, follow its progress. Every request is signed (mesh-sig) by the mandate's
 * grantor; a saga is read only by the one who started it (another's is 404).
 */
export class SagaGroup extends HttpApiGroup.make("sagas")
  .add(
    HttpApiEndpoint.post("startSaga", "/sagas")
      .setPayload(SagaInput)
      .addSuccess(SagaResult, { status: 202 })
      .addError(SagaUnprocessable)
      .addError(SagaForbidden)
      .addError(SagaRunnerUnavailableError)
      .addError(NotFound)
      .addError(Overloaded)
      .annotate(OpenApi.Description, "Starts a saga under the caller's spending mandate, granted to the hub's saga runner; the request is signed (mesh-sig) by the mandate's grantor. Answers at once with status running.")
  )
  .add(
    HttpApiEndpoint.get("listSagas", "/sagas")
      .setUrlParams(Page)
      .addSuccess(SagaPage)
      .annotate(OpenApi.Description, "The sagas the request's signer started, newest first: at most `limit` (1 to 200, default 50) after `cursor` (the last page's `nextCursor`; null on the last page). Another's sagas are never listed.")
  )
  .add(
    HttpApiEndpoint.get("getSaga", "/sagas/:sagaId")
      .setPath(SagaPath)
      .addSuccess(SagaResult)
      .addError(NotFound)
      .annotate(OpenApi.Description, "A saga's state: status, steps, commit tokens.")
  )
  .add(
    HttpApiEndpoint.get("sagaEvents", "/sagas/:sagaId/events")
      .setPath(SagaPath)
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(OpenApi.Description, "A saga's progress as Server-Sent Events, from the event after Last-Event-ID (all without it).")
      .annotate(OpenApi.Transform, asEventStream)
  )
  .prefix("/v1")
  .addError(BadRequest)
  .addError(Unauthorized)
  .addError(RateLimited)
  .addError(Unavailable) {}

/** The hub's contract with the saga endpoints: what `SagaHub` serves and documents at `/openapi.json`. */
export class SagaHubApi extends HubApi.add(SagaGroup) {}
