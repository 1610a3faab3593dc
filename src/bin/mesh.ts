#!/usr/bin/env node
/**
 * The `mesh` command. Bundled into dist/bin/mesh.js so it starts without resolving hundreds of modules.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { keygen } from "../Cli.js"
import * as KeysNative from "../KeysNative.js"
import { VERSION } from "../Version.js"

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

const mesh = Command.make("mesh").pipe(
  Command.withDescription("agent-mesh: identities, signed envelopes and mandates for meshes of AI agents"),
  Command.withSubcommands([keygenCommand])
)

const cli = Command.run(mesh, { name: "mesh", version: VERSION })

/** Our typed errors print as one line with their code; anything else is a defect and keeps its trace. */
const report = (e: { readonly code: string; readonly message: string }) =>
  Effect.zipRight(Console.error(`mesh: ${e.code}: ${e.message}`), Effect.sync(() => {
    process.exitCode = 1
  }))

cli(process.argv).pipe(
  Effect.catchTags({ CliError: report, InvalidDid: report }),
  Effect.provide(Layer.merge(NodeContext.layer, KeysNative.layer)),
  NodeRuntime.runMain
)
