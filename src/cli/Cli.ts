/**
 * What the `mesh` subcommands do, apart from argument parsing, so tests can run them directly.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Hub from "../hub/Hub.js"
import * as Database from "../sql/Database.js"
import * as MeshClient from "../hub/MeshClient.js"
import { VERSION } from "../core/Version.js"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { PlatformError } from "@effect/platform/Error"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import { didHash, extractPublicKey, generateDid, type InvalidDid, isNormalizedDid, publicKeyOfDidKey, verificationMethodId } from "../core/Did.js"
import { importPublicKey, Keys, type MalformedKey } from "../core/Keys.js"
import { equalBytes, randomBytes, toBase64, toHex } from "../core/internal/bytes.js"
import { tryParseJsonStrict } from "../core/internal/json.js"
import type * as AgentServer from "../agent/AgentServer.js"
import { type SagaEvent, SagaInput } from "../saga/Saga.js"
import * as SagaClient from "../saga/SagaClient.js"
import type * as Serve from "../http/Serve.js"
import * as NodePath from "node:path"
import { pathToFileURL } from "node:url"

/** The CLI could not do what was asked; `code` says why. */
export class CliError extends Schema.TaggedError<CliError>()("CliError", {
  code: Schema.Literal("FILE_EXISTS", "IO_ERROR", "MODULE_INVALID", "IDENTITY_INVALID", "INVALID_ARGUMENT"),
  message: Schema.String
}) {}

/** The identity file `mesh keygen` writes (docs/protocol.md §8). */
export const IdentityFile = Schema.Struct({
  did: Schema.String,
  didHash: Schema.String,
  publicKeyB64: Schema.String,
  /** PKCS#8 DER, standard base64. */
  privateKeyPkcs8B64: Schema.String,
  didKey: Schema.String,
  document: Schema.Unknown
})
/** The identity file `mesh keygen` writes. */
export type IdentityFile = typeof IdentityFile.Type

const isAlreadyExists = (e: PlatformError): boolean => e._tag === "SystemError" && e.reason === "AlreadyExists"

/**
 * Creates an identity and writes it to a file readable only by its owner; refuses to overwrite unless `force`.
 * The file is created exclusively (O_EXCL), so nothing at the path is followed, a dangling symbolic link included;
 * `force` writes a new file exclusively beside it and renames it over the path, which replaces a link, never its target.
 */
export const keygen = (args: {
  readonly name: string
  readonly namespace: Option.Option<string>
  readonly endpoint: Option.Option<string>
  readonly out: Option.Option<string>
  readonly force: boolean
}): Effect.Effect<IdentityFile & { readonly path: string }, CliError | InvalidDid, Keys | FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const identity = yield* generateDid(args.name, Option.getOrUndefined(args.endpoint), Option.getOrUndefined(args.namespace))
    const file = path.resolve(Option.getOrElse(args.out, () => `${args.name}.identity.json`))
    const ioError = (e: { readonly message: string }) => new CliError({ code: "IO_ERROR", message: e.message })
    const content: IdentityFile = {
      did: identity.did,
      didHash: didHash(identity.did),
      publicKeyB64: identity.publicKey,
      privateKeyPkcs8B64: toBase64(identity.privateKey.toPkcs8()),
      didKey: identity.didKey,
      document: identity.document
    }
    const text = JSON.stringify(content, null, 2) + "\n"
    if (!args.force) {
      yield* fs.writeFileString(file, text, { flag: "wx", mode: 0o600 }).pipe(
        Effect.mapError((e) =>
          isAlreadyExists(e)
            ? new CliError({ code: "FILE_EXISTS", message: `${file} exists (a file, directory or link, even a dangling one); pass --force to replace it` })
            : ioError(e)
        )
      )
    } else {
      const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${toHex(randomBytes(8))}.tmp`)
      yield* Effect.mapError(fs.writeFileString(tmp, text, { flag: "wx", mode: 0o600 }), ioError)
      // The umask may have narrowed the mode; `tmp` is the regular file just created, so chmod follows nothing.
      yield* Effect.mapError(fs.chmod(tmp, 0o600), ioError).pipe(
        Effect.zipRight(Effect.mapError(fs.rename(tmp, file), ioError)),
        Effect.tapError(() => Effect.ignore(fs.remove(tmp)))
      )
    }
    return { ...content, path: file }
  })

const identityInvalid = (file: string, message: string) => new CliError({ code: "IDENTITY_INVALID", message: `identity ${file}: ${message}` })

/**
 * Reads an identity file (`--identity`): strict JSON, every member present, and one key throughout. The public key,
 * the document's and the did:key's must be acceptable Ed25519 keys (`INVALID_PUBLIC_KEY` otherwise) and equal to the
 * one the private key derives.
 */
export const readIdentityFile = (
  file: string
): Effect.Effect<IdentityFile, CliError | MalformedKey, Keys | FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* Effect.mapError(fs.readFileString(file), (e) => new CliError({ code: "IO_ERROR", message: `cannot read identity ${file}: ${e.message}` }))
    const parsed = tryParseJsonStrict(text)
    if (!parsed.ok) return yield* Effect.fail(identityInvalid(file, parsed.error.message))
    const decoded = Schema.decodeUnknownEither(IdentityFile)(parsed.value)
    if (Either.isLeft(decoded)) return yield* Effect.fail(identityInvalid(file, ParseResult.TreeFormatter.formatErrorSync(decoded.left)))
    const id = decoded.right
    if (!isNormalizedDid(id.did)) return yield* Effect.fail(identityInvalid(file, `${JSON.stringify(id.did)} is not a lower-case did:mesh DID`))
    const publicKey = yield* importPublicKey(id.publicKeyB64)
    const fromDocument = yield* extractPublicKey(id.document, verificationMethodId(id.did)).pipe(
      Effect.catchTags({
        MalformedDidDocument: (e) => Effect.fail(identityInvalid(file, e.message)),
        KeyRevoked: (e) => Effect.fail(identityInvalid(file, e.message))
      })
    )
    const fromDidKey = yield* publicKeyOfDidKey(id.didKey)
    const keys = yield* Keys
    const privateKey = yield* keys.importPrivateKey(id.privateKeyPkcs8B64)
    for (const [what, k] of [["publicKeyB64", publicKey], ["document", fromDocument], ["didKey", fromDidKey]] as const) {
      if (!equalBytes(k, privateKey.publicKey)) return yield* Effect.fail(identityInvalid(file, `the ${what} key is not the private key's`))
    }
    return id
  })
// A `--public-url` must be an http(s) URL: signed requests name it and its host is allowed in Host.
const checkHttpUrl = (url: string): Effect.Effect<void, CliError> =>
  URL.canParse(url) && /^https?:$/.test(new URL(url).protocol)
    ? Effect.void
    : Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `--public-url ${JSON.stringify(url)} is not an http(s) URL` }))

/** `--allowed-host` / `--allowed-origin` of `mesh hub` and `mesh agent`. */
export interface ServingFlags {
  readonly allowedHosts?: ReadonlyArray<string>
  readonly allowedOrigins?: ReadonlyArray<string>
}

// The flags add to what a module already allows.
const servingOf = (flags: ServingFlags, base: Serve.Guards = {}): Serve.Guards => ({
  ...base,
  allowedHosts: [...(base.allowedHosts ?? []), ...(flags.allowedHosts ?? [])],
  allowedOrigins: [...(base.allowedOrigins ?? []), ...(flags.allowedOrigins ?? [])]
})

/** Where `mesh hub` keeps its database unless told otherwise. */
export const DEFAULT_DATABASE = ".mesh/hub.db"

/** Runs a hub until interrupted (SIGINT/SIGTERM), printing its URLs and, on first start, the admin credential. */
export const runHub = (
  args: {
    readonly port: number
    readonly host: string
    readonly db: string
    readonly publicUrl?: Option.Option<string>
    readonly newAdminKey?: boolean
    readonly probePort?: Option.Option<number>
    /** An identity file (`mesh keygen`): the hub runs sagas as this DID, which callers grant their mandates to. */
    readonly sagaIdentity?: Option.Option<string>
  } & ServingFlags
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const publicUrl = Option.getOrUndefined(args.publicUrl ?? Option.none())
      if (publicUrl !== undefined) yield* checkHttpUrl(publicUrl)
      const options: Hub.HubOptions = {
        database: args.db,
        port: args.port,
        host: args.host,
        serving: { ...servingOf(args), ...Option.match(args.probePort ?? Option.none(), { onNone: () => ({}), onSome: (probePort) => ({ probePort }) }) },
        ...(publicUrl === undefined ? {} : { publicUrl }),
        ...(args.newAdminKey === true ? { newAdminKey: true } : {})
      }
      const sagaFile = Option.getOrUndefined(args.sagaIdentity ?? Option.none())
      const runner = sagaFile === undefined ? undefined : yield* readIdentityFile(sagaFile)
      // Loaded only for a hub with sagas, so a plain `mesh hub` does not load the workflow engine (the bin is chunked).
      const hub = runner === undefined
        ? yield* Hub.start(options)
        : yield* Effect.flatMap(Effect.promise(() => import("../saga/SagaHub.js")), (SagaHub) =>
          SagaHub.start({ ...options, runner: { did: runner.did, privateKey: runner.privateKeyPkcs8B64 } }))
      if (Option.isSome(hub.admin)) {
        yield* Console.log(`admin credential (shown once, store it now; send as "Authorization: Bearer <key>"):\n${hub.admin.value.apiKey}\n`)
      }
      // The "database" line comes last: scripts wait for it.
      yield* Console.log(`agent-mesh hub ${VERSION} listening on ${hub.url}`)
      yield* Console.log(`  registry   ${hub.url}/v1/agents`)
      yield* Console.log(`  platform   ${hub.url}/api/status`)
      yield* Console.log(`  docs       ${hub.url}/docs  (OpenAPI: ${hub.url}/openapi.json)`)
      if (runner !== undefined) yield* Console.log(`  sagas      ${hub.url}/v1/sagas  (runner ${runner.did}: grant mandates to it)`)
      if (hub.probeUrl !== undefined) yield* Console.log(`  probe      ${hub.probeUrl}/health`)
      yield* Console.log(`  database   ${Database.describe(args.db)}`)
      yield* Effect.logInfo("hub started")
      return yield* Effect.never
    })
  ).pipe(Effect.onInterrupt(() => Console.log("hub stopped")))

/** Runs a platform apart from its registry until interrupted. */
export const runPlatform = (
  args: { readonly registryUrl: string; readonly registryKey: Redacted.Redacted<string>; readonly port: number; readonly host: string } & ServingFlags
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const platform = yield* Hub.startPlatform({
        registryUrl: args.registryUrl,
        apiKey: Redacted.value(args.registryKey),
        port: args.port,
        host: args.host,
        serving: servingOf(args)
      })
      yield* Console.log(`agent-mesh platform ${VERSION} listening on ${platform.url} (registry ${args.registryUrl})`)
      return yield* Effect.never
    })
  ).pipe(Effect.onInterrupt(() => Console.log("platform stopped")))

/** Creates an API key on a hub with the admin credential. */
export const createKey = (args: {
  readonly hubUrl: string
  readonly adminKey: Redacted.Redacted<string>
  readonly owner: string
  readonly label: Option.Option<string>
}) =>
  Effect.flatMap(MeshClient.make({ hubUrl: args.hubUrl, apiKey: Redacted.value(args.adminKey), retry: { times: 2 } }), (client) =>
    client.createApiKey({ owner: args.owner, ...(Option.isSome(args.label) ? { label: args.label.value } : {}) })
  ).pipe(Effect.provide(FetchHttpClient.layer))

/** What `mesh agent <module>` loads: the module's default export, options or a function returning them. */
const agentOptionsOf = (exported: unknown): Promise<AgentServer.AgentServerOptions> =>
  Promise.resolve(typeof exported === "function" ? (exported as () => unknown)() : exported).then((o) => {
    if (typeof o !== "object" || o === null || typeof (o as { name?: unknown }).name !== "string") {
      throw new Error("its default export must be agent server options ({ name, handler, … }) or a function returning them")
    }
    return o as AgentServer.AgentServerOptions
  })

/** Imports an agent module; TypeScript modules load through tsx when it is installed. */
const importAgentModule = (file: string): Effect.Effect<AgentServer.AgentServerOptions, CliError> =>
  Effect.tryPromise({
    try: async () => {
      const absolute = NodePath.resolve(file)
      if (/\.[mc]?tsx?$/.test(absolute)) {
        const tsx = await import("tsx/esm/api").catch(() => {
          throw new Error("loading a TypeScript module needs tsx (npm install --save-dev tsx), or compile it to JavaScript first")
        })
        tsx.register()
      }
      const mod = (await import(pathToFileURL(absolute).href)) as { readonly default?: unknown }
      return agentOptionsOf(mod.default)
    },
    catch: (e) => new CliError({ code: "MODULE_INVALID", message: `cannot load ${file}: ${e instanceof Error ? e.message : String(e)}` })
  })

/** Runs the agent a module exports until interrupted; flags override the module's options. */
export const runAgent = (args: {
  readonly module: string
  readonly allowedHosts?: ReadonlyArray<string>
  readonly allowedOrigins?: ReadonlyArray<string>
  readonly port: Option.Option<number>
  readonly host: Option.Option<string>
  readonly db: Option.Option<string>
  readonly hub: Option.Option<string>
  readonly identity: Option.Option<string>
  /** `anthropic` or `openai` (settings from the environment), overriding the module's provider. */
  readonly provider?: Option.Option<"anthropic" | "openai">
  readonly model?: Option.Option<string>
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const loaded = yield* importAgentModule(args.module)
      const identity = Option.isNone(args.identity) ? undefined : yield* readIdentityFile(args.identity.value)
      const options: AgentServer.AgentServerOptions = {
        ...loaded,
        ...(Option.isSome(args.port) ? { port: args.port.value } : {}),
        ...(Option.isSome(args.host) ? { host: args.host.value } : {}),
        ...(Option.isSome(args.db) ? { database: args.db.value } : {}),
        ...(Option.isSome(args.hub) ? { hubUrl: args.hub.value } : {}),
        ...(identity === undefined ? {} : { did: identity.did, privateKey: identity.privateKeyPkcs8B64 }),
        ...(args.provider !== undefined && Option.isSome(args.provider) ? { provider: args.provider.value } : {}),
        ...(args.model !== undefined && Option.isSome(args.model) ? { model: args.model.value } : {}),
        serving: servingOf(args, loaded.serving)
      }
      // Loaded only by `mesh agent`: the agent server, its router and its providers are not parsed by `mesh hub`.
      const AgentServerModule = yield* Effect.promise(() => import("../agent/AgentServer.js"))
      const agent = yield* AgentServerModule.make(options)
      yield* Console.log(`agent-mesh agent ${options.name} ${VERSION} listening on ${agent.url}`)
      yield* Console.log(`  did        ${agent.did}  (didHash ${agent.didHash})`)
      yield* Console.log(`  run        POST ${agent.url}/v1/run  (auth ${options.auth ?? "none"})`)
      yield* Console.log(`  discovery  ${agent.url}/.well-known/mesh-agent.json`)
      return yield* Effect.never
    })
  ).pipe(Effect.onInterrupt(() => Console.log("agent stopped")))

/** One progress event as a line of `mesh saga run`. */
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

const sagaCallFailed = (e: SagaClient.SagaCallError) => new CliError({ code: "INVALID_ARGUMENT", message: `${e.code}: ${e.message}` })

/** Reads a saga file (`{ mandate, steps }`, strict JSON) for `mesh saga run`. */
export const readSagaFile = (file: string): Effect.Effect<SagaInput, CliError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* Effect.mapError(fs.readFileString(file), (e) => new CliError({ code: "IO_ERROR", message: `cannot read ${file}: ${e.message}` }))
    const parsed = tryParseJsonStrict(text)
    if (!parsed.ok) return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `${file}: ${parsed.error.message}` }))
    return yield* Effect.mapError(
      Schema.decodeUnknown(SagaInput)(parsed.value),
      (e) => new CliError({ code: "INVALID_ARGUMENT", message: `${file}: ${ParseResult.TreeFormatter.formatErrorSync(e)}` })
    )
  })

/** `mesh saga run <file>`: starts the saga, prints each progress event, then the saga as it ended (JSON). */
export const runSagaFile = (args: { readonly hubUrl: string; readonly file: string }) =>
  Effect.gen(function* () {
    const input = yield* readSagaFile(args.file)
    const client = yield* SagaClient.make({ hubUrl: args.hubUrl })
    const started = yield* Effect.mapError(client.startSaga(input), sagaCallFailed)
    yield* Console.log(`saga ${started.sagaId} started on ${args.hubUrl}`)
    yield* Effect.mapError(Stream.runForEach(client.sagaEvents(started.sagaId), (e) => Console.log(formatSagaEvent(e))), sagaCallFailed)
    const ended = yield* Effect.mapError(client.getSaga(started.sagaId), sagaCallFailed)
    yield* Console.log(JSON.stringify(ended, null, 2))
    return ended
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** `mesh saga status <id>`: the saga's state (JSON). */
export const sagaStatus = (args: { readonly hubUrl: string; readonly sagaId: string }) =>
  Effect.gen(function* () {
    const client = yield* SagaClient.make({ hubUrl: args.hubUrl })
    const saga = yield* Effect.mapError(client.getSaga(args.sagaId), sagaCallFailed)
    yield* Console.log(JSON.stringify(saga, null, 2))
    return saga
  }).pipe(Effect.provide(FetchHttpClient.layer))
