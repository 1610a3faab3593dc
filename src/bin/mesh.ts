#!/usr/bin/env node
/**
 * The `mesh` command. Bundled into dist/bin/mesh.js so it starts without resolving hundreds of modules.
 *
 * Every setting a flag takes may also come from its environment variable, named per command (`MESH_HUB_PORT`,
 * `MESH_AGENT_PORT`, …) so a hub and an agent started from one shell do not collide, or from the same key in a
 * `mesh.json`; flags > environment > file > defaults (docs/operations.md).
 *
 * Floor: bin, the top (docs/architecture.md §3).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as Redacted from "effect/Redacted"
import {
  attenuateMandate,
  callAgent,
  CHILD_KINDS,
  CliError,
  CONSTRAINTS_HELP,
  createKey,
  DEFAULT_DATABASE,
  printResult,
  issueMandate,
  keygen,
  listAgents,
  loadSettings,
  note,
  ROOT_KINDS,
  runAgent,
  runHub,
  runMcp,
  runPlatform,
  searchAgents,
  showAgent,
  verifyMandateToken
} from "../cli/Cli.js"
import * as Ledger from "../cli/LedgerCommands.js"
import * as Sagas from "../cli/SagaCommands.js"
import * as KeysNative from "../node/KeysNative.js"
import * as Observability from "../cli/Observability.js"
import { VERSION } from "../core/Version.js"
import { requireCsprng } from "../core/Entropy.js"
import { MANDATE_KINDS, type MandateKind } from "../core/Constraints.js"
import { withOutput } from "./Output.js"
import { registerCaller, removeAgent, whoami } from "../cli/IdentityCommands.js"
import { approveTask } from "../cli/Approve.js"

/** Every environment variable a setting may come from; they are also the keys `mesh.json` accepts. */
const settingNames = new Set<string>(["MESH_CONFIG"])
/**
 * A setting's fallback: its namespaced variable, then (when given) the older shared name it replaces. The namespaced
 * name is also its key in mesh.json; the old names are read from the environment only, after the file.
 */
const setting = <A>(read: (name: string) => Config.Config<A>, name: string, legacy?: string): Config.Config<A> => {
  settingNames.add(name)
  return legacy === undefined ? read(name) : Config.orElse(read(name), () => read(legacy))
}
/** A description with an example line, as `--help` shows it. */
const described = (text: string, example: string) => Command.withDescription(`${text}\n\nexample: ${example}`)
/** `--json`: the command's result as one JSON document on stdout, and nothing else there (notes stay on stderr). */
const jsonFlag = Options.boolean("json").pipe(Options.withDescription("print the result as one JSON document on stdout (notes stay on stderr)"))

const name = Args.text({ name: "name" }).pipe(Args.withDescription("the identity's name: did:mesh:[<namespace>.]<name>"))
const namespace = Options.text("namespace").pipe(Options.optional, Options.withDescription("namespace of the DID"))
const endpoint = Options.text("endpoint").pipe(Options.optional, Options.withDescription("base URL, written as the DID document's service endpoint"))
const out = Options.file("out").pipe(Options.optional, Options.withDescription("identity file to write (default ./<name>.identity.json)"))
const force = Options.boolean("force").pipe(Options.withDescription("overwrite an existing identity file"))

const keygenCommand = Command.make("keygen", { name, namespace, endpoint, out, force, json: jsonFlag }, (args) =>
  Effect.flatMap(keygen(args), (written) =>
    // The private key stays in the file: the JSON names the file and the public half only.
    printResult(
      args.json,
      { path: written.path, did: written.did, didHash: written.didHash, publicKeyB64: written.publicKeyB64, didKey: written.didKey },
      (w) => `wrote ${w.path}\n  did      ${w.did}\n  didHash  ${w.didHash}\n  key      ${w.publicKeyB64}`
    )
  )
).pipe(described("create an Ed25519 identity and write it to a file (mode 0600)", "mesh keygen alice --namespace acme --endpoint https://alice.example"))

/** A value refused while the flags and settings are read: a usage error that names its code. */
const refusedValue = (text: string) => ValidationError.invalidValue(HelpDoc.p(`INVALID_ARGUMENT: ${text}`))

/**
 * The first of `names` set in the environment or mesh.json, with the name it came from, so a refusal names the
 * variable rather than a flag that was not given. Only the first name is a mesh.json key; the others are older names.
 */
const settingOf = (names: ReadonlyArray<string>): Effect.Effect<Option.Option<{ readonly name: string; readonly value: string }>> =>
  Effect.reduce(names, Option.none<{ readonly name: string; readonly value: string }>(), (found, name) =>
    Option.isSome(found)
      ? Effect.succeed(found)
      : Effect.map(Effect.orElseSucceed(Config.option(Config.string(name)), () => Option.none<string>()), Option.map((value) => ({ name, value })))
  )

/**
 * A flag checked by `check` whether it was given on the command line or read from its setting (`names`, the first
 * set): either way a bad value is refused on one line naming where it came from. None when neither gave one.
 */
const checkedOf = <A>(
  flag: Options.Options<Option.Option<A>>,
  names: ReadonlyArray<string>,
  parse: (text: string, from: string) => Effect.Effect<A, ValidationError.ValidationError>,
  check: (a: A, from: string) => Effect.Effect<A, ValidationError.ValidationError>,
  flagName: string
) => {
  // Registered now, before mesh.json is read: only a known name is accepted there.
  if (names[0] !== undefined) settingNames.add(names[0])
  return flag.pipe(
    Options.mapEffect(Option.match({
      onSome: (a) => Effect.map(check(a, `--${flagName}`), Option.some),
      onNone: () =>
        Effect.flatMap(settingOf(names), Option.match({
          onNone: () => Effect.succeedNone,
          onSome: ({ name, value }) => Effect.map(Effect.flatMap(parse(value.trim(), name), (a) => check(a, name)), Option.some)
        }))
    }))
  )
}

const PORT_RANGE = "a port from 0 to 65535 (0: any free port)"
/** A TCP port flag and its settings, refused on one line when out of range rather than failing later in listen(). */
const portOf = (flag: string, ...names: ReadonlyArray<string>) =>
  checkedOf(
    Options.integer(flag).pipe(Options.optional),
    names,
    (text, from) => (/^\d{1,10}$/.test(text) ? Effect.succeed(Number(text)) : Effect.fail(refusedValue(`${from} must be ${PORT_RANGE}, not ${JSON.stringify(text)}`))),
    (n, from) => (Number.isInteger(n) && n >= 0 && n <= 65535 ? Effect.succeed(n) : Effect.fail(refusedValue(`${from} must be ${PORT_RANGE}, not ${n}`))),
    flag
  )

/** An http(s) URL flag (a hub's) and its settings: a URL without its scheme is refused on one line. */
const urlOf = (flag: string, ...names: ReadonlyArray<string>) =>
  checkedOf(
    Options.text(flag).pipe(Options.optional),
    names,
    (text) => Effect.succeed(text),
    (text, from) =>
      !/^https?:\/\//i.test(text.trim())
        ? Effect.fail(refusedValue(`${from} ${JSON.stringify(text)} must start with http:// or https://`))
        : URL.canParse(text.trim())
          ? Effect.succeed(text.trim())
          : Effect.fail(refusedValue(`${from} ${JSON.stringify(text)} is not a URL`)),
    flag
  )

/** A setting that has a default: the flag, else the setting, else `fallback`. */
const orDefault = <A>(fallback: A) => Options.map((o: Option.Option<A>) => Option.getOrElse(o, () => fallback))

const port = portOf("port", "MESH_HUB_PORT", "MESH_PORT").pipe(orDefault(7700), Options.withDescription("port to listen on (env MESH_HUB_PORT; default 7700)"))
const host = Options.text("host").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_HUB_HOST", "MESH_HOST")), Options.withDefault("127.0.0.1"), Options.withDescription("address to listen on (env MESH_HUB_HOST)"))
/** After a command's own variable: MESH_DATABASE_URL, then MESH_DB (the older name). */
const databaseUrlConfig = Config.string("MESH_DATABASE_URL").pipe(Config.orElse(() => Config.string("MESH_DB")))
const db = Options.text("db").pipe(
  Options.withFallbackConfig(Config.orElse(setting(Config.string, "MESH_HUB_DB"), () => databaseUrlConfig)),
  Options.withDefault(DEFAULT_DATABASE),
  Options.withDescription("SQLite file, or postgres:// URL shared by several hubs (env MESH_HUB_DB, else MESH_DATABASE_URL)")
)
/**
 * The log level: `--log-level` (one flag for every command, applied around the whole command), else the command's
 * variable (`MESH_HUB_LOG_LEVEL`, …, or mesh.json), else info. `main` takes the flag out of the arguments itself: the
 * parser's own `--log-level` is found or missed depending on the flags before it (`mesh hub --db x --log-level …` went
 * unseen), so the parser never sees it.
 */
const logLevelNames = { all: "All", trace: "Trace", debug: "Debug", info: "Info", warning: "Warning", error: "Error", fatal: "Fatal", none: "None" } as const
type LogLevelName = keyof typeof logLevelNames
const isLogLevelName = (s: string | undefined): s is LogLevelName => s !== undefined && Object.hasOwn(logLevelNames, s)
/** The level `--log-level` gave this run, if it did. */
const logLevelFlag = FiberRef.unsafeMake<Option.Option<LogLevelName>>(Option.none())

/** `--log-level <level>` (or `--log-level=<level>`) taken out of the arguments (before any `--`), or what is wrong with it. */
export const takeLogLevel = (
  args: ReadonlyArray<string>
): Either.Either<{ readonly args: ReadonlyArray<string>; readonly level: Option.Option<LogLevelName> }, string> => {
  const rest: Array<string> = []
  let level: Option.Option<LogLevelName> = Option.none()
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === "--") {
      rest.push(...args.slice(i))
      break
    }
    if (a !== "--log-level" && !a.startsWith("--log-level=")) {
      rest.push(a)
      continue
    }
    const value = a === "--log-level" ? args[++i] : a.slice("--log-level=".length)
    if (!isLogLevelName(value)) return Either.left(`--log-level takes one of ${Object.keys(logLevelNames).join(", ")}${value === undefined ? "" : `, not ${JSON.stringify(value)}`}`)
    level = Option.some(value)
  }
  return Either.right({ args: rest, level })
}

/** Runs `effect` at the command's log level from `env` unless `--log-level` was given. */
const withLogLevelOf = (env: string) => {
  const level = setting((n) => Config.literal(...(Object.keys(logLevelNames) as Array<LogLevelName>))(n), env)
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | CliError, R> =>
    Effect.flatMap(FiberRef.get(logLevelFlag), (flag) =>
      Option.isSome(flag)
        ? effect
        : Effect.flatMap(Effect.mapError(Config.option(level), (e) => new CliError({ code: "CONFIG_INVALID", message: `${env}: ${ConfigError.isConfigError(e) ? String(e) : "invalid"}` })), (chosen) =>
          Option.isSome(chosen) ? Logger.withMinimumLogLevel(effect, LogLevel.fromLiteral(logLevelNames[chosen.value])) : effect
        ))
}
const logFormatOf = (env: string) =>
  Options.choice("log-format", Observability.LOG_FORMATS).pipe(
    Options.withFallbackConfig(setting(Config.literal(...Observability.LOG_FORMATS), env, "MESH_LOG_FORMAT")),
    Options.withDefault("pretty" as const),
    Options.withDescription(`log lines as pretty (default), json or logfmt (env ${env}); OTEL_* variables turn tracing on (docs/operations.md)`)
  )

/**
 * A secret flag given at most once (else from its setting): read as text and redacted here, since the parser validates
 * a repeated redacted value twice; a second value is refused rather than silently dropped.
 */
const secretOf = (flag: string, fallback: Config.Config<Redacted.Redacted>) =>
  Options.text(flag).pipe(
    Options.withPseudoName("secret"),
    Options.repeated,
    Options.mapEffect((given) =>
      given.length > 1
        ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${flag} is given ${given.length} times: give it once`)))
        : given.length === 1
          ? Effect.succeed(Option.some(Redacted.make(given[0]!)))
          : Effect.option(fallback)
    )
  )
/** A secret flag the command cannot do without. */
const requiredSecretOf = (flag: string, fallback: Config.Config<Redacted.Redacted>) =>
  secretOf(flag, fallback).pipe(
    Options.mapEffect(Option.match({
      onNone: () => Effect.fail(ValidationError.missingValue(HelpDoc.p(`Expected to find option: '--${flag}'`))),
      onSome: Effect.succeed
    }))
  )

// Repeatable flags: the flags when given, else the variable's comma-separated list.
const listOf = (flag: string, env: string, description: string) =>
  Options.text(flag).pipe(
    Options.repeated,
    Options.mapEffect((given) =>
      given.length > 0 ? Effect.succeed(given) : Effect.orElseSucceed(setting((n) => Config.array(Config.string(), n), env), (): ReadonlyArray<string> => [])
    ),
    Options.withDescription(`${description} (repeatable; env ${env}, comma-separated)`)
  )
const allowedHostsOf = (env: string) => listOf("allowed-host", env, "a DNS name (name or name:port) clients may use in Host besides localhost and IP addresses; * for any")
const allowedOriginsOf = (env: string) => listOf("allowed-origin", env, "a browser origin (scheme://host[:port]) allowed cross-origin requests; * for any")
const shutdownTimeoutOf = (env: string) =>
  Options.integer("shutdown-timeout").pipe(
    Options.withFallbackConfig(setting(Config.integer, env)),
    Options.optional,
    Options.withDescription(`seconds in-flight requests and streamed runs may take to finish after SIGTERM before the server closes (env ${env}; default 10)`)
  )

const publicUrl = Options.text("public-url").pipe(
  Options.withFallbackConfig(setting(Config.string, "MESH_HUB_PUBLIC_URL", "MESH_PUBLIC_URL")),
  Options.optional,
  Options.withDescription("the URL clients reach the hub at (env MESH_HUB_PUBLIC_URL): signed ledger requests name it, and its host is allowed in Host")
)
const probePort = portOf("probe-port", "MESH_HUB_PROBE_PORT").pipe(
  Options.withDescription("a second port answering only /health, whose accept queue a flood of the main port does not fill (env MESH_HUB_PROBE_PORT)")
)
const newAdminKey = Options.boolean("new-admin-key").pipe(Options.withDescription("issue a new admin credential on this start (after the old one was revoked or lost)"))

const sagaIdentity = Options.file("saga-identity").pipe(
  Options.withFallbackConfig(setting(Config.string, "MESH_HUB_SAGA_IDENTITY")),
  Options.optional,
  Options.withDescription("identity file (`mesh keygen`) of the saga runner: with it the hub also runs sagas (/v1/sagas) as this DID (env MESH_HUB_SAGA_IDENTITY)")
)

const a2aCardUrls = Options.choice("a2a-card-urls", ["public", "any"]).pipe(
  Options.withFallbackConfig(setting(Config.literal("public", "any"), "MESH_HUB_A2A_CARD_URLS")),
  Options.withDefault("public" as const),
  Options.withDescription("which A2A card URLs the hub fetches: public addresses only (default), or any, its own networks too (env MESH_HUB_A2A_CARD_URLS)")
)

const outboundUrls = Options.choice("outbound-urls", ["public", "any"]).pipe(
  Options.withFallbackConfig(setting(Config.literal("public", "any"), "MESH_HUB_OUTBOUND_URLS")),
  Options.withDefault("public" as const),
  Options.withDescription("which addresses the hub's calls to registered URLs reach (saga steps' agents, A2A cards): public only (default), or any, its own networks too (env MESH_HUB_OUTBOUND_URLS)")
)

const runnerAddress = Options.text("runner-address").pipe(
  Options.withFallbackConfig(setting(Config.string, "MESH_HUB_RUNNER_ADDRESS")),
  Options.optional,
  Options.withDescription("host:port the other hubs reach this hub's saga runner at, unique per hub (env MESH_HUB_RUNNER_ADDRESS; default <hostname>:34431). With a Postgres --db every hub given --saga-identity is a runner of one cluster and a saga runs on whichever owns its shard; on SQLite one hub runs every saga")
)
const runnerListen = Options.text("runner-listen").pipe(
  Options.withFallbackConfig(setting(Config.string, "MESH_HUB_RUNNER_LISTEN")),
  Options.optional,
  Options.withDescription("host:port the saga runner listens on, when it differs from --runner-address (env MESH_HUB_RUNNER_LISTEN). Reachable by the other hubs only: the runners' protocol has no authentication")
)
const sagaFailover = Options.integer("saga-failover").pipe(
  Options.withFallbackConfig(setting(Config.integer, "MESH_HUB_SAGA_FAILOVER")),
  Options.optional,
  Options.withDescription("seconds after a runner stops answering before its sagas move to the other hubs (Postgres; env MESH_HUB_SAGA_FAILOVER; default 10, at least 3)")
)

const hubCommand = Command.make(
  "hub",
  {
    port, host, db, publicUrl, newAdminKey, probePort, sagaIdentity, a2aCardUrls, outboundUrls, runnerAddress, runnerListen, sagaFailoverSeconds: sagaFailover,
    allowedHosts: allowedHostsOf("MESH_HUB_ALLOWED_HOST"), allowedOrigins: allowedOriginsOf("MESH_HUB_ALLOWED_ORIGIN"),
    logFormat: logFormatOf("MESH_HUB_LOG_FORMAT"), shutdownTimeoutSeconds: shutdownTimeoutOf("MESH_HUB_SHUTDOWN_TIMEOUT")
  },
  (args) => runHub(args).pipe(withLogLevelOf("MESH_HUB_LOG_LEVEL"), Effect.provide(Observability.layer("mesh-hub", args.logFormat)))
).pipe(described(
  "run a hub: registry, spending ledger and platform API on a SQLite file; on SIGTERM it finishes requests in flight, then stops",
  "mesh hub --port 7700 --db .mesh/hub.db --public-url https://hub.example.com"
))

const registryUrl = urlOf("registry", "MESH_PLATFORM_REGISTRY", "MESH_REGISTRY").pipe(
  Options.mapEffect(Option.match({ onNone: () => Effect.fail(ValidationError.missingValue(HelpDoc.p("Expected to find option: '--registry'"))), onSome: Effect.succeed })),
  Options.withDescription("the registry hub's URL (env MESH_PLATFORM_REGISTRY)")
)
const registryKey = requiredSecretOf("registry-key", setting((n) => Config.redacted(n), "MESH_PLATFORM_REGISTRY_KEY", "MESH_REGISTRY_KEY")).pipe(Options.withDescription("that hub's admin credential (env MESH_PLATFORM_REGISTRY_KEY)"))
const platformPort = portOf("port", "MESH_PLATFORM_PORT", "MESH_PORT").pipe(orDefault(7701), Options.withDescription("port to listen on (env MESH_PLATFORM_PORT; default 7701)"))
const platformHost = Options.text("host").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_PLATFORM_HOST", "MESH_HOST")), Options.withDefault("127.0.0.1"), Options.withDescription("address to listen on (env MESH_PLATFORM_HOST)"))

const platformCommand = Command.make(
  "platform",
  { registryUrl, registryKey, port: platformPort, host: platformHost, allowedHosts: allowedHostsOf("MESH_PLATFORM_ALLOWED_HOST"), allowedOrigins: allowedOriginsOf("MESH_PLATFORM_ALLOWED_ORIGIN") },
  (args) => runPlatform(args)
).pipe(described("run the platform API apart from the registry, reaching it over HTTP", "mesh platform --registry http://127.0.0.1:7700 --registry-key mk_… --port 7701"))

/** The hub a client command talks to: the flag, MESH_HUB, mesh.json, else the local default (which it then names). */
const DEFAULT_HUB = "http://127.0.0.1:7700"
const hubUrl = urlOf("hub", "MESH_HUB").pipe(orDefault(DEFAULT_HUB), Options.withDescription(`hub URL (env MESH_HUB; default ${DEFAULT_HUB})`))
const adminKey = requiredSecretOf("admin-key", setting((n) => Config.redacted(n), "MESH_ADMIN_KEY")).pipe(Options.withDescription("the admin credential (env MESH_ADMIN_KEY)"))
const owner = Options.text("owner").pipe(Options.withDescription("who the key is for: a name, or an agent's DID"))
const label = Options.text("label").pipe(Options.optional, Options.withDescription("a note to recognize the key by"))

const keysCreate = Command.make("create", { hubUrl, adminKey, owner, label, json: jsonFlag }, (args) =>
  Effect.flatMap(createKey(args), (k) =>
    Effect.zipRight(
      note(`created API key ${k.id} for ${k.owner} (${k.kind}) on hub ${args.hubUrl}${args.hubUrl === DEFAULT_HUB ? " (the default: pass --hub or set MESH_HUB for another)" : ""}; shown once ${args.json ? "in the JSON" : "below"}: store it now`),
      printResult(args.json, { ...k, hub: args.hubUrl }, (created) => created.apiKey)
    )
  )
).pipe(described("create an API key on a hub with the admin credential", "mesh keys create --hub http://127.0.0.1:7700 --admin-key mk_… --owner did:mesh:acme.alice"))

const agentModule = Args.file({ name: "module", exists: "yes" }).pipe(Args.withDescription("a module whose default export is the agent's options ({ name, handler, … }) or a function returning them"))
const agentPort = portOf("port", "MESH_AGENT_PORT", "MESH_PORT").pipe(Options.withDescription("port to listen on (env MESH_AGENT_PORT; default the module's, else any free port)"))
const agentHost = Options.text("host").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_AGENT_HOST", "MESH_HOST")), Options.optional, Options.withDescription("address to listen on (env MESH_AGENT_HOST; default 127.0.0.1)"))
const agentDb = Options.text("db").pipe(Options.withFallbackConfig(Config.orElse(setting(Config.string, "MESH_AGENT_DB"), () => databaseUrlConfig)), Options.optional, Options.withDescription("SQLite file, or postgres:// URL shared by the agent's replicas, for paused tasks, nonces, streamed runs and memory (env MESH_AGENT_DB, else MESH_DATABASE_URL; default .mesh/agents/<didHash>.db, after the agent's DID)"))
const agentSharedDb = Options.boolean("shared-db").pipe(Options.withFallbackConfig(setting(Config.boolean, "MESH_AGENT_SHARED_DB")), Options.withDescription("run even when another live agent uses the same SQLite file (refused otherwise; env MESH_AGENT_SHARED_DB)"))
const agentHub = urlOf("hub", "MESH_AGENT_HUB", "MESH_HUB").pipe(Options.withDescription("hub whose registry resolves callers' and grantors' keys, and where --register registers (env MESH_AGENT_HUB)"))
const agentProvider = Options.choice("provider", ["anthropic", "openai"]).pipe(Options.withFallbackConfig(setting(Config.literal("anthropic", "openai"), "MESH_AGENT_PROVIDER", "MESH_PROVIDER")), Options.optional, Options.withDescription("model provider of an LLM chat agent (env MESH_AGENT_PROVIDER): anthropic (ANTHROPIC_API_KEY) or openai (OPENAI_API_KEY, OPENAI_BASE_URL); overrides the module's"))
const agentModel = Options.text("model").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_AGENT_MODEL", "MESH_MODEL")), Options.optional, Options.withDescription("model of an LLM chat agent (env MESH_AGENT_MODEL); overrides the module's"))
const agentIdentity = Options.file("identity").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_AGENT_IDENTITY")), Options.optional, Options.withDescription("identity file from `mesh keygen`: the agent's DID and key (env MESH_AGENT_IDENTITY)"))
const agentRegister = Options.boolean("register").pipe(
  Options.withFallbackConfig(setting(Config.boolean, "MESH_AGENT_REGISTER")),
  Options.withDescription("register the agent at --hub (or update its record), then keep it live with a heartbeat; needs --identity and --api-key (env MESH_AGENT_REGISTER)")
)
const agentApiKey = secretOf("api-key", setting((n) => Config.redacted(n), "MESH_AGENT_API_KEY")).pipe(Options.withDescription("the API key that registers the agent (`mesh keys create --owner <did>`), the same on every start (env MESH_AGENT_API_KEY)"))
const agentHeartbeat = Options.integer("heartbeat-interval").pipe(Options.withFallbackConfig(setting(Config.integer, "MESH_AGENT_HEARTBEAT_INTERVAL")), Options.optional, Options.withDescription("seconds between heartbeats with --register (env MESH_AGENT_HEARTBEAT_INTERVAL; default 30; the hub counts an agent stale after 90)"))
const agentPublicUrl = Options.text("public-url").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_AGENT_PUBLIC_URL")), Options.optional, Options.withDescription("the URL callers reach the agent at, behind a proxy or in a container: it is registered, signed requests name it, its host is allowed (env MESH_AGENT_PUBLIC_URL)"))
const agentAuth = Options.choice("auth", ["none", "bearer", "mesh-sig"]).pipe(Options.withFallbackConfig(setting(Config.literal("none", "bearer", "mesh-sig"), "MESH_AGENT_AUTH")), Options.optional, Options.withDescription("who may call: anyone, holders of a bearer token, or signed callers (env MESH_AGENT_AUTH; default the module's, else none)"))
// A repeated redacted flag is read as text and redacted here: the parser validates a single repeated value twice,
// and a value already redacted is no longer a string ("'<redacted>' is not a redacted").
const agentBearer = Options.text("bearer-token").pipe(
  Options.withPseudoName("token"),
  Options.repeated,
  Options.mapEffect((given) =>
    given.length > 0
      ? Effect.succeed(given.map((t) => Redacted.make(t)))
      : Effect.orElseSucceed(setting((n) => Config.array(Config.redacted(Config.string()), n), "MESH_AGENT_BEARER_TOKEN"), () => [])
  ),
  Options.withDescription("a token accepted with --auth bearer (repeatable; env MESH_AGENT_BEARER_TOKEN, comma-separated)")
)
const agentAllowedCaller = listOf("allowed-caller", "MESH_AGENT_ALLOWED_CALLER", "a DID allowed to call with --auth mesh-sig; without any, every caller whose signature verifies")

const agentCommand = Command.make(
  "agent",
  {
    module: agentModule, port: agentPort, host: agentHost, db: agentDb, sharedDb: agentSharedDb, hub: agentHub, identity: agentIdentity, provider: agentProvider, model: agentModel,
    register: agentRegister, apiKey: agentApiKey, heartbeatSeconds: agentHeartbeat, publicUrl: agentPublicUrl, auth: agentAuth, bearerTokens: agentBearer,
    allowedCallers: agentAllowedCaller, allowedHosts: allowedHostsOf("MESH_AGENT_ALLOWED_HOST"), allowedOrigins: allowedOriginsOf("MESH_AGENT_ALLOWED_ORIGIN"),
    logFormat: logFormatOf("MESH_AGENT_LOG_FORMAT"), shutdownTimeoutSeconds: shutdownTimeoutOf("MESH_AGENT_SHUTDOWN_TIMEOUT")
  },
  (args) => runAgent(args).pipe(withLogLevelOf("MESH_AGENT_LOG_LEVEL"), Effect.provide(Observability.layer("mesh-agent", args.logFormat)))
).pipe(described(
  "run the agent a module exports (POST /v1/run, /v1/resume, /health, /.well-known/mesh-agent.json); with --register, listed on a hub and kept live",
  "mesh agent examples/echo-agent.ts --identity echo.identity.json --hub http://127.0.0.1:7700 --api-key mk_… --register"
))

const sagaFile = Args.file({ name: "file", exists: "yes" }).pipe(Args.withDescription("the saga as JSON: { mandate, steps: [{ name, agentDid | didHash, capability, params, budgetUsd, compensation }] }"))
const sagaCaller = Options.file("identity").pipe(
  Options.withFallbackConfig(setting(Config.string, "MESH_CALL_IDENTITY")),
  Options.withDescription("identity file (`mesh keygen`) of the saga mandate's grantor: it signs every request, and only it may read the saga (env MESH_CALL_IDENTITY)")
)
const followFlag = Options.boolean("follow").pipe(Options.withDescription("print each progress event on stderr as it happens, until the saga ends"))
const sagaRun = Command.make("run", { hubUrl, file: sagaFile, identity: sagaCaller, follow: followFlag, json: jsonFlag }, (args) =>
  // A saga that did not commit is a failure for a script: the exit code says so, the JSON on stdout says how.
  Effect.flatMap(Sagas.runSagaFile(args), Sagas.exitByOutcome)
).pipe(
  described(
    "start a saga on the hub, wait for its end and print it as JSON on stdout (--json or not); exits 1 unless it committed. --follow prints its progress on stderr meanwhile",
    "mesh saga run trip.json --follow --identity buyer.identity.json --hub http://127.0.0.1:7700"
  )
)
const sagaId = Args.text({ name: "id" }).pipe(Args.withDescription("the saga's id (mesh saga ls lists yours)"))
const sagaStatusCommand = Command.make("status", { hubUrl, sagaId, identity: sagaCaller, follow: followFlag, json: jsonFlag }, (args) =>
  args.follow ? Effect.flatMap(Sagas.sagaStatus(args), Sagas.exitByOutcome) : Sagas.sagaStatus(args)
).pipe(
  described(
    "print a saga's state as JSON (--json or not); with --follow, its progress on stderr until it ends, then its end, exiting 1 unless it committed",
    "mesh saga status saga_… --follow --identity buyer.identity.json --hub http://127.0.0.1:7700"
  )
)
const sagaLs = Command.make(
  "ls",
  {
    hubUrl,
    identity: sagaCaller,
    limit: Options.integer("limit").pipe(Options.withDefault(50), Options.withDescription("at most this many (up to 200)")),
    cursor: Options.text("cursor").pipe(Options.optional, Options.withDescription("where the last page ended (its nextCursor, or what the note under it says)")),
    json: jsonFlag
  },
  (args) => Sagas.listSagas(args)
).pipe(described("list the sagas your identity started on the hub, newest first: id, status, steps, when", "mesh saga ls --identity buyer.identity.json --hub http://127.0.0.1:7700"))
const sagaCommand = Command.make("saga").pipe(described("run sagas on a hub and read them", "mesh saga run trip.json --follow"), Command.withSubcommands([sagaRun, sagaStatusCommand, sagaLs]))

const keysCommand = Command.make("keys").pipe(described("manage API keys", "mesh keys create --admin-key mk_… --owner alice"), Command.withSubcommands([keysCreate]))

const callTarget = Args.text({ name: "didHash" }).pipe(Args.withDescription("the agent's didHash (resolved on the hub), or its base URL"))
const callMessage = Args.text({ name: "message" }).pipe(Args.withDescription("what to send"))
const callIdentity = Options.file("identity").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_CALL_IDENTITY")), Options.optional, Options.withDescription("identity file to sign the request with (mesh-sig agents; env MESH_CALL_IDENTITY)"))
const callSession = Options.text("session").pipe(Options.optional, Options.withDescription("the session to continue (printed on stderr after each call)"))
const callStream = Options.boolean("stream").pipe(Options.withDescription("print the reply as it is written (SSE)"))
const callMandate = Options.text("mandate").pipe(
  Options.optional,
  Options.withDescription("a mandate token granted to the agent: a task mandate for its actions, or a payment or cart mandate (`mesh mandate attenuate`) that pays for the call; prints what it authorizes and what the agent charged, and with --identity of the parent's grantee books the charge in the hub's ledger")
)
const callBearer = secretOf("bearer-token", setting((n) => Config.redacted(n), "MESH_CALL_BEARER_TOKEN")).pipe(Options.withDescription("bearer token of an agent with --auth bearer (env MESH_CALL_BEARER_TOKEN)"))

const callApiKey = secretOf("api-key", setting((n) => Config.redacted(n), "MESH_CALL_API_KEY")).pipe(
  Options.withDescription("an API key of yours on the hub (`mesh keys create --owner <your DID>`): with --identity and a payment or cart --mandate, the call is booked in the hub's spending ledger (env MESH_CALL_API_KEY)")
)

const callCommand = Command.make(
  "call",
  { hubUrl, target: callTarget, message: callMessage, identity: callIdentity, session: callSession, stream: callStream, mandate: callMandate, bearerToken: callBearer, apiKey: callApiKey, json: jsonFlag },
  (args) => callAgent(args)
).pipe(described("send a message to an agent and print its reply", "mesh call 3f2a…c9 \"hello\" --identity alice.identity.json --stream"))

const liveFlag = Options.boolean("live").pipe(Options.withDescription("only agents heard from within the hub's stale interval (90 s by default)"))
const staleFlag = Options.boolean("stale").pipe(Options.withDescription("only agents not heard from within it"))
const limit = Options.integer("limit").pipe(Options.withDefault(50), Options.withDescription("at most this many (up to 200)"))
const agentsLs = Command.make("ls", { hubUrl, live: liveFlag, stale: staleFlag, limit, json: jsonFlag }, (args) => listAgents(args)).pipe(
  described("list the agents registered on a hub, live or stale", "mesh agents ls --live")
)
const searchQuery = Args.text({ name: "query" }).pipe(Args.withDescription("terms of three characters or more, all of which must match"))
const agentsSearch = Command.make("search", { hubUrl, query: searchQuery, live: liveFlag, stale: staleFlag, json: jsonFlag }, (args) => searchAgents(args)).pipe(
  described("search agents, MCP servers and skills by name, description, capability and tag", "mesh agents search translate --live")
)
const showHash = Args.text({ name: "didHash" }).pipe(Args.withDescription("the agent's didHash"))
const agentsShow = Command.make("show", { hubUrl, didHash: showHash, json: jsonFlag }, (args) => showAgent(args)).pipe(
  described("print an agent's record, liveness, DID document and manifest", "mesh agents show 3f2a…c9")
)
const rmIdentity = Options.file("identity").pipe(Options.optional, Options.withDescription("identity file of the DID being removed: its key signs the deletion (needed with any API key but the admin's)"))
const rmApiKey = requiredSecretOf("api-key", setting((n) => Config.redacted(n), "MESH_API_KEY")).pipe(Options.withDescription("the API key that registered the record, or the admin's (env MESH_API_KEY)"))
const agentsRm = Command.make("rm", { hubUrl, didHash: showHash, identity: rmIdentity, apiKey: rmApiKey, json: jsonFlag }, (args) => removeAgent(args)).pipe(
  described("remove a record from the hub's registry, signed by its DID's key", "mesh agents rm 3f2a…c9 --identity alice.identity.json --api-key mk_…")
)
const agentsCommand = Command.make("agents").pipe(described("read a hub's registry", "mesh agents ls"), Command.withSubcommands([agentsLs, agentsSearch, agentsShow, agentsRm]))

const ownIdentity = Options.file("identity").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_CALL_IDENTITY")), Options.withDescription("identity file from `mesh keygen` (env MESH_CALL_IDENTITY)"))
const registerApiKey = requiredSecretOf("api-key", setting((n) => Config.redacted(n), "MESH_API_KEY")).pipe(Options.withDescription("an API key for the DID (`mesh keys create --owner <did>`) or the admin's; it owns the record (env MESH_API_KEY)"))
const registerCommand = Command.make("register", { hubUrl, identity: ownIdentity, apiKey: registerApiKey, json: jsonFlag }, (args) => registerCaller(args)).pipe(described(
  "register an identity's DID and key on the hub with no endpoint, so agents, mandate verifiers and sagas resolve it when it calls or grants",
  "mesh register --identity alice.identity.json --hub http://127.0.0.1:7700 --api-key mk_…"
))
const approveCommand = Command.make(
  "approve",
  {
    hubUrl,
    taskId: Args.text({ name: "taskId" }).pipe(Args.withDescription("the paused task, as `mesh call` printed it")),
    agent: Options.text("agent").pipe(Options.withDescription("the paused agent's didHash (resolved on --hub) or base URL")),
    capability: Options.text("capability").pipe(Options.withDescription("the gated capability the approval is for")),
    identity: Options.file("identity").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_CALL_IDENTITY")), Options.withDescription("identity file of the mandate's grantor: it signs the decision (env MESH_CALL_IDENTITY)")),
    deny: Options.boolean("deny").pipe(Options.withDescription("sign a denial: the agent ends the task")),
    ttlSeconds: Options.integer("ttl").pipe(Options.optional, Options.withDescription("seconds the signed decision stays valid (default 900)")),
    json: jsonFlag
  },
  (args) => approveTask(args)
).pipe(described("approve (or --deny) a task paused at a human gate, signed as the mandate's grantor, and resume it", "mesh approve task_… --agent 3f2a…c9 --capability send_email --identity alice.identity.json"))
const whoamiCommand = Command.make("whoami", { hubUrl, identity: ownIdentity, json: jsonFlag }, (args) => whoami(args)).pipe(
  described("print an identity's DID, didHash and key, and whether the hub holds that key for it", "mesh whoami --identity alice.identity.json")
)

const mandateIdentity = Options.file("identity").pipe(Options.withDescription("identity file of the grantor (`mesh keygen`)"))
const mandateTo = Options.text("to").pipe(Options.withDescription("the grantee's DID"))
/** The constraint members of `kinds`, one line each, for a `--constraints` description. */
const constraintsHelp = (kinds: ReadonlyArray<MandateKind>) =>
  `the constraints as a JSON object; USD amounts as a number or a decimal string ("5.00"). Members per kind:\n${kinds.map((k) => `  ${k}: ${CONSTRAINTS_HELP[k]}`).join("\n")}\n(docs/protocol.md §9.3)`
const mandateTtl = Options.integer("ttl").pipe(Options.optional, Options.withDescription("lifetime in seconds (default 3600; a child never outlives its parent)"))
const mandateKeyVersion = Options.integer("key-version").pipe(Options.optional, Options.withDescription("the grantor's current key version on the hub (default 1; raise it after a rotation)"))
const mandateIssue = Command.make(
  "issue",
  {
    identity: mandateIdentity,
    to: mandateTo,
    kind: Options.text("kind").pipe(Options.withDescription("the root kind: intent (a spending budget), task (capabilities) or model-budget (model routing); cart and payment are cut from an intent with `mesh mandate attenuate`")),
    constraints: Options.text("constraints").pipe(Options.withDescription(constraintsHelp(ROOT_KINDS))),
    ttlSeconds: mandateTtl,
    keyVersion: mandateKeyVersion,
    json: jsonFlag
  },
  (args) => issueMandate(args)
).pipe(described(
  "issue a root mandate from your identity to a grantee; prints the token on stdout and the chain on stderr. Spending starts with an intent: its grantee then makes cart and payment mandates from it with `mesh mandate attenuate`",
  "mesh mandate issue --identity alice.identity.json --to did:mesh:alice --kind intent --constraints '{\"spendLimitUsd\":\"5.00\"}'"
))
const mandateParent = Args.text({ name: "token" }).pipe(Args.withDescription("the parent mandate's token"))
const mandateAttenuate = Command.make(
  "attenuate",
  {
    parent: mandateParent,
    identity: mandateIdentity,
    to: mandateTo,
    kind: Options.choice("kind", CHILD_KINDS).pipe(Options.withDescription("the child's kind: cart or payment from an intent (payment also from a cart), task from a task, model-budget from a model-budget")),
    constraints: Options.text("constraints").pipe(Options.withDescription(constraintsHelp(CHILD_KINDS))),
    ttlSeconds: mandateTtl,
    keyVersion: mandateKeyVersion,
    json: jsonFlag
  },
  (args) => attenuateMandate(args)
).pipe(described(
  "delegate part of a mandate you hold to another DID, within its constraints (the identity is the parent's grantee); a payment to an agent is cut from an intent this way",
  "mesh mandate attenuate \"$TOKEN\" --identity bot.identity.json --to did:mesh:acme.helper --kind task --constraints '{\"allowed\":[\"search\"],\"maxDelegationDepth\":0}'"
))
const mandateVerify = Command.make(
  "verify",
  {
    hubUrl,
    token: Args.text({ name: "token" }).pipe(Args.withDescription("the mandate's token")),
    grantee: Options.text("grantee").pipe(Options.optional, Options.withDescription("the DID that must be its grantee")),
    kind: Options.choice("kind", MANDATE_KINDS).pipe(Options.optional, Options.withDescription("the kind it must have")),
    json: jsonFlag
  },
  (args) => verifyMandateToken(args)
).pipe(described("verify a mandate's whole chain against the hub's registry (keys, key versions, revocations) and print it", "mesh mandate verify \"$TOKEN\" --grantee did:mesh:acme.bot"))
const mandateCommand = Command.make("mandate").pipe(described("delegate authority without writing code", "mesh mandate issue --help"), Command.withSubcommands([mandateIssue, mandateAttenuate, mandateVerify]))

const ledgerIdentity = Options.file("identity").pipe(
  Options.withFallbackConfig(setting(Config.string, "MESH_CALL_IDENTITY")),
  Options.withDescription("identity file (`mesh keygen`) of the pools' grantee: it signs every ledger request (env MESH_CALL_IDENTITY)")
)
const ledgerApiKey = requiredSecretOf("api-key", setting((n) => Config.redacted(n), "MESH_CALL_API_KEY")).pipe(
  Options.withDescription("an API key of yours on the hub (`mesh keys create --owner <your DID>`); the ledger answers its pools' grantee only (env MESH_CALL_API_KEY)")
)
const poolId = Args.text({ name: "poolId" }).pipe(Args.withDescription("the pool's id (pool_…), as `mesh ledger pools` lists it"))
const ledgerPoolsCommand = Command.make("pools", { hubUrl, identity: ledgerIdentity, apiKey: ledgerApiKey, json: jsonFlag }, (args) => Ledger.ledgerPools(args)).pipe(
  described("list the spending pools of the mandates granted to you, with limit, allocated and remaining USD", "mesh ledger pools --identity alice.identity.json")
)
const ledgerPoolCommand = Command.make("pool", { hubUrl, identity: ledgerIdentity, apiKey: ledgerApiKey, poolId, json: jsonFlag }, (args) => Ledger.ledgerPool(args)).pipe(
  described("print a pool and every allocation from it: amount, used amount, idempotency key, commit token", "mesh ledger pool pool_… --identity alice.identity.json")
)
const ledgerReconcileCommand = Command.make("reconcile", { hubUrl, identity: ledgerIdentity, apiKey: ledgerApiKey, poolId, json: jsonFlag }, (args) => Ledger.ledgerReconcile(args)).pipe(
  described("check a pool's trail on this machine: each commit token's signature under its agent's key, its step and amount, the totals; exits 1 on any failure", "mesh ledger reconcile pool_… --identity alice.identity.json")
)
const ledgerCommand = Command.make("ledger").pipe(
  described("read the hub's spending ledger as the grantee of its pools' mandates", "mesh ledger pools --identity alice.identity.json"),
  Command.withSubcommands([ledgerPoolsCommand, ledgerPoolCommand, ledgerReconcileCommand])
)

const mcpPort = portOf("port", "MESH_MCP_PORT").pipe(Options.withDescription("serve Streamable HTTP on this port (at /mcp) instead of stdio (env MESH_MCP_PORT)"))
const mcpHost = Options.text("host").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_MCP_HOST")), Options.withDefault("127.0.0.1"), Options.withDescription("address to listen on with --port (env MESH_MCP_HOST)"))
const mcpIdentity = Options.file("identity").pipe(Options.withFallbackConfig(setting(Config.string, "MESH_MCP_IDENTITY")), Options.optional, Options.withDescription("identity file from `mesh keygen`: calls to agents are signed as this DID (mesh-sig; env MESH_MCP_IDENTITY)"))
const mcpCommand = Command.make("mcp", { hubUrl, identity: mcpIdentity, port: mcpPort, host: mcpHost }, (args) => runMcp(args)).pipe(
  described(
    "serve the mesh as an MCP server (stdio, or Streamable HTTP with --port): search agents, call them by didHash, resume paused tasks",
    "mesh mcp --hub http://127.0.0.1:7700 --identity alice.identity.json"
  )
)

/** The whole command tree (exported for tests that parse arguments and read help without running anything). */
export const mesh = Command.make("mesh").pipe(
  Command.withDescription("agent-mesh: identities, signed envelopes and mandates for meshes of AI agents"),
  Command.withSubcommands([keygenCommand, hubCommand, platformCommand, agentCommand, keysCommand, sagaCommand, callCommand, agentsCommand, mandateCommand, ledgerCommand, mcpCommand, registerCommand, whoamiCommand, approveCommand])
)

const cli = Command.run(mesh, { name: "mesh", version: VERSION })

/** Our typed errors print as one line with their code; anything else is a defect and keeps its trace. */
const report = (e: { readonly code: string; readonly message: string }) =>
  Effect.zipRight(Console.error(`mesh: ${e.code}: ${e.message}`), Effect.sync(() => {
    process.exitCode = 1
  }))

const hasCode = (e: unknown): e is { readonly code: string; readonly message: string } =>
  typeof e === "object" && e !== null && typeof (e as { code?: unknown }).code === "string" && typeof (e as { message?: unknown }).message === "string"

/** Commands people reach for under another name, and the one that does it. */
const MISNAMED: Readonly<Record<string, string>> = { "agents list": "agents ls", "agents get": "agents show", "agents find": "agents search" }

/** Runs `mesh` with the process's arguments; start.ts calls it. */
export const main = (argv: ReadonlyArray<string> = process.argv): void => {
  const taken = takeLogLevel(argv.slice(2))
  if (Either.isLeft(taken)) {
    process.stderr.write(`mesh: ${taken.left} (see mesh --help)\n`)
    process.exitCode = 2
    return
  }
  const { args, level } = taken.right
  const words = args.slice(0, 2).join(" ")
  if (words in MISNAMED) {
    process.stderr.write(`mesh: there is no "mesh ${words}"; did you mean "mesh ${MISNAMED[words]}"? (see mesh --help)\n`)
    process.exitCode = 2
    return
  }
  requireCsprng("the mesh command").pipe(
    Effect.zipRight(Effect.flatMap(loadSettings(settingNames), (settings) => Effect.withConfigProvider(cli([...argv.slice(0, 2), ...args]), settings))),
    (run) => Option.isSome(level) ? Logger.withMinimumLogLevel(run, LogLevel.fromLiteral(logLevelNames[level.value])) : run,
    Effect.locally(logLevelFlag, level),
    // A usage error was printed by the parser already (once, one line: see Output.ts): only the exit code is left.
    Effect.catchIf(ValidationError.isValidationError, () => Effect.sync(() => void (process.exitCode = 2))),
    Effect.catchTag("ServeError", (e) => report({ code: "LISTEN_FAILED", message: e.message })),
    Effect.catchIf(hasCode, report),
    withOutput(args),
    Effect.provide(Layer.merge(NodeContext.layer, KeysNative.layer)),
    NodeRuntime.runMain
  )
}
