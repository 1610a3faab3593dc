/**
 * The handlers of the saga endpoints, and the hub's handlers with them (`SagaHubHandlers`): the hub's own groups as
 * `HubHttp` builds them, the saga group, and `/openapi.json` + `/docs` computed from `SagaHubApi`, so the served
 * document lists the saga routes. The saga errors get their HTTP status here and nowhere else.
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Sse from "../core/Sse.js"
import { BadRequest, errors } from "../hub/HubError.js"
import { ApiKeyAuthLive, docsPage, GroupsLive } from "../hub/HubHttp.js"
import { decodeUnverified } from "../core/Mandate.js"
import type { SagaNotFound, SagaRefused, SagaUnavailable } from "./Saga.js"
import { SagaHubApi, SagaUnprocessable } from "./SagaApi.js"
import { SagaScheduler } from "./SagaScheduler.js"

const refused = (e: SagaRefused | SagaNotFound) => {
  switch (e._tag) {
    case "SagaInvalid":
      return new BadRequest({ code: "INVALID_REQUEST", message: e.message })
    case "SagaNotFound":
      return errors.notFound(e.message)
    case "SagaUnavailable":
      return errors.unavailable(e.message)
    default:
      return new SagaUnprocessable({ code: e.code, message: e.message })
  }
}

const notFoundOr = (e: SagaNotFound | SagaUnavailable) => (e._tag === "SagaNotFound" ? errors.notFound(e.message) : errors.unavailable(e.message))

const encoder = new TextEncoder()

/** The saga group's handlers. */
export const SagasLive = HttpApiBuilder.group(SagaHubApi, "sagas", (handlers) =>
  Effect.map(SagaScheduler, (scheduler) =>
    handlers
      .handle("startSaga", ({ payload }) => {
        // Who asked is the mandate's grantor: the mandate is the authority, and the scheduler verifies it before anything runs.
        const grantor = decodeUnverified(payload.mandate)
        const caller = grantor._tag === "Right" ? grantor.right.grantor : "unknown"
        return Effect.mapError(scheduler.submit(caller, payload), refused)
      })
      .handle("getSaga", ({ path }) => Effect.mapError(scheduler.get(path.sagaId), notFoundOr))
      .handleRaw("sagaEvents", ({ path }) =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const last = Number(req.headers["last-event-id"] ?? "0")
          const from = Number.isSafeInteger(last) && last >= 0 ? last : 0
          // Read the saga first, so an unknown id is a 404 rather than an empty stream.
          yield* Effect.mapError(scheduler.get(path.sagaId), notFoundOr)
          const events = scheduler.events(path.sagaId, from).pipe(
            Stream.map((e) => encoder.encode(Sse.encodeEvent({ id: String(e.seq), event: e.type, data: JSON.stringify(e) }))),
            Stream.catchAll(() => Stream.empty)
          )
          return HttpServerResponse.stream(events, { contentType: Sse.CONTENT_TYPE, headers: Sse.RESPONSE_HEADERS })
        })
      )
  )
)

/** `/openapi.json` and `/docs` of a hub with sagas, computed once from `SagaHubApi` when first asked for (not before it listens). */
export const SagaDocsLive = HttpApiBuilder.group(SagaHubApi, "docs", (handlers) =>
  Effect.sync(() => {
    let doc: OpenApi.OpenAPISpec | undefined = undefined
    let page: string | undefined = undefined
    const docOnce = () => (doc ??= OpenApi.fromApi(SagaHubApi))
    return handlers.handle("openapi", () => Effect.sync(docOnce)).handle("docs", () => Effect.sync(() => (page ??= docsPage(docOnce()))))
  })
)

/** Every group of a hub with sagas, needing the hub's services and the scheduler. */
export const SagaHubHandlers = Layer.mergeAll(GroupsLive, SagaDocsLive, SagasLive).pipe(
  Layer.provide(ApiKeyAuthLive)
)
