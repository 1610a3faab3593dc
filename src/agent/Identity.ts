/**
 * Who the agent is and where callers reach it: its DID, its key, and its base URL. The URL is known only once the
 * server listens (port 0 picks a free one), so it is published then; whatever needs it (the URL a mesh-sig caller
 * signed, the endpoints of the discovery document) waits for it instead of reading a variable that may not be set.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AgentConfigError } from "./AgentError.js"
import { didHash, normalizeDid } from "../core/Did.js"
import { Keys, type MalformedKey, type PrivateKey, type PrivateKeyInput } from "../core/Keys.js"
import { toBase64 } from "../core/internal/bytes.js"

/** The identity settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly name: string
  readonly did?: string
  readonly privateKey?: PrivateKeyInput
}

/** An agent's identity and address. */
export interface IdentityApi {
  readonly name: string
  readonly did: string
  readonly didHash: string
  readonly privateKey: PrivateKey
  readonly publicKeyB64: string
  /**
   * Whether the key was made at start because none was given: nobody can resolve it, so the agent cannot act as
   * itself towards others (its calls to other agents are refused before they are signed).
   */
  readonly ephemeral: boolean
  /** The base URL callers use; waits until it is published. */
  readonly url: Effect.Effect<string>
  /** Publishes the base URL (the first one published stays). */
  readonly publish: (url: string) => Effect.Effect<void>
}

/** The identity of one agent server. */
export class Identity extends Context.Tag("agent-mesh/agent/Identity")<Identity, IdentityApi>() {}

/** The DID an agent with these options serves as: `did`, else one made of its name (not yet checked). */
export const wantedDid = (options: Pick<Options, "did" | "name">): string =>
  options.did ?? `did:mesh:${options.name.toLowerCase().replace(/[^a-z0-9:._-]/g, "-")}`

/** A DID with its key, or a fresh key nobody else knows (fine for local experiments only; logged as a warning). */
export const make = (options: Options): Effect.Effect<IdentityApi, AgentConfigError | MalformedKey, Keys> =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const wanted = wantedDid(options)
    const did = normalizeDid(wanted)
    if (did === undefined) {
      const hint = options.did === undefined ? "; pass did" : ""
      return yield* Effect.fail(new AgentConfigError({ code: "INVALID_CONFIG", message: `${wanted} is not a did:mesh DID${hint}` }))
    }
    const privateKey = options.privateKey === undefined ? yield* keys.generate : yield* keys.importPrivateKey(options.privateKey)
    if (options.privateKey === undefined) {
      yield* Effect.logWarning(`agent ${options.name}: no privateKey given; signing as ${did} with a fresh key nobody can resolve`)
    }
    const url = yield* Deferred.make<string>()
    return {
      name: options.name,
      did,
      didHash: didHash(did),
      privateKey,
      publicKeyB64: toBase64(privateKey.publicKey),
      ephemeral: options.privateKey === undefined,
      url: Deferred.await(url),
      publish: (u) => Effect.asVoid(Deferred.succeed(url, u))
    }
  })

/** `Identity` from these settings. */
export const layer = (options: Options): Layer.Layer<Identity, AgentConfigError | MalformedKey, Keys> => Layer.effect(Identity, make(options))
