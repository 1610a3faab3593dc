/**
 * The signed discovery document (`/.well-known/mesh-agent.json`): who the agent is, where its endpoints are, how to
 * call it. Signed once, on first request, after the base URL is published (its endpoints name that URL), and the
 * same signed document answered from then on: signing per request would let anyone spend the server's CPU.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AuthMode } from "./AgentApi.js"
import { Identity } from "./Identity.js"
import type { MemoryMode } from "../core/AgentMemory.js"
import { verificationMethodId } from "../core/Did.js"
import { Keys } from "../core/Keys.js"
import { signMessage } from "../core/Proof.js"
import { MESH_PROTOCOL_VERSION, VERSION } from "../core/Version.js"

/** The discovery settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly auth?: AuthMode
  readonly memory?: MemoryMode
  readonly capabilities?: ReadonlyArray<string>
}

/** The signed discovery document of one agent server. */
export class Discovery extends Context.Tag("agent-mesh/agent/Discovery")<Discovery, { readonly document: Effect.Effect<unknown> }>() {}

/** The document for the identity in context, signed with its key. */
export const make = (options: Options): Effect.Effect<{ readonly document: Effect.Effect<unknown> }, never, Identity | Keys> =>
  Effect.gen(function* () {
    const identity = yield* Identity
    const keys = yield* Keys
    const sign = Effect.flatMap(identity.url, (baseUrl) =>
      signMessage(
        {
          type: "MeshAgent",
          name: identity.name,
          did: identity.did,
          didHash: identity.didHash,
          publicKeyB64: identity.publicKeyB64,
          meshProtocolVersion: MESH_PROTOCOL_VERSION,
          version: VERSION,
          endpoints: { run: `${baseUrl}/v1/run`, resume: `${baseUrl}/v1/resume`, health: `${baseUrl}/health` },
          auth: [options.auth ?? "none"],
          streaming: true,
          memory: options.memory ?? "none",
          capabilities: [...(options.capabilities ?? [])]
        },
        identity.privateKey,
        verificationMethodId(identity.did)
      ).pipe(Effect.provideService(Keys, keys), Effect.orDie)
    )
    return { document: yield* Effect.cached(sign) }
  })

/** `Discovery` with these settings. */
export const layer = (options: Options): Layer.Layer<Discovery, never, Identity | Keys> => Layer.effect(Discovery, make(options))
