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
import { Overloaded } from "../http/ErrorBody.js"
import { BadRequest, errors, RateLimited } from "../hub/HubError.js"
import { ApiKeyAuthLive, docsPage, GroupsLive, makeVerifySigned } from "../hub/HubHttp.js"
import type { SagaNotFound, SagaRefused, SagaUnavailable } from "./Saga.js"
import { SagaForbidden, SagaHubApi, SagaRunnerUnavailableError, SagaUnprocessable } from "./SagaApi.js"
import { SagaScheduler } from "./SagaScheduler.js"

const refused = (e: SagaRefused | SagaNotFound) => {
  switch (e._tag) {
    case "SagaInvalid":
      return new BadRequest({ code: "INVALID_REQUEST", message: e.message })
    case "SagaNotFound":
      return errors.notFound(e.message)
    case "SagaUnavailable":
      return errors.unavailable(e.message)
    case "SagaGrantorMismatch":
      return new SagaForbidden({ code: e.code, message: e.message })
    case "SagaRunnerUnavailable":
      return new SagaRunnerUnavailableError({ code: e.code, message: e.message })
    case "SagaBusy":
      return e.code === "RATE_LIMITED"
        ? new RateLimited({ code: e.code, message: e.message, retryAfterSeconds: e.retryAfterSeconds })
        : new Overloaded({ code: e.code, message: e.message, retryAfterSeconds: e.retryAfterSeconds })
    default:
      return new SagaUnprocessable({ code: e.code, message: e.message })
  }
}

const notFoundOr = (e: SagaNotFound | SagaUnavailable) => (e._tag === "SagaNotFound" ? errors.notFound(e.message) : errors.unavailable(e.message))

const encoder = new TextEncoder()

/**
 * The saga group's handlers. Who asks is proven by the request's signature, never by the mandate it carries: every
 * step agent holds the caller's mandate (in its payment mandate's `prf`), so holding it proves nothing.
 */
export const SagasLive = HttpApiBuilder.group(SagaHubApi, "sagas", (handlers) =>
  Effect.gen(function* () {
    const scheduler = yield* SagaScheduler
    const verify = yield* makeVerifySigned
    const signer = Effect.flatMap(HttpServerRequest.HttpServerRequest, verify)
    return handlers
      .handle("startSaga", ({ payload }) => Effect.flatMap(signer, (caller) => Effect.mapError(scheduler.submit(caller, payload), refused)))
      .handle("listSagas", ({ urlParams }) =>
        Effect.flatMap(signer, (caller) =>
          Effect.mapError(
            scheduler.list(caller, { ...(urlParams.limit === undefined ? {} : { limit: urlParams.limit }), ...(urlParams.cursor === undefined ? {} : { cursor: urlParams.cursor }) }),
            (e) => (e._tag === "SagaInvalid" ? new BadRequest({ code: e.code, message: e.message }) : errors.unavailable(e.message))
          )
        )
      )
      .handle("getSaga", ({ path }) => Effect.flatMap(signer, (caller) => Effect.mapError(scheduler.get(path.sagaId, caller), notFoundOr)))
      .handleRaw("sagaEvents", ({ path }) =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const caller = yield* verify(req)
          const last = Number(req.headers["last-event-id"] ?? "0")
          const from = Number.isSafeInteger(last) && last >= 0 ? last : 0
          // Read the saga first, so an unknown id is a 404 rather than an empty stream.
          yield* Effect.mapError(scheduler.get(path.sagaId, caller), notFoundOr)
          const events = scheduler.events(path.sagaId, from, caller).pipe(
            Stream.map((e) => encoder.encode(Sse.encodeEvent({ id: String(e.seq), event: e.type, data: JSON.stringify(e) }))),
            Stream.catchAll(() => Stream.empty)
          )
          return HttpServerResponse.stream(events, { contentType: Sse.CONTENT_TYPE, headers: Sse.RESPONSE_HEADERS })
        })
      )
  })
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
