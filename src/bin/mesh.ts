#!/usr/bin/env node
/**
 * The `mesh` command. Bundled into dist/bin/mesh.js so it starts without resolving hundreds of modules.
 *
 * Floor: bin, the top (docs/architecture.md §3).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Config from "effect/Config"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { createKey, DEFAULT_DATABASE, keygen, runAgent, runHub, runPlatform, runSagaFile, sagaStatus } from "../cli/Cli.js"
import * as KeysNative from "../node/KeysNative.js"
import * as Observability from "../cli/Observability.js"
import { VERSION } from "../core/Version.js"

const name = Args.text({ name: "name" }).pipe(Args.withDescription("the identity's name: did:mesh:[<namespace>.]<name>"))
const namespace = Options.text("namespace").pipe(Options.optional, Options.withDescription("namespace of the DID"))
const endpoint = Options.text("endpoint").pipe(Options.optional, Options.withDescription("base URL, written as the DID document's service endpoint"))
const out = Options.file("out").pipe(Options.optional, Options.withDescription("identity file to write (default ./<name>.identity.json)"))
const force = Options.boolean("force").pipe(Options.withDescription("overwrite an existing identity file"))

const keygenCommand = Command.make("keygen", { name, namespace, endpoint, out, force }, (args) =>
  Effect.flatMap(keygen(args), (written) =>
    Console.log(`wrote ${written.path}\n  did      ${written.did}\n  didHash  ${written.didHash}\n  key      ${written.publicKeyB64}`)
  )
).pipe(Command.withDescription("create an Ed25519 identity and write it to a file (mode 0600)"))

const port = Options.integer("port").pipe(Options.withFallbackConfig(Config.integer("MESH_PORT")), Options.withDefault(7700), Options.withDescription("port to listen on (env MESH_PORT)"))
const host = Options.text("host").pipe(Options.withFallbackConfig(Config.string("MESH_HOST")), Options.withDefault("127.0.0.1"), Options.withDescription("address to listen on (env MESH_HOST)"))
const db = Options.text("db").pipe(Options.withFallbackConfig(Config.string("MESH_DB")), Options.withDefault(DEFAULT_DATABASE), Options.withDescription("SQLite file (env MESH_DB)"))
const logLevel = Options.choice("log-level", ["debug", "info", "warning", "error"]).pipe(Options.withDefault("info" as const), Options.withDescription("least severe log level printed"))
const logLevels = { debug: "Debug", info: "Info", warning: "Warning", error: "Error" } as const
/** Prints only log lines at `--log-level` or more severe. */
const withLogLevel = (level: keyof typeof logLevels) => Logger.withMinimumLogLevel(LogLevel.fromLiteral(logLevels[level]))
const logFormat = Options.choice("log-format", Observability.LOG_FORMATS).pipe(
  Options.withFallbackConfig(Config.literal(...Observability.LOG_FORMATS)("MESH_LOG_FORMAT")),
  Options.withDefault("pretty" as const),
  Options.withDescription("log lines as pretty (default), json or logfmt (env MESH_LOG_FORMAT); OTEL_* variables turn tracing on (docs/operations.md)")
)

const allowedHosts = Options.text("allowed-host").pipe(Options.repeated, Options.withDescription("a DNS name (name or name:port) clients may use in Host besides localhost and IP addresses; * for any (repeatable)"))
const allowedOrigins = Options.text("allowed-origin").pipe(Options.repeated, Options.withDescription("a browser origin (scheme://host[:port]) allowed cross-origin requests; * for any (repeatable)"))

const publicUrl = Options.text("public-url").pipe(
  Options.withFallbackConfig(Config.string("MESH_PUBLIC_URL")),
  Options.optional,
  Options.withDescription("the URL clients reach the hub at (env MESH_PUBLIC_URL): signed ledger requests name it, and its host is allowed in Host")
)
const probePort = Options.integer("probe-port").pipe(
  Options.optional,
  Options.withDescription("a second port answering only /health, whose accept queue a flood of the main port does not fill")
)
const newAdminKey = Options.boolean("new-admin-key").pipe(Options.withDescription("issue a new admin credential on this start (after the old one was revoked or lost)"))

const sagaIdentity = Options.file("saga-identity").pipe(
  Options.optional,
  Options.withDescription("identity file (`mesh keygen`) of the saga runner: with it the hub also runs sagas (/v1/sagas) as this DID")
)

const hubCommand = Command.make("hub", { port, host, db, publicUrl, newAdminKey, probePort, sagaIdentity, allowedHosts, allowedOrigins, logLevel, logFormat }, (args) =>
  runHub(args).pipe(withLogLevel(args.logLevel), Effect.provide(Observability.layer("mesh-hub", args.logFormat)))
).pipe(Command.withDescription("run a hub: registry, spending ledger and platform API on a SQLite file; stops cleanly on SIGINT/SIGTERM"))

const registryUrl = Options.text("registry").pipe(Options.withFallbackConfig(Config.string("MESH_REGISTRY")), Options.withDescription("the registry hub's URL (env MESH_REGISTRY)"))
const registryKey = Options.redacted("registry-key").pipe(Options.withFallbackConfig(Config.redacted("MESH_REGISTRY_KEY")), Options.withDescription("that hub's admin credential (env MESH_REGISTRY_KEY)"))
const platformPort = Options.integer("port").pipe(Options.withFallbackConfig(Config.integer("MESH_PORT")), Options.withDefault(7701), Options.withDescription("port to listen on (env MESH_PORT)"))

const platformCommand = Command.make("platform", { registryUrl, registryKey, port: platformPort, host, allowedHosts, allowedOrigins }, (args) => runPlatform(args)).pipe(
  Command.withDescription("run the platform API apart from the registry, reaching it over HTTP")
)

const hubUrl = Options.text("hub").pipe(Options.withFallbackConfig(Config.string("MESH_HUB")), Options.withDefault("http://127.0.0.1:7700"), Options.withDescription("hub URL (env MESH_HUB)"))
const adminKey = Options.redacted("admin-key").pipe(Options.withFallbackConfig(Config.redacted("MESH_ADMIN_KEY")), Options.withDescription("the admin credential (env MESH_ADMIN_KEY)"))
const owner = Options.text("owner").pipe(Options.withDescription("who the key is for: a name, or an agent's DID"))
const label = Options.text("label").pipe(Options.optional, Options.withDescription("a note to recognize the key by"))

const keysCreate = Command.make("create", { hubUrl, adminKey, owner, label }, (args) =>
  Effect.flatMap(createKey(args), (k) => Console.log(`created API key ${k.id} for ${k.owner} (${k.kind})\n${k.apiKey}\n(shown once: store it now)`))
).pipe(Command.withDescription("create an API key on a hub with the admin credential"))

const agentModule = Args.file({ name: "module", exists: "yes" }).pipe(Args.withDescription("a module whose default export is the agent's options ({ name, handler, … }) or a function returning them"))
const agentPort = Options.integer("port").pipe(Options.withFallbackConfig(Config.integer("MESH_PORT")), Options.optional, Options.withDescription("port to listen on (env MESH_PORT; default the module's, else any free port)"))
const agentHost = Options.text("host").pipe(Options.withFallbackConfig(Config.string("MESH_HOST")), Options.optional, Options.withDescription("address to listen on (env MESH_HOST; default 127.0.0.1)"))
const agentDb = Options.text("db").pipe(Options.withFallbackConfig(Config.string("MESH_DB")), Options.optional, Options.withDescription("SQLite file for paused tasks, nonces and memory (env MESH_DB; default .mesh/agents/<name>.db)"))
const agentHub = Options.text("hub").pipe(Options.withFallbackConfig(Config.string("MESH_HUB")), Options.optional, Options.withDescription("hub whose registry resolves callers' and grantors' keys (env MESH_HUB)"))
const agentProvider = Options.choice("provider", ["anthropic", "openai"]).pipe(Options.withFallbackConfig(Config.literal("anthropic", "openai")("MESH_PROVIDER")), Options.optional, Options.withDescription("model provider of an LLM chat agent (env MESH_PROVIDER): anthropic (ANTHROPIC_API_KEY) or openai (OPENAI_API_KEY, OPENAI_BASE_URL); overrides the module's"))
const agentModel = Options.text("model").pipe(Options.withFallbackConfig(Config.string("MESH_MODEL")), Options.optional, Options.withDescription("model of an LLM chat agent (env MESH_MODEL); overrides the module's"))
const agentIdentity = Options.file("identity").pipe(Options.optional, Options.withDescription("identity file from `mesh keygen`: the agent's DID and key"))

const agentCommand = Command.make("agent", { module: agentModule, port: agentPort, host: agentHost, db: agentDb, hub: agentHub, identity: agentIdentity, provider: agentProvider, model: agentModel, allowedHosts, allowedOrigins, logLevel, logFormat }, (args) =>
  runAgent(args).pipe(withLogLevel(args.logLevel), Effect.provide(Observability.layer("mesh-agent", args.logFormat)))
).pipe(Command.withDescription("run the agent a module exports (POST /v1/run, /v1/resume, /health, /.well-known/mesh-agent.json)"))

const sagaFile = Args.file({ name: "file", exists: "yes" }).pipe(Args.withDescription("the saga as JSON: { mandate, steps: [{ name, agentDid | didHash, capability, params, budgetUsd, compensation }] }"))
const sagaRun = Command.make("run", { hubUrl, file: sagaFile }, (args) => runSagaFile(args)).pipe(
  Command.withDescription("start a saga on the hub, print its progress, then its end")
)
const sagaId = Args.text({ name: "id" }).pipe(Args.withDescription("the saga's id"))
const sagaStatusCommand = Command.make("status", { hubUrl, sagaId }, (args) => sagaStatus({ hubUrl: args.hubUrl, sagaId: args.sagaId })).pipe(
  Command.withDescription("print a saga's state")
)
const sagaCommand = Command.make("saga").pipe(Command.withDescription("run sagas on a hub"), Command.withSubcommands([sagaRun, sagaStatusCommand]))

const keysCommand = Command.make("keys").pipe(Command.withDescription("manage API keys"), Command.withSubcommands([keysCreate]))

const mesh = Command.make("mesh").pipe(
  Command.withDescription("agent-mesh: identities, signed envelopes and mandates for meshes of AI agents"),
  Command.withSubcommands([keygenCommand, hubCommand, platformCommand, agentCommand, keysCommand, sagaCommand])
)

const cli = Command.run(mesh, { name: "mesh", version: VERSION })

/** Our typed errors print as one line with their code; anything else is a defect and keeps its trace. */
const report = (e: { readonly code: string; readonly message: string }) =>
  Effect.zipRight(Console.error(`mesh: ${e.code}: ${e.message}`), Effect.sync(() => {
    process.exitCode = 1
  }))

cli(process.argv).pipe(
  Effect.catchTags({
    CliError: report,
    InvalidDid: report,
    DatabaseError: report,
    ServeError: (e) => report({ code: "LISTEN_FAILED", message: e.message }),
    AgentConfigError: report,
    MalformedKey: report,
    RegistryUnreachable: report,
    Unauthorized: report,
    Forbidden: report,
    Unavailable: report
  }),
  Effect.provide(Layer.merge(NodeContext.layer, KeysNative.layer)),
  NodeRuntime.runMain
)
