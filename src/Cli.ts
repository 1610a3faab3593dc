/**
 * What the `mesh` subcommands do, apart from argument parsing, so tests can run them directly.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { didHash, generateDid, type InvalidDid } from "./Did.js"
import type { Keys } from "./Keys.js"
import { toBase64 } from "./internal/bytes.js"

/** The CLI could not do what was asked; `code` says why. */
export class CliError extends Schema.TaggedError<CliError>()("CliError", {
  code: Schema.Literal("FILE_EXISTS", "IO_ERROR"),
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

/** Creates an identity and writes it to a file readable only by its owner; refuses to overwrite unless `force`. */
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
    if (!args.force && (yield* Effect.mapError(fs.exists(file), ioError))) {
      return yield* Effect.fail(new CliError({ code: "FILE_EXISTS", message: `${file} exists; pass --force to overwrite` }))
    }
    const content: IdentityFile = {
      did: identity.did,
      didHash: didHash(identity.did),
      publicKeyB64: identity.publicKey,
      privateKeyPkcs8B64: toBase64(identity.privateKey.toPkcs8()),
      didKey: identity.didKey,
      document: identity.document
    }
    yield* Effect.mapError(fs.writeFileString(file, JSON.stringify(content, null, 2) + "\n", { mode: 0o600 }), ioError)
    // writeFile keeps the mode of an existing file; make sure an overwritten one is private too.
    yield* Effect.mapError(fs.chmod(file, 0o600), ioError)
    return { ...content, path: file }
  })
