/**
 * What the `mesh` subcommands do, apart from argument parsing, so tests can run them directly.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Console from "effect/Console"
import * as Logger from "effect/Logger"
import * as Effect from "effect/Effect"
import * as Duration from "effect/Duration"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Hub from "../hub/Hub.js"
import * as Database from "../sql/Database.js"
import * as MeshClient from "../hub/MeshClient.js"
import { MESH_PROTOCOL_VERSION, VERSION } from "../core/Version.js"
import { DEFAULT_HEARTBEAT_INTERVAL_MS } from "../hub/Registry.js"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { PlatformError } from "@effect/platform/Error"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import {
  type Did,
  didHash,
  extractPublicKey,
  generateDid,
  identityFromKey,
  DID_HASH_PATTERN,
  type InvalidDid,
  isNormalizedDid,
  type MeshIdentity,
  publicKeyOfDidKey,
  verificationMethodId
} from "../core/Did.js"
import { importPublicKey, Keys, MalformedKey } from "../core/Keys.js"
import { equalBytes, randomBytes, toBase64, toHex } from "../core/internal/bytes.js"
import { requireCsprng } from "../core/Entropy.js"
import { tryParseJsonStrict } from "../core/internal/json.js"
import type * as AgentServer from "../agent/AgentServer.js"
import * as Mandate from "../core/Mandate.js"
import { constraintsProblem, withCanonicalUsd } from "../core/Constraints.js"
import type * as Serve from "../http/Serve.js"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { pathToFileURL } from "node:url"

/** The CLI could not do what was asked; `code` says why. */
export class CliError extends Schema.TaggedError<CliError>()("CliError", {
  code: Schema.Literal("FILE_EXISTS", "IO_ERROR", "MODULE_INVALID", "IDENTITY_INVALID", "INVALID_ARGUMENT", "CONFIG_INVALID", "MANDATE_INVALID", "RECONCILIATION_FAILED", "AGENT_NOT_FOUND"),
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

/** What `mesh keygen` writes for an identity (docs/protocol.md §8). */
export const identityFileOf = (identity: MeshIdentity): IdentityFile => ({
  did: identity.did,
  didHash: didHash(identity.did),
  publicKeyB64: identity.publicKey,
  privateKeyPkcs8B64: toBase64(identity.privateKey.toPkcs8()),
  didKey: identity.didKey,
  document: identity.document
})

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
    yield* requireCsprng("mesh keygen")
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const identity = yield* generateDid(args.name, Option.getOrUndefined(args.endpoint), Option.getOrUndefined(args.namespace))
    const file = path.resolve(Option.getOrElse(args.out, () => `${args.name}.identity.json`))
    const ioError = (e: { readonly message: string }) => new CliError({ code: "IO_ERROR", message: e.message })
    const content = identityFileOf(identity)
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

const TYPE_NAMES: Readonly<Record<string, string>> = { string: "a string", number: "a number", boolean: "true or false", unknown: "present" }

/**
 * The first thing wrong in a decoded file, as one line naming the member: `didHash is missing`, `steps[0].budgetUsd
 * must be a number, not "5"`, rather than the schema's tree.
 */
export const problemLine = (error: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return "does not match"
  const where = issue.path.length === 0
    ? "the file"
    : issue.path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("")
  const message = issue.message.replace(/\s+/g, " ").trim()
  if (issue._tag === "Missing") return `${where} is missing`
  if (issue._tag === "Unexpected") return `${where} is not expected here`
  const m = /^Expected (.+?), actual (.+)$/.exec(message)
  if (m === null) return `${where}: ${message.length > 160 ? `${message.slice(0, 160)}…` : message}`
  const expected = m[1]!
  const wanted = TYPE_NAMES[expected] ?? (expected.startsWith("{") ? (issue.path.length === 0 ? "a JSON object" : "an object") : /^(ReadonlyArray|Array)<|\[/.test(expected) ? "an array" : expected.length > 60 ? "another value" : expected)
  const actual = m[2]!.length > 60 ? `${m[2]!.slice(0, 60)}…` : m[2]!
  return `${where} must be ${wanted}, not ${actual}`
}

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
    if (Either.isLeft(decoded)) return yield* Effect.fail(identityInvalid(file, `${problemLine(decoded.left)} (an identity file is what mesh keygen writes)`))
    const id = decoded.right
    if (!isNormalizedDid(id.did)) return yield* Effect.fail(identityInvalid(file, `${JSON.stringify(id.did)} is not a lower-case did:mesh DID`))
    // A bad key keeps its code (INVALID_PUBLIC_KEY, MALFORMED_KEY) and says which member of which file holds it.
    const inMember = (member: string) => (e: MalformedKey) => new MalformedKey({ code: e.code, message: `identity ${file}: ${member}: ${e.message}` })
    const publicKey = yield* Effect.mapError(importPublicKey(id.publicKeyB64), inMember("publicKeyB64"))
    const fromDocument = yield* extractPublicKey(id.document, verificationMethodId(id.did)).pipe(
      Effect.catchTags({
        MalformedDidDocument: (e) => Effect.fail(identityInvalid(file, `document: ${e.message}`)),
        KeyRevoked: (e) => Effect.fail(identityInvalid(file, `document: ${e.message}`)),
        MalformedKey: (e) => Effect.fail(inMember("document")(e))
      })
    )
    const fromDidKey = yield* Effect.mapError(publicKeyOfDidKey(id.didKey), inMember("didKey"))
    const keys = yield* Keys
    const privateKey = yield* Effect.mapError(keys.importPrivateKey(id.privateKeyPkcs8B64), inMember("privateKeyPkcs8B64"))
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

/** How long `mesh hub` and `mesh agent` let requests and streamed runs in flight finish after SIGTERM, unless told otherwise. */
export const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS = 10

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
    /** Seconds in-flight requests may take to finish after SIGTERM (default 10). */
    readonly shutdownTimeoutSeconds?: Option.Option<number>
    /** Which A2A card URLs the hub fetches: `public` (default) or `any` (its own networks too). */
    readonly a2aCardUrls?: "public" | "any"
    /** Which addresses the hub's calls to registered URLs reach (saga steps, A2A cards): `public` (default) or `any`. */
    readonly outboundUrls?: "public" | "any"
    /** `host:port` the other saga runners reach this hub's runner at (Postgres only; default `<hostname>:34431`). */
    readonly runnerAddress?: Option.Option<string>
    /** `host:port` the runner listens on, when it differs from `runnerAddress`. */
    readonly runnerListen?: Option.Option<string>
    /** Seconds after a runner's last heartbeat its sagas move to the other runners (Postgres only; default 10). */
    readonly sagaFailoverSeconds?: Option.Option<number>
  } & ServingFlags
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const publicUrl = Option.getOrUndefined(args.publicUrl ?? Option.none())
      if (publicUrl !== undefined) yield* checkHttpUrl(publicUrl)
      const shutdownSeconds = some(args.shutdownTimeoutSeconds) ?? DEFAULT_SHUTDOWN_TIMEOUT_SECONDS
      const options: Hub.HubOptions = {
        database: args.db,
        port: args.port,
        host: args.host,
        serving: {
          ...servingOf(args),
          ...Option.match(args.probePort ?? Option.none(), { onNone: () => ({}), onSome: (probePort) => ({ probePort }) }),
          shutdownTimeoutMs: shutdownSeconds * 1000
        },
        ...(publicUrl === undefined ? {} : { publicUrl }),
        ...(args.newAdminKey === true ? { newAdminKey: true } : {}),
        ...(args.a2aCardUrls === undefined ? {} : { a2aCardUrls: args.a2aCardUrls }),
        ...(args.outboundUrls === undefined ? {} : { outboundUrls: args.outboundUrls })
      }
      const sagaFile = Option.getOrUndefined(args.sagaIdentity ?? Option.none())
      const runner = sagaFile === undefined ? undefined : yield* readIdentityFile(sagaFile)
      const clusterFlags = { address: some(args.runnerAddress), listen: some(args.runnerListen), failoverSeconds: some(args.sagaFailoverSeconds) }
      const clusterFlagGiven = Object.values(clusterFlags).some((v) => v !== undefined)
      if (clusterFlagGiven && runner === undefined) {
        return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: "--runner-address, --runner-listen and --saga-failover need --saga-identity" }))
      }
      if (clusterFlagGiven && !Database.isPostgresUrl(args.db)) {
        return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: "--runner-address, --runner-listen and --saga-failover need a Postgres --db: a hub on SQLite runs every saga itself" }))
      }
      // Loaded only for a hub with sagas, so a plain `mesh hub` does not load the workflow engine (the bin is chunked).
      const sagaHub = runner === undefined
        ? undefined
        : yield* Effect.gen(function* () {
          const [SagaHub, SagaEngine] = yield* Effect.promise(() => Promise.all([import("../saga/SagaHub.js"), import("../saga/SagaEngine.js")]))
          const cluster = Database.isPostgresUrl(args.db) ? yield* clusterOf(SagaEngine, clusterFlags) : undefined
          const hub = yield* SagaHub.start({ ...options, runner: { did: runner.did, privateKey: runner.privateKeyPkcs8B64 }, ...(cluster === undefined ? {} : { cluster }) })
          return { hub, cluster }
        })
      const hub = sagaHub === undefined ? yield* Hub.start(options) : sagaHub.hub
      if (Option.isSome(hub.admin)) {
        yield* Console.log(`admin credential (shown once, store it now; send as "Authorization: Bearer <key>"):\n${hub.admin.value.apiKey}\n`)
      }
      // The "database" line comes last: scripts wait for it.
      yield* Console.log(`agent-mesh hub ${VERSION} listening on ${hub.url}`)
      yield* Console.log(`  registry   ${hub.url}/v1/agents`)
      yield* Console.log(`  platform   ${hub.url}/api/status`)
      yield* Console.log(`  docs       ${hub.url}/docs  (OpenAPI: ${hub.url}/openapi.json)`)
      yield* Console.log(`  page       ${hub.url}/  (chat: ${hub.url}/chat/<didHash>)`)
      if (runner !== undefined) yield* Console.log(`  sagas      ${hub.url}/v1/sagas  (runner ${runner.did}: grant mandates to it)`)
      const cluster = sagaHub?.cluster
      if (runner !== undefined) {
        yield* Console.log(
          cluster === undefined
            ? "  runner     this hub runs every saga (SQLite: one runner)"
            : `  runner     one of a cluster on the database, reached at ${cluster.runnerAddress.host}:${cluster.runnerAddress.port}; a dead runner's sagas move after ${(cluster.failoverMs ?? 0) / 1000} s`
        )
      }
      if (hub.probeUrl !== undefined) yield* Console.log(`  probe      ${hub.probeUrl}/health`)
      yield* Console.log(`  database   ${Database.describe(args.db)}`)
      // After the line scripts wait for: the two commands a newcomer runs next (a note: on stderr).
      yield* note(
        `\nnext, in another shell:\n  mesh keygen echo && mesh keys create --hub ${hub.url} --admin-key <admin credential> --owner did:mesh:echo   # prints an API key\n` +
          `  mesh agent examples/echo-agent.ts --hub ${hub.url} --identity echo.identity.json --api-key <that key> --register`
      )
      // Added after the server's finalizers, so it prints first, when the graceful close begins.
      yield* Effect.addFinalizer(() => note(`hub stopping: requests in flight have up to ${shutdownSeconds} s to finish`))
      yield* Effect.logInfo("hub started")
      return yield* Effect.never
    })
  ).pipe(Effect.onInterrupt(() => note("hub stopped")))

/** The cluster settings of a hub's saga runner on Postgres, from its flags (docs/scaling.md §7). */
const clusterOf = (
  SagaEngine: typeof import("../saga/SagaEngine.js"),
  flags: { readonly address: string | undefined; readonly listen: string | undefined; readonly failoverSeconds: number | undefined }
) =>
  Effect.gen(function* () {
    const read = (flag: string, text: string) => {
      const address = SagaEngine.parseAddress(text)
      return address === undefined
        ? Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `${flag} ${JSON.stringify(text)} is not host:port` }))
        : Effect.succeed(address)
    }
    // The host's name is what other machines of a deployment usually reach it by; two hubs on one host need their own.
    const runnerAddress = yield* read("--runner-address", flags.address ?? `${NodeOs.hostname()}:${SagaEngine.DEFAULT_RUNNER_PORT}`)
    const listenAddress = flags.listen === undefined ? undefined : yield* read("--runner-listen", flags.listen)
    if (flags.failoverSeconds !== undefined && !(flags.failoverSeconds >= 3)) {
      return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: "--saga-failover is at least 3 seconds" }))
    }
    return {
      runnerAddress,
      ...(listenAddress === undefined ? {} : { listenAddress }),
      failoverMs: (flags.failoverSeconds ?? SagaEngine.DEFAULT_FAILOVER_MS / 1000) * 1000
    }
  })

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
  ).pipe(Effect.onInterrupt(() => note("platform stopped")))

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

/** A note for the person at the terminal, on stderr, so stdout carries only the result a script reads. */
export const note = (text: string) => Effect.sync(() => void process.stderr.write(`${text}\n`))

/** A command's result on stdout: one JSON document with `--json`, else its text. */
export const printResult = <A>(json: boolean, value: A, text: (a: A) => string) => Console.log(json ? JSON.stringify(value, null, 2) : text(value))

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

/** The identity of an identity file, with its private key imported. */
export const meshIdentityOf = (file: IdentityFile): Effect.Effect<MeshIdentity, MalformedKey, Keys> =>
  Effect.map(Effect.flatMap(Keys, (keys) => keys.importPrivateKey(file.privateKeyPkcs8B64)), (key) => identityFromKey(file.did as Did, key))

/**
 * The manifest `mesh agent --register` pins for an agent: its name and what its discovery document says about how to
 * call it. Built from the options alone, so an unchanged agent pins the same CID and its record is not rewritten.
 */
export const agentManifest = (options: AgentServer.AgentServerOptions): Readonly<Record<string, unknown>> => ({
  name: options.name,
  meshProtocolVersion: MESH_PROTOCOL_VERSION,
  capabilities: [...(options.capabilities ?? [])],
  auth: [options.auth ?? "none"],
  streaming: true,
  memory: options.memory ?? "none"
})

/** What `registerOrUpdate` did. */
export type RegistrationAction = "registered" | "updated" | "unchanged"

/**
 * Makes the hub's record of an agent say what is running: registers it when the hub has none (or only a tombstone),
 * updates it when the endpoint or manifest changed (signed by the identity's key), else only marks it live. The API key
 * must be the one that registered the record (or the admin's).
 */
export const registerOrUpdate = (
  client: MeshClient.MeshClientApi,
  input: { readonly identity: MeshIdentity; readonly endpointUrl: string; readonly manifest: unknown; readonly apiKey: string }
) =>
  Effect.gen(function* () {
    const h = didHash(input.identity.did)
    const existing = yield* client.resolveAgent(h).pipe(
      Effect.map(Option.some),
      Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeedNone)
    )
    if (Option.isNone(existing)) {
      const record = yield* client.registerAgent({ manifest: input.manifest, endpointUrl: input.endpointUrl, identity: input.identity, apiKey: input.apiKey })
      return { action: "registered" as RegistrationAction, record }
    }
    const { cid } = yield* client.pinManifest(input.manifest, input.apiKey)
    if (existing.value.endpointUrl === input.endpointUrl && existing.value.manifestCID === cid) {
      yield* client.heartbeat(h, input.apiKey)
      return { action: "unchanged" as RegistrationAction, record: existing.value }
    }
    const record = yield* client.updateAgent(h, { endpointUrl: input.endpointUrl, manifestCID: cid }, { identity: input.identity, apiKey: input.apiKey })
    return { action: "updated" as RegistrationAction, record }
  })

/**
 * Sends a heartbeat every `intervalMs` for as long as the scope lives. A failed beat is logged and the next one tried;
 * a record deleted meanwhile is registered again.
 */
export const keepAlive = (
  client: MeshClient.MeshClientApi,
  input: { readonly identity: MeshIdentity; readonly endpointUrl: string; readonly manifest: unknown; readonly apiKey: string; readonly intervalMs: number }
) => {
  const h = didHash(input.identity.did)
  const beat = client.heartbeat(h, input.apiKey).pipe(
    Effect.asVoid,
    Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.asVoid(registerOrUpdate(client, input))),
    Effect.catchAll((e) => Effect.logWarning(`heartbeat to the hub failed: ${e.code}: ${e.message}`))
  )
  return Effect.forkScoped(Effect.repeat(Effect.delay(beat, Duration.millis(input.intervalMs)), Schedule.forever))
}

/** `mesh agent --register`: the hub to register at, the API key that registered (or will register) the agent, how often to beat. */
export interface RegisterFlags {
  readonly register?: boolean
  readonly apiKey?: Option.Option<Redacted.Redacted<string>>
  /** Seconds between heartbeats; default `Registry.DEFAULT_HEARTBEAT_INTERVAL_MS`. */
  readonly heartbeatSeconds?: Option.Option<number>
}

/** The container flags of `mesh agent`: each overrides the module's option of the same meaning. */
export interface AgentServingFlags {
  readonly publicUrl?: Option.Option<string>
  readonly auth?: Option.Option<"none" | "bearer" | "mesh-sig">
  readonly bearerTokens?: ReadonlyArray<Redacted.Redacted<string>>
  readonly allowedCallers?: ReadonlyArray<string>
  readonly shutdownTimeoutSeconds?: Option.Option<number>
}

const some = <A>(o: Option.Option<A> | undefined): A | undefined => (o === undefined ? undefined : Option.getOrUndefined(o))

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
  /** Run even when another live agent uses the same SQLite file. */
  readonly sharedDb?: boolean
} & RegisterFlags & AgentServingFlags) =>
  Effect.scoped(
    Effect.gen(function* () {
      const loaded = yield* importAgentModule(args.module)
      const identity = Option.isNone(args.identity) ? undefined : yield* readIdentityFile(args.identity.value)
      const apiKey = some(args.apiKey)
      if (args.register === true) {
        const missing = [Option.isNone(args.hub) ? "--hub" : undefined, identity === undefined ? "--identity" : undefined, apiKey === undefined ? "--api-key" : undefined].filter((m) => m !== undefined)
        if (missing.length > 0) return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `--register needs ${missing.join(", ")}` }))
      }
      const publicUrl = some(args.publicUrl)
      if (publicUrl !== undefined) yield* checkHttpUrl(publicUrl)
      const auth = some(args.auth)
      const bearerTokens = (args.bearerTokens ?? []).map(Redacted.value)
      const shutdownMs = Option.match(args.shutdownTimeoutSeconds ?? Option.none(), {
        onNone: () => loaded.serving?.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_SECONDS * 1000,
        onSome: (seconds) => seconds * 1000
      })
      const options: AgentServer.AgentServerOptions = {
        ...loaded,
        ...(publicUrl === undefined ? {} : { publicUrl }),
        ...(auth === undefined ? {} : { auth }),
        ...(bearerTokens.length === 0 ? {} : { bearerTokens }),
        ...((args.allowedCallers ?? []).length === 0 ? {} : { allowedCallers: args.allowedCallers }),
        ...(Option.isSome(args.port) ? { port: args.port.value } : {}),
        ...(Option.isSome(args.host) ? { host: args.host.value } : {}),
        ...(Option.isSome(args.db) ? { database: args.db.value } : {}),
        ...(args.sharedDb === true ? { sharedDatabase: true } : {}),
        ...(Option.isSome(args.hub) ? { hubUrl: args.hub.value } : {}),
        ...(identity === undefined ? {} : { did: identity.did, privateKey: identity.privateKeyPkcs8B64 }),
        ...(args.provider !== undefined && Option.isSome(args.provider) ? { provider: args.provider.value } : {}),
        ...(args.model !== undefined && Option.isSome(args.model) ? { model: args.model.value } : {}),
        serving: { ...servingOf(args, loaded.serving), shutdownTimeoutMs: shutdownMs }
      }
      // Loaded only by `mesh agent`: the agent server, its router and its providers are not parsed by `mesh hub`.
      const AgentServerModule = yield* Effect.promise(() => import("../agent/AgentServer.js"))
      const agent = yield* AgentServerModule.make(options)
      yield* Console.log(`agent-mesh agent ${options.name} ${VERSION} listening on ${agent.url}`)
      yield* Console.log(`  did        ${agent.did}  (didHash ${agent.didHash})`)
      yield* Console.log(`  run        POST ${agent.url}/v1/run  (auth ${options.auth ?? "none"})`)
      yield* Console.log(`  database   ${Database.describe(AgentServerModule.databaseOf(options))}`)
      if (args.register === true && identity !== undefined && apiKey !== undefined && Option.isSome(args.hub)) {
        const client = yield* MeshClient.make({ hubUrl: args.hub.value, retry: { times: 2 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const registration = {
          identity: yield* meshIdentityOf(identity),
          endpointUrl: publicUrl ?? agent.url,
          manifest: agentManifest(options),
          apiKey: Redacted.value(apiKey),
          intervalMs: (some(args.heartbeatSeconds) ?? DEFAULT_HEARTBEAT_INTERVAL_MS / 1000) * 1000
        }
        const done = yield* registerOrUpdate(client, registration)
        yield* keepAlive(client, registration)
        yield* Console.log(`  registry   ${done.action} at ${args.hub.value}/v1/agents/${agent.didHash}  (heartbeat every ${registration.intervalMs / 1000} s)`)
      }
      // The "discovery" line comes last: scripts wait for it.
      yield* Console.log(`  discovery  ${agent.url}/.well-known/mesh-agent.json`)
      yield* Effect.addFinalizer(() => note(`agent stopping: requests and streamed runs in flight have up to ${shutdownMs / 1000} s to finish`))
      return yield* Effect.never
    })
  ).pipe(Effect.onInterrupt(() => note("agent stopped")))

/**
 * Serves the mesh as an MCP server until interrupted: over stdio, or over Streamable HTTP when `port` is given.
 * Everything it prints goes to stderr, logs included, since stdout is the MCP channel over stdio.
 */
export const runMcp = (args: {
  readonly hubUrl: string
  readonly identity: Option.Option<string>
  readonly port: Option.Option<number>
  readonly host: string
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const identity = Option.isNone(args.identity) ? undefined : yield* readIdentityFile(args.identity.value)
      // The HTTP transport authenticates no client, and with an identity every client calls as that DID.
      if (Option.isSome(args.port) && identity !== undefined && !["127.0.0.1", "::1", "localhost"].includes(args.host)) {
        return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `with --identity, mesh mcp --port listens on a loopback address only (not ${args.host}): its clients are not authenticated and would all sign as ${identity.did}` }))
      }
      const options = { hubUrl: args.hubUrl, ...(identity === undefined ? {} : { identity: { did: identity.did, privateKey: identity.privateKeyPkcs8B64 } }) }
      // Loaded only by `mesh mcp`: the MCP SDK's server is not parsed by the other commands.
      const Bridge = yield* Effect.promise(() => import("../mesh/MeshMcpServer.js"))
      const signer = identity === undefined ? "unsigned calls" : `calls signed as ${identity.did}`
      if (Option.isSome(args.port)) {
        const served = yield* Bridge.serveHttp({ ...options, port: args.port.value, host: args.host })
        yield* Console.error(`agent-mesh MCP server ${VERSION} on ${served.url} (Streamable HTTP; hub ${args.hubUrl}; ${signer})`)
      } else {
        const ended = yield* Bridge.serveStdio(options)
        yield* Console.error(`agent-mesh MCP server ${VERSION} on stdio (hub ${args.hubUrl}; ${signer})`)
        // The client closing stdin is the end of the session: exit rather than linger.
        return yield* ended
      }
      return yield* Effect.never
    }).pipe(Effect.provide(FetchHttpClient.layer))
  ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))))

// ---------------------------------------------------------------------------------------------------------------
// Calling agents, reading the registry, delegating authority

/** `mesh call`: what to send to which agent, and as whom. */
export interface CallArgs {
  readonly hubUrl: string
  /** The agent's didHash, or its base URL. */
  readonly target: string
  readonly message: string
  readonly identity: Option.Option<string>
  readonly session: Option.Option<string>
  readonly stream: boolean
  readonly mandate: Option.Option<string>
  readonly bearerToken?: Option.Option<Redacted.Redacted<string>>
  /** An API key of the caller's on the hub: with it, a paid call is booked in the hub's ledger. */
  readonly apiKey?: Option.Option<Redacted.Redacted<string>>
  /** Print the reply as one JSON document (`callJson`). */
  readonly json?: boolean
}

/**
 * A reply as `mesh call --json` and `mesh approve --json` print it: `status` `done` with the message, or
 * `approval_required` with what must be approved.
 */
export const callJson = (reply: { readonly message: string; readonly sessionId: string; readonly commitToken?: string | undefined } | { readonly status: "approval_required"; readonly sessionId: string; readonly approvalRequired: unknown }) =>
  "status" in reply
    ? { status: reply.status, sessionId: reply.sessionId, approvalRequired: reply.approvalRequired }
    : { status: "done" as const, message: reply.message, sessionId: reply.sessionId, commitToken: reply.commitToken ?? null }

// Notes beside a command's answer go to stderr, so that stdout holds the answer alone (`$(mesh mandate issue …)`).

/**
 * What `mesh call` prints when a run pauses at a human gate: the pause, then the `mesh approve` command that resumes
 * it (for the agent `target`, resolved on `hubUrl`).
 */
export const formatApproval = (
  a: { readonly sessionId: string; readonly approvalRequired: { readonly taskId: string; readonly capability: string; readonly grantor: string } },
  target?: { readonly agent: string; readonly hubUrl: string }
): string =>
  `paused at a human gate: ${a.approvalRequired.capability} needs the approval of ${a.approvalRequired.grantor} (task ${a.approvalRequired.taskId}, session ${a.sessionId})` +
  (target === undefined
    ? ""
    : `\napprove: mesh approve ${a.approvalRequired.taskId} --agent ${target.agent} --capability ${a.approvalRequired.capability}${/^https?:\/\//.test(target.agent) ? "" : ` --hub ${target.hubUrl}`} --identity <grantor>.identity.json [--deny]`)

/**
 * `mesh call <didHash> "message"`: resolves the agent on the hub, sends the message (signed with mesh-sig when given an
 * identity), prints the reply (streamed chunks as they arrive with `--stream`), and the session id on stderr.
 */
export const callAgent = (args: CallArgs) =>
  Effect.gen(function* () {
    const target = yield* callTargetOf(args.target)
    if (args.json === true && args.stream) {
      return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: "--json prints the whole reply once it is done; leave out --stream" }))
    }
    // Loaded only by `mesh call`.
    const [AgentClient, Ledger] = yield* Effect.promise(() => Promise.all([import("../agent/AgentClient.js"), import("./LedgerCommands.js")]))
    // Checked before anything is read or sent: an empty token (a failed `$(mesh mandate issue …)`) is not "no mandate".
    const mandate = Option.isSome(args.mandate) ? yield* Ledger.presentedMandate(args.mandate.value) : undefined
    const signAs = Option.isNone(args.identity) ? undefined : yield* readIdentityFile(args.identity.value)
    const paid = mandate === undefined ? undefined : yield* Ledger.preparePaidCall({
        hubUrl: args.hubUrl,
        mandate,
        identity: some(args.identity),
        apiKey: Option.getOrUndefined(Option.map(args.apiKey ?? Option.none(), Redacted.value))
      })
    const bearer = some(args.bearerToken)
    const options = {
      ...(signAs === undefined ? {} : { signAs: { did: signAs.did, privateKey: signAs.privateKeyPkcs8B64 } }),
      ...(Option.isSome(args.session) ? { sessionId: args.session.value } : {}),
      ...(mandate === undefined ? {} : { mandate: mandate.token }),
      ...(paid === undefined ? {} : { commit: paid.commit }),
      ...(bearer === undefined ? {} : { bearerToken: Redacted.value(bearer) })
    }
    const client = yield* AgentClient.make({ hubUrl: args.hubUrl })
    const settle = (commitToken: string | undefined) => (paid === undefined ? Effect.void : Ledger.settlePaidCall(paid, commitToken))
    const call = Effect.gen(function* () {
      if (!args.stream) {
        const result = yield* client.call(target, args.message, options)
        const json = args.json === true
        if ("status" in result) return yield* printResult(json, callJson(result), () => formatApproval(result, { agent: args.target, hubUrl: args.hubUrl }))
        yield* printResult(json, callJson(result), () => result.message)
        yield* note(`session ${result.sessionId}`)
        return yield* settle(result.commitToken)
      }
      yield* Stream.runForEach(client.stream(target, args.message, options), (e) => {
        switch (e.type) {
          case "chunk":
            return Effect.sync(() => void process.stdout.write(e.text))
          case "done":
            return Effect.zipRight(Effect.zipRight(Console.log(""), note(`session ${e.sessionId}`)), settle(e.commitToken))
          case "approval_required":
            return Console.log(`\n${formatApproval(e, { agent: args.target, hubUrl: args.hubUrl })}`)
        }
      })
    })
    return yield* call.pipe(
      Effect.mapError((e) => {
        if (e.code === "AGENT_NOT_FOUND" && !/^https?:\/\//i.test(target)) return agentNotFound(target, args.hubUrl)
        const hint = flagHint(e.code, signAs !== undefined, bearer !== undefined)
        return hint === undefined ? e : new AgentClient.AgentCallError({ code: e.code, message: hint })
      }),
      Effect.tapError(() => (paid === undefined ? Effect.void : Ledger.abandonPaidCall(paid)))
    )
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** What `mesh call` takes as its target: an http(s) URL as it is, else a didHash (`INVALID_ARGUMENT` otherwise). */
export const callTargetOf = (target: string): Effect.Effect<string, CliError> => {
  const t = target.trim()
  if (/^https?:\/\//i.test(t)) return Effect.succeed(t)
  if (DID_HASH_PATTERN.test(t.toLowerCase())) return Effect.succeed(t.toLowerCase())
  return Effect.fail(new CliError({
    code: "INVALID_ARGUMENT",
    message: t.length === 0
      ? "the didHash is empty: pass an agent's didHash (mesh agents ls) or its http(s) URL"
      : `${JSON.stringify(target)} is not a didHash (24 characters, a-z and 2-7; mesh agents ls lists them) nor an http(s) URL`
  }))
}

/**
 * What to say instead of a refusal that a flag of `mesh call` fixes, naming the flag: an agent that needs signed calls
 * and got none, or a bearer token and got none. Undefined for every other refusal.
 */
export const flagHint = (code: string, signed: boolean, bearer: boolean): string | undefined =>
  code === "SIGNATURE_MISSING" && !signed
    ? "this agent needs signed calls; pass --identity <file>"
    : code === "AUTH_REQUIRED" && !bearer && !signed
      ? "this agent needs a credential; pass --bearer-token <token> (or --identity <file> for a mesh-sig agent)"
      : undefined

/** One agent as a line of `mesh agents ls`. */
export const formatAgentLine = (a: { readonly didHash: string; readonly did: string; readonly live?: boolean | undefined; readonly endpointUrl?: string }): string =>
  `${a.didHash}  ${a.live === undefined ? "     " : a.live ? "live " : "stale"}  ${a.did}${a.endpointUrl === undefined || a.endpointUrl === "" ? "" : `  ${a.endpointUrl}`}`

const liveOf = (live: boolean, stale: boolean): boolean | undefined => (live === stale ? undefined : live)

/** `mesh agents ls`: the agents on the hub, live or stale, one per line (or JSON). */
export const listAgents = (args: { readonly hubUrl: string; readonly live: boolean; readonly stale: boolean; readonly limit: number; readonly json: boolean }) =>
  Effect.gen(function* () {
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    const live = liveOf(args.live, args.stale)
    const page = yield* client.listAgents({ limit: args.limit, ...(live === undefined ? {} : { live }) })
    if (args.json) return yield* Console.log(JSON.stringify(page, null, 2))
    // An empty list prints nothing on stdout, so `mesh agents ls | wc -l` counts agents; the note says why.
    if (page.items.length === 0) return yield* note(`no ${live === undefined ? "" : live ? "live " : "stale "}agents on ${args.hubUrl}`)
    for (const a of page.items) yield* Console.log(formatAgentLine(a))
    if (page.nextCursor !== null) yield* note(`(more: raise --limit, up to 200)`)
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** `mesh agents search <query>`: agents, MCP servers and skills matching every term. */
export const searchAgents = (args: { readonly hubUrl: string; readonly query: string; readonly live: boolean; readonly stale: boolean; readonly json: boolean }) =>
  Effect.gen(function* () {
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    const result = yield* client.search(args.query, undefined, liveOf(args.live, args.stale))
    if (args.json) return yield* Console.log(JSON.stringify(result, null, 2))
    if (result.items.length === 0) return yield* note(`nothing on ${args.hubUrl} matches ${JSON.stringify(args.query)}`)
    for (const hit of result.items) yield* Console.log(`${hit.kind.padEnd(5)}  ${formatAgentLine({ didHash: hit.didHash, did: hit.kind === "agent" ? hit.did : `${hit.name} (${hit.did})`, live: hit.live })}`)
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** A didHash argument in lower case, or `INVALID_ARGUMENT` saying what one looks like. */
export const didHashArg = (text: string): Effect.Effect<string, CliError> => {
  const t = text.trim().toLowerCase()
  return DID_HASH_PATTERN.test(t)
    ? Effect.succeed(t)
    : Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `${JSON.stringify(text)} is not a didHash (24 characters, a-z and 2-7; mesh agents ls lists them)` }))
}

/**
 * No agent under a didHash: `AGENT_NOT_FOUND`, the code `mesh call` fails with for one, whichever command asked (the
 * hub's own answer is a bare `NOT_FOUND`).
 */
export const agentNotFound = (didHash: string, hubUrl: string) =>
  new CliError({ code: "AGENT_NOT_FOUND", message: `no agent ${didHash} on ${hubUrl} (mesh agents ls lists them)` })

/** `mesh agents show <didHash>`: the agent's record, liveness and manifest, as JSON with or without `--json`. */
export const showAgent = (args: { readonly hubUrl: string; readonly didHash: string; readonly json?: boolean }) =>
  Effect.gen(function* () {
    const h = yield* didHashArg(args.didHash)
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    const record = yield* client.resolveAgent(h).pipe(Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.fail(agentNotFound(h, args.hubUrl))))
    // The record is the answer; a manifest that cannot be read only leaves its member null.
    const manifest = yield* Effect.either(client.manifest(record.manifestCID))
    const shown = { ...record, manifest: Either.getOrNull(manifest) }
    yield* printResult(true, shown, () => "")
    return shown
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** The kinds `mesh mandate issue` makes (roots) and `mesh mandate attenuate` makes (children). */
export const ROOT_KINDS = ["intent", "task", "model-budget"] as const
/** The kinds `mesh mandate attenuate` makes. */
export const CHILD_KINDS = ["cart", "payment", "task", "model-budget"] as const

/** Each kind's constraint members with their types, as `mesh mandate issue --help` and `attenuate --help` list them. */
export const CONSTRAINTS_HELP: { readonly [K in Mandate.MandateKind]: string } = {
  intent: "spendLimitUsd (USD, required), allowedMerchants (list of names; absent: any merchant)",
  cart: "spendLimitUsd (USD, required, at most the parent's), allowedMerchants (within the parent's)",
  payment: "amountUsd (USD, required, at most the parent's spendLimitUsd), merchant (name, required, allowed by the parent)",
  task: "allowed (capabilities, required), maxDelegationDepth (count, required), blocked, reversibleOnly, humanGates, actionLimits, computeLimit {llmTokens, webRequests}, dataAccess, sandbox",
  "model-budget": "token_budget, cost_budget_usd (USD), quality_threshold (0..1), task_type (REASONING, CODE, EXTRACTION, CREATIVE, CLASSIFICATION or SUMMARIZATION), expected_steps; all required"
}

/** The kind `mesh mandate issue --kind` names, or why it cannot issue it (cart and payment come from `attenuate`). */
export const rootKindOf = (kind: string): Either.Either<(typeof ROOT_KINDS)[number], CliError> => {
  const k = kind.trim().toLowerCase()
  if ((ROOT_KINDS as ReadonlyArray<string>).includes(k)) return Either.right(k as (typeof ROOT_KINDS)[number])
  const refuse = (message: string) => Either.left(new CliError({ code: "INVALID_ARGUMENT", message }))
  if (k === "cart" || k === "payment") {
    return refuse(`--kind ${k}: a ${k} mandate is cut from an intent mandate you hold: issue --kind intent, then \`mesh mandate attenuate <intent token> --kind ${k}\``)
  }
  return refuse(`--kind ${JSON.stringify(kind)} is not a kind mesh mandate issue makes: ${ROOT_KINDS.join(", ")} (cart and payment come from \`mesh mandate attenuate\` of an intent)`)
}

const constraintsOf = (text: string): Effect.Effect<Record<string, unknown>, CliError> => {
  const parsed = tryParseJsonStrict(text)
  return parsed.ok && typeof parsed.value === "object" && parsed.value !== null && !Array.isArray(parsed.value)
    ? Effect.succeed(parsed.value as Record<string, unknown>)
    : Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: "--constraints must be a JSON object, e.g. '{\"spendLimitUsd\":\"5.00\"}' (see --help for each kind's members)" }))
}

/** A mandate's chain as `--json` prints it, root first. */
export const chainJson = (m: Mandate.Mandate) =>
  Mandate.chainOf(m).map((link) => ({ kind: link.kind, grantor: link.grantor, grantee: link.grantee, expiry: link.expiry.toISOString(), jti: link.jti, constraints: link.constraints }))

/** What `mesh mandate issue` and `attenuate` print: the token alone, or with `--json` the token and its chain. */
const printMandate = (mandate: Mandate.Mandate, json: boolean) =>
  Effect.zipRight(printResult(json, { token: mandate.token, chain: chainJson(mandate) }, (m) => m.token), note(formatMandate(mandate)))

/** A mandate as `mesh mandate` describes it: one line per link, root first. */
export const formatMandate = (m: Mandate.Mandate): string =>
  Mandate.chainOf(m)
    .map((link, i) => `${i === 0 ? "root " : "  └─ "}${link.kind} ${link.grantor} → ${link.grantee}, expires ${link.expiry.toISOString()}, jti ${link.jti}, constraints ${JSON.stringify(link.constraints)}`)
    .join("\n")

/**
 * `mesh mandate issue`: a root mandate from the identity's DID to `--to`, printed as its token (stdout) and described
 * (stderr), so `$(mesh mandate issue …)` captures the token alone.
 */
export const issueMandate = (args: {
  readonly identity: string
  readonly to: string
  readonly kind: string
  readonly constraints: string
  readonly ttlSeconds: Option.Option<number>
  readonly keyVersion: Option.Option<number>
  readonly json?: boolean
}) =>
  Effect.gen(function* () {
    const kind = yield* rootKindOf(args.kind)
    const grantor = yield* readIdentityFile(args.identity)
    const constraints = yield* constraintsOf(args.constraints)
    const base = {
      grantorDid: grantor.did,
      granteeDid: args.to,
      privateKey: grantor.privateKeyPkcs8B64,
      ...(Option.isSome(args.ttlSeconds) ? { ttlSeconds: args.ttlSeconds.value } : {}),
      ...(Option.isSome(args.keyVersion) ? { keyVersion: args.keyVersion.value } : {})
    }
    // The constraints' members are checked by the issuer (INVALID_CONSTRAINTS), not here.
    const mandate: Mandate.Mandate =
      kind === "intent"
        ? yield* Mandate.issueIntentMandate({ ...base, constraints: constraints as never })
        : kind === "task"
          ? yield* Mandate.issueTaskMandate({ ...base, constraints: constraints as never })
          : yield* Mandate.issueModelBudgetMandate({ ...base, constraints: constraints as never })
    yield* printMandate(mandate, args.json === true)
    return mandate
  })

// attenuateToPayment takes the two members by name, so anything else given would be dropped unseen: refused here.
const paymentProblem = (constraints: Record<string, unknown>): Effect.Effect<void, Mandate.MandateIssueError> => {
  const problem = constraintsProblem("payment", withCanonicalUsd("payment", constraints))
  return problem === undefined ? Effect.void : Effect.fail(new Mandate.MandateIssueError({ code: "INVALID_CONSTRAINTS", message: problem }))
}

/** `mesh mandate attenuate <token>`: a child of the token, granted by its grantee (the identity) to `--to`, within its constraints. */
export const attenuateMandate = (args: {
  readonly parent: string
  readonly identity: string
  readonly to: string
  readonly kind: (typeof CHILD_KINDS)[number]
  readonly constraints: string
  readonly ttlSeconds: Option.Option<number>
  readonly keyVersion: Option.Option<number>
  readonly json?: boolean
}) =>
  Effect.gen(function* () {
    const grantor = yield* readIdentityFile(args.identity)
    const constraints = yield* constraintsOf(args.constraints)
    const base = {
      parent: args.parent.trim(),
      granteeDid: args.to,
      grantorPrivateKey: grantor.privateKeyPkcs8B64,
      // Refused at once when the identity is not the parent's grantee, rather than signing a link no verifier accepts.
      grantorDid: grantor.did,
      ...(Option.isSome(args.ttlSeconds) ? { ttlSeconds: args.ttlSeconds.value } : {}),
      ...(Option.isSome(args.keyVersion) ? { keyVersion: args.keyVersion.value } : {})
    }
    const mandate: Mandate.Mandate =
      args.kind === "cart"
        ? yield* Mandate.attenuateToCart({ ...base, narrowed: constraints as never })
        : args.kind === "payment"
          ? yield* Effect.zipRight(
            paymentProblem(constraints),
            Mandate.attenuateToPayment({ ...base, amountUsd: constraints.amountUsd as Mandate.UsdInput, merchant: constraints.merchant as string })
          )
          : args.kind === "task"
            ? yield* Mandate.attenuateTaskMandate({ ...base, constraints: constraints as never })
            : yield* Mandate.attenuateModelBudgetMandate({ ...base, constraints: constraints as never })
    yield* printMandate(mandate, args.json === true)
    return mandate
  })

/**
 * `mesh mandate verify <token>`: the whole chain against the hub's registry (keys, key versions, revocations), the
 * time, and optionally the grantee and kind; prints the chain, or fails with MANDATE_INVALID and its reason.
 */
export const verifyMandateToken = (args: {
  readonly hubUrl: string
  readonly token: string
  readonly grantee: Option.Option<string>
  readonly kind: Option.Option<Mandate.MandateKind>
  readonly json?: boolean
}) =>
  Effect.gen(function* () {
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    const mandate = yield* Mandate.verifyMandate(args.token.trim(), client.keyResolver, {
      ...(Option.isSome(args.grantee) ? { expectedGrantee: args.grantee.value } : {}),
      ...(Option.isSome(args.kind) ? { kinds: [args.kind.value] } : {})
    }).pipe(Effect.mapError((e) => new CliError({ code: "MANDATE_INVALID", message: `${e.reason}: ${e.message}` })))
    yield* printResult(args.json === true, { valid: true, hub: args.hubUrl, token: mandate.token, chain: chainJson(mandate) }, () => `valid (checked against ${args.hubUrl})\n${formatMandate(mandate)}`)
    return mandate
  }).pipe(Effect.provide(FetchHttpClient.layer))

// ---------------------------------------------------------------------------------------------------------------
// Settings file

/** The settings file `mesh` reads from the working directory unless MESH_CONFIG names another. */
export const CONFIG_FILE = "mesh.json"

/**
 * The settings of a `mesh.json` as a map from environment-variable names to values: the file's keys are those names
 * (docs/operations.md), its values strings, numbers, booleans, or arrays of them for repeatable flags. A key not in
 * `known` is refused, so a misspelt setting is not silently ignored.
 */
export const parseConfigFile = (text: string, file: string, known: ReadonlySet<string>): Either.Either<ReadonlyMap<string, string>, CliError> => {
  const refuse = (message: string) => Either.left(new CliError({ code: "CONFIG_INVALID", message: `${file}: ${message}` }))
  const parsed = tryParseJsonStrict(text)
  if (!parsed.ok) return refuse(parsed.error.message)
  const value = parsed.value
  if (typeof value !== "object" || value === null || Array.isArray(value)) return refuse("must be a JSON object of settings")
  const out = new Map<string, string>()
  const scalar = (v: unknown) => typeof v === "string" || typeof v === "number" || typeof v === "boolean"
  for (const [key, v] of Object.entries(value)) {
    if (!known.has(key)) return refuse(`unknown setting ${JSON.stringify(key)} (the keys are the MESH_* environment variables of docs/operations.md)`)
    if (scalar(v)) out.set(key, String(v))
    else if (Array.isArray(v) && v.every(scalar)) out.set(key, v.map(String).join(","))
    else return refuse(`${key} must be a string, number, boolean or an array of them`)
  }
  return Either.right(out)
}

/**
 * The settings `mesh` reads besides its flags: the environment, then the settings file (MESH_CONFIG, else ./mesh.json
 * when it exists), so flags > environment > file > defaults.
 */
export const loadSettings = (known: ReadonlySet<string>): Effect.Effect<ConfigProvider.ConfigProvider, CliError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const env = ConfigProvider.fromEnv()
    const named = process.env.MESH_CONFIG
    const file = named === undefined || named === "" ? CONFIG_FILE : named
    const text = yield* fs.readFileString(file).pipe(
      Effect.map(Option.some),
      Effect.catchAll((e) =>
        named === undefined && e._tag === "SystemError" && e.reason === "NotFound"
          ? Effect.succeedNone
          : Effect.fail(new CliError({ code: "CONFIG_INVALID", message: `cannot read settings file ${file}: ${e.message}` }))
      )
    )
    if (Option.isNone(text)) return env
    const map = yield* parseConfigFile(text.value, file, known)
    return ConfigProvider.orElse(env, () => ConfigProvider.fromMap(map as Map<string, string>))
  })
