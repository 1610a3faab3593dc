/**
 * Sagas for callers without Effect: `runSaga` starts a saga on a hub, reports its progress events as they come and
 * resolves with the saga as it ended; `startSaga` and `getSaga` for callers that follow it themselves. Rejects with
 * `SagaCallError` (match on `code`).
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import type { SignAs } from "../agent/AgentClient.js"
import { runWithKeys } from "../node/internal/promiseRuntime.js"
import type { SagaEvent, SagaInput, SagaResult } from "../saga/Saga.js"
import * as SagaClient from "../saga/SagaClient.js"

const withClient = <A>(hubUrl: string, identity: SignAs, f: (c: SagaClient.SagaClientApi) => Effect.Effect<A, SagaClient.SagaCallError>): Promise<A> =>
  runWithKeys(Effect.flatMap(SagaClient.make({ hubUrl, identity }), f).pipe(Effect.provide(FetchHttpClient.layer)))

/**
 * Runs a saga on the hub at `hubUrl` as `identity`, the grantor of its mandate (every request is signed by it);
 * `onEvent` sees each progress event; resolves with the saga's end.
 */
export const runSaga = (
  hubUrl: string,
  input: SagaInput,
  options: { readonly identity: SignAs; readonly onEvent?: (event: SagaEvent) => void }
): Promise<SagaResult> => withClient(hubUrl, options.identity, (c) => c.runSaga(input, options))

/** Starts a saga as `identity` (the mandate's grantor); resolves at once with status `running`. */
export const startSaga = (hubUrl: string, input: SagaInput, options: { readonly identity: SignAs }): Promise<SagaResult> =>
  withClient(hubUrl, options.identity, (c) => c.startSaga(input))

/** A saga's state now, read as `identity` (the one who started it). */
export const getSaga = (hubUrl: string, sagaId: string, options: { readonly identity: SignAs }): Promise<SagaResult> =>
  withClient(hubUrl, options.identity, (c) => c.getSaga(sagaId))
