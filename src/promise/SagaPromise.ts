/**
 * Sagas for callers without Effect: `runSaga` starts a saga on a hub, reports its progress events as they come and
 * resolves with the saga as it ended; `startSaga` and `getSaga` for callers that follow it themselves. Rejects with
 * `SagaCallError` (match on `code`).
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import { runPromise } from "../node/internal/promiseRuntime.js"
import type { SagaEvent, SagaInput, SagaResult } from "../saga/Saga.js"
import * as SagaClient from "../saga/SagaClient.js"

const withClient = <A>(hubUrl: string, f: (c: SagaClient.SagaClientApi) => Effect.Effect<A, SagaClient.SagaCallError>): Promise<A> =>
  runPromise(Effect.flatMap(SagaClient.make({ hubUrl }), f).pipe(Effect.provide(FetchHttpClient.layer)))

/** Runs a saga on the hub at `hubUrl`; `onEvent` sees each progress event; resolves with the saga's end. */
export const runSaga = (hubUrl: string, input: SagaInput, options?: { readonly onEvent?: (event: SagaEvent) => void }): Promise<SagaResult> =>
  withClient(hubUrl, (c) => c.runSaga(input, options))

/** Starts a saga; resolves at once with status `running`. */
export const startSaga = (hubUrl: string, input: SagaInput): Promise<SagaResult> => withClient(hubUrl, (c) => c.startSaga(input))

/** A saga's state now. */
export const getSaga = (hubUrl: string, sagaId: string): Promise<SagaResult> => withClient(hubUrl, (c) => c.getSaga(sagaId))
