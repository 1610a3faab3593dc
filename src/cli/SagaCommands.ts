/**
 * The `mesh saga` commands: `run <file>` (start a saga and wait for its end), `status <id>` (its state now, or with
 * `--follow` at its end), `ls` (the sagas one started). Every request is signed by the identity given, the grantor of
 * the sagas' mandates (docs/sagas.md §6). The saga's state is the result, on stdout; `--follow` prints each progress
 * event on stderr as it comes. A command that waited for a saga's end exits 1 unless it committed.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { tryParseJsonStrict } from "../core/internal/json.js"
import { type SagaEvent, SagaInput, type SagaResult, type SagaSummary } from "../saga/Saga.js"
import * as SagaClient from "../saga/SagaClient.js"
import { CliError, type IdentityFile, note, printResult, problemLine, readIdentityFile } from "./Cli.js"

/** One progress event as a line of `mesh saga run --follow`. */
export const formatSagaEvent = (e: SagaEvent): string => {
  const d = e.data as Record<string, unknown>
  const detail =
    e.type === "step_started"
      ? ` ${String(d.capability)} on ${String(d.agentDid)}, budget ${String(d.budgetUsd)} USD`
      : e.type === "step_committed"
        ? ` used ${String(d.usedUsd)} USD`
        : typeof d.code === "string"
          ? ` ${d.code}${typeof d.message === "string" ? `: ${d.message}` : ""}`
          : ""
  return `${String(e.seq).padStart(3)} ${e.type}${e.step === null ? "" : ` ${e.step}`}${detail}`
}

/** One saga as a line of `mesh saga ls`. */
export const formatSagaLine = (s: SagaSummary): string =>
  `${s.sagaId}  ${s.status.padEnd(19)}  ${String(s.steps).padStart(2)} step${s.steps === 1 ? " " : "s"}  ${s.createdAt}` +
  (s.failedStep === null ? "" : `  failed at ${s.failedStep}${s.errorCode === null ? "" : ` (${s.errorCode})`}`)

/** The signer of an identity file: its DID and its PKCS#8 key. */
const signerOf = (file: IdentityFile): { readonly did: string; readonly privateKey: string } => ({ did: file.did, privateKey: file.privateKeyPkcs8B64 })

const sagaCallFailed = (e: SagaClient.SagaCallError) => new CliError({ code: "INVALID_ARGUMENT", message: `${e.code}: ${e.message}` })

const clientOf = (args: { readonly hubUrl: string; readonly identity: string }) =>
  Effect.flatMap(readIdentityFile(args.identity), (file) => Effect.map(SagaClient.make({ hubUrl: args.hubUrl, identity: signerOf(file) }), (client) => ({ client, file })))

/** Reads a saga file (`{ mandate, steps }`, strict JSON) for `mesh saga run`. */
export const readSagaFile = (file: string): Effect.Effect<SagaInput, CliError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* Effect.mapError(fs.readFileString(file), (e) => new CliError({ code: "IO_ERROR", message: `cannot read ${file}: ${e.message}` }))
    const parsed = tryParseJsonStrict(text)
    if (!parsed.ok) return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `${file}: ${parsed.error.message}` }))
    return yield* Effect.mapError(
      Schema.decodeUnknown(SagaInput)(parsed.value),
      (e: ParseResult.ParseError) => new CliError({ code: "INVALID_ARGUMENT", message: `${file}: ${problemLine(e)}` })
    )
  })

/** Follows a saga's progress to its end (printing each event on stderr when `show`), then reads it as it ended. */
const untilEnd = (client: SagaClient.SagaClientApi, sagaId: string, show: boolean) =>
  Effect.zipRight(
    Effect.mapError(Stream.runForEach(client.sagaEvents(sagaId), (e) => (show ? note(formatSagaEvent(e)) : Effect.void)), sagaCallFailed),
    Effect.mapError(client.getSaga(sagaId), sagaCallFailed)
  )

/**
 * `mesh saga run <file>`: starts the saga as `identity` (the mandate's grantor, who signs every request), waits for its
 * end and prints it (JSON); with `follow`, each progress event on stderr meanwhile.
 */
export const runSagaFile = (args: { readonly hubUrl: string; readonly file: string; readonly identity: string; readonly follow?: boolean }) =>
  Effect.gen(function* () {
    const input = yield* readSagaFile(args.file)
    const { client } = yield* clientOf(args)
    const started = yield* Effect.mapError(client.startSaga(input), sagaCallFailed)
    yield* note(`saga ${started.sagaId} started on ${args.hubUrl}`)
    const ended = yield* untilEnd(client, started.sagaId, args.follow === true)
    yield* Console.log(JSON.stringify(ended, null, 2))
    return ended
  }).pipe(Effect.provide(FetchHttpClient.layer))

/**
 * `mesh saga status <id>`: the saga's state (JSON), read as the identity that started it; with `follow`, its progress
 * events on stderr until it ends, then its state at the end.
 */
export const sagaStatus = (args: { readonly hubUrl: string; readonly sagaId: string; readonly identity: string; readonly follow?: boolean }) =>
  Effect.gen(function* () {
    const { client } = yield* clientOf(args)
    const saga = yield* (args.follow === true ? untilEnd(client, args.sagaId, true) : Effect.mapError(client.getSaga(args.sagaId), sagaCallFailed))
    yield* Console.log(JSON.stringify(saga, null, 2))
    return saga
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** `mesh saga ls`: the sagas the identity started, newest first, one per line (or the page as JSON). */
export const listSagas = (args: {
  readonly hubUrl: string
  readonly identity: string
  readonly limit: number
  readonly cursor: Option.Option<string>
  readonly json: boolean
}) =>
  Effect.gen(function* () {
    const { client, file } = yield* clientOf(args)
    const page = yield* Effect.mapError(client.listSagas({ limit: args.limit, ...(Option.isSome(args.cursor) ? { cursor: args.cursor.value } : {}) }), sagaCallFailed)
    if (args.json) return yield* printResult(true, page, () => "")
    // An empty list prints nothing on stdout; the note says why.
    if (page.items.length === 0) return yield* note(`no sagas started by ${file.did} on ${args.hubUrl}`)
    for (const s of page.items) yield* Console.log(formatSagaLine(s))
    if (page.nextCursor !== null) yield* note(`(more: mesh saga ls --cursor ${page.nextCursor})`)
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** How a command that waited for a saga's end exits: 0 when it committed, else 1, saying how it ended on stderr. */
export const exitByOutcome = (ended: SagaResult) =>
  ended.status === "committed"
    ? Effect.void
    : Effect.zipRight(
      Console.error(`mesh: saga ${ended.sagaId} ended ${ended.status}${ended.failedStep === null ? "" : ` at step ${ended.failedStep}`}${ended.errorCode === null ? "" : ` (${ended.errorCode})`}`),
      Effect.sync(() => void (process.exitCode = 1))
    )
