/**
 * The typed client of a hub's saga endpoints: start a saga, read it, follow its progress (SSE, resumed from the last
 * event seen when the connection drops), and `runSaga`, which does all three and answers with the saga's end. It
 * sits on the saga floor, beside the contract it calls; `MeshClient` (hub floor) cannot know sagas.
 *
 * Every request is signed (mesh-sig) by `identity`, the grantor of the saga's mandate: the hub starts a saga only
 * for its mandate's grantor and shows it only to the one who started it (docs/sagas.md §6).
 *
 * Floor: saga (docs/architecture.md §3).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { SignAs } from "../agent/AgentClient.js"
import { Keys } from "../core/Keys.js"
import { signWith } from "../hub/MeshClient.js"
import * as Stream from "effect/Stream"
import * as Sse from "../core/Sse.js"
import { isRecord } from "../core/internal/record.js"
import { isFinal, SagaEvent, type SagaInput, SagaPage, SagaResult } from "./Saga.js"

/** A saga call failed; `code` is the hub's (INVALID_REQUEST, AGENT_NOT_FOUND, LIMIT_EXCEEDED, MANDATE_INVALID, NOT_FOUND, …) or HUB_UNREACHABLE, BAD_RESPONSE. */
export class SagaCallError extends Schema.TaggedError<SagaCallError>()("SagaCallError", {
  code: Schema.String,
  message: Schema.String,
  status: Schema.optional(Schema.Number)
}) {}

/** Client settings. */
export interface SagaClientOptions {
  readonly hubUrl: string
  /** Who starts and reads the sagas: the grantor of their mandates; its key signs every request. */
  readonly identity: SignAs
  /** How often a dropped event stream is reopened from the last event seen; default 5. */
  readonly reconnects?: number
}

/** The operations of the saga client. */
export interface SagaClientApi {
  readonly startSaga: (input: SagaInput) => Effect.Effect<SagaResult, SagaCallError>
  readonly getSaga: (sagaId: string) => Effect.Effect<SagaResult, SagaCallError>
  /** The sagas this identity started, newest first: `limit` of them (default 50, at most 200) after `cursor`. */
  readonly listSagas: (page?: { readonly limit?: number; readonly cursor?: string }) => Effect.Effect<SagaPage, SagaCallError>
  /** The saga's events after `afterSeq`, ending with its final event. */
  readonly sagaEvents: (sagaId: string, afterSeq?: number) => Stream.Stream<SagaEvent, SagaCallError>
  /** Starts the saga, reports each event to `onEvent`, and answers with the saga as it ended. */
  readonly runSaga: (input: SagaInput, options?: { readonly onEvent?: (event: SagaEvent) => void }) => Effect.Effect<SagaResult, SagaCallError>
}

const unreachable = (e: { readonly message: string }) => new SagaCallError({ code: "HUB_UNREACHABLE", message: e.message })
const decodeResult = Schema.decodeUnknown(SagaResult)
const decodePage = Schema.decodeUnknown(SagaPage)
const decodeEvent = Schema.decodeUnknown(Schema.parseJson(SagaEvent))

const answerWith = <A>(decode: (body: unknown) => Effect.Effect<A, { readonly message: string }>) => (response: HttpClientResponse.HttpClientResponse): Effect.Effect<A, SagaCallError> =>
  Effect.flatMap(Effect.mapError(response.json, unreachable), (body) =>
    response.status === 200 || response.status === 202
      ? Effect.mapError(decode(body), (e) => new SagaCallError({ code: "BAD_RESPONSE", message: e.message, status: response.status }))
      : Effect.fail(
          isRecord(body) && typeof body.code === "string"
            ? new SagaCallError({ code: body.code, message: typeof body.error === "string" ? body.error : body.code, status: response.status })
            : new SagaCallError({ code: "BAD_RESPONSE", message: `unexpected answer (HTTP ${response.status})`, status: response.status })
        )
  )
const answer = answerWith(decodeResult)

/** Builds the client over an `HttpClient`. */
export const make = (options: SagaClientOptions): Effect.Effect<SagaClientApi, never, HttpClient.HttpClient | Keys> =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const http = HttpClient.mapRequestEffect(yield* HttpClient.HttpClient, signWith(keys, options.identity))
    const base = options.hubUrl.replace(/\/+$/, "")
    const reconnects = options.reconnects ?? 5
    const startSaga = (input: SagaInput) =>
      Effect.flatMap(Effect.mapError(http.execute(HttpClientRequest.post(`${base}/v1/sagas`).pipe(HttpClientRequest.bodyUnsafeJson(input))), unreachable), answer)
    const getSaga = (sagaId: string) =>
      Effect.flatMap(Effect.mapError(http.execute(HttpClientRequest.get(`${base}/v1/sagas/${encodeURIComponent(sagaId)}`)), unreachable), answer)
    const listSagas = (page: { readonly limit?: number; readonly cursor?: string } = {}) =>
      Effect.flatMap(
        Effect.mapError(
          http.execute(HttpClientRequest.get(`${base}/v1/sagas`).pipe(HttpClientRequest.setUrlParams({ ...(page.limit === undefined ? {} : { limit: String(page.limit) }), ...(page.cursor === undefined ? {} : { cursor: page.cursor }) }))),
          unreachable
        ),
        answerWith(decodePage)
      )

    const sagaEvents = (sagaId: string, afterSeq = 0): Stream.Stream<SagaEvent, SagaCallError> => {
      const open = (from: number, left: number): Stream.Stream<SagaEvent, SagaCallError> => {
        let last = from
        let finished = false
        const request = HttpClientRequest.get(`${base}/v1/sagas/${encodeURIComponent(sagaId)}/events`).pipe(
          HttpClientRequest.setHeaders({ accept: Sse.CONTENT_TYPE, ...(from > 0 ? { "last-event-id": String(from) } : {}) })
        )
        const events = Stream.unwrap(
          Effect.flatMap(Effect.mapError(http.execute(request), unreachable), (response) =>
            response.status !== 200
              ? Effect.flatMap(answer(response), () => Effect.fail(new SagaCallError({ code: "BAD_RESPONSE", message: "no event stream", status: response.status })))
              : Effect.succeed(
                  Sse.parse(Stream.mapError(response.stream, unreachable)).pipe(
                    Stream.mapError((e) => (e instanceof SagaCallError ? e : new SagaCallError({ code: "BAD_RESPONSE", message: e.message }))),
                    Stream.mapEffect((e) => Effect.mapError(decodeEvent(e.data), (x) => new SagaCallError({ code: "BAD_RESPONSE", message: x.message }))),
                    Stream.tap((e) =>
                      Effect.sync(() => {
                        last = e.seq
                        if (isFinal(e.type)) finished = true
                      })
                    )
                  )
                )
          )
        )
        // A stream that ends (or drops) before the final event is reopened from the last event seen.
        return Stream.concat(
          Stream.catchAll(events, (e) => (e.code === "HUB_UNREACHABLE" && left > 0 ? Stream.empty : Stream.fail(e))),
          Stream.suspend(() =>
            finished ? Stream.empty : left > 0 ? open(last, left - 1) : Stream.fail(unreachable({ message: "the event stream ended before the saga did" }))
          )
        )
      }
      return open(afterSeq, reconnects)
    }

    const runSaga = (input: SagaInput, o: { readonly onEvent?: (event: SagaEvent) => void } = {}) =>
      Effect.gen(function* () {
        const started = yield* startSaga(input)
        yield* Stream.runForEach(sagaEvents(started.sagaId), (e) => Effect.sync(() => o.onEvent?.(e)))
        return yield* getSaga(started.sagaId)
      })

    return { startSaga, getSaga, listSagas, sagaEvents, runSaga }
  })

/** Runs a saga on the hub at `hubUrl` as `identity` (the mandate's grantor) and answers with its end (`SagaClient.make(...).runSaga`). */
export const runSaga = (
  hubUrl: string,
  input: SagaInput,
  options: { readonly identity: SignAs; readonly onEvent?: (event: SagaEvent) => void }
): Effect.Effect<SagaResult, SagaCallError, HttpClient.HttpClient | Keys> => Effect.flatMap(make({ hubUrl, identity: options.identity }), (c) => c.runSaga(input, options))
