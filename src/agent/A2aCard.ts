/**
 * The agent's A2A card (`/.well-known/agent-card.json`, A2A 1.0): its JSON-RPC interface in 1.0 and in 0.3 (same
 * URL), its skills (the `skills` option, else one per declared capability, else one describing what the agent does
 * with a message), the security scheme its auth mode asks for, and a JWS signature (EdDSA, by the agent's own key, `kid` its verification method) over the card's canonical
 * form (A2A 1.0 §8.4.1), so a client can check the card came from the holder of the agent's DID. Signed once, after
 * the base URL is published, then answered as the same text.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AuthMode } from "./AgentApi.js"
import { VERSION_0_3, VERSION_1_0 } from "./A2aProtocol.js"
import { signCard } from "../core/A2aCardSignature.js"
import { Identity } from "./Identity.js"
import { verificationMethodId } from "../core/Did.js"
import { Keys } from "../core/Keys.js"
import { VERSION } from "../core/Version.js"

/** A skill as the card lists it. */
export interface A2aSkill {
  readonly id: string
  readonly name: string
  readonly description?: string
  readonly tags?: ReadonlyArray<string>
  readonly examples?: ReadonlyArray<string>
}

/** The card settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly name: string
  readonly description?: string
  readonly auth?: AuthMode
  readonly capabilities?: ReadonlyArray<string>
  readonly skills?: ReadonlyArray<A2aSkill>
}

/** The signed card of one agent server, as JSON text. */
export class A2aCard extends Context.Tag("agent-mesh/agent/A2aCard")<A2aCard, { readonly text: Effect.Effect<string> }>() {}

const securityOf = (auth: AuthMode) => {
  if (auth === "bearer") {
    return {
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer", description: "Authorization: Bearer <token>" } } },
      securityRequirements: [{ schemes: { bearer: { list: [] } } }]
    }
  }
  if (auth === "mesh-sig") {
    return {
      securitySchemes: {
        "mesh-sig": {
          httpAuthSecurityScheme: {
            scheme: "Signature",
            description: "RFC 9421 HTTP message signature by the caller's did:mesh key (Signature, Signature-Input, Content-Digest; agent-mesh docs/protocol.md §10)"
          }
        }
      },
      securityRequirements: [{ schemes: { "mesh-sig": { list: [] } } }]
    }
  }
  return {}
}

/**
 * The skills the card lists, never none (a card's `skills` is required by the A2A 1.0 `AgentCard`): the `skills` option, else one
 * per declared capability, else one that says what the agent does with a message (what `/v1/run` does).
 */
export const skillsOf = (options: Pick<Options, "name" | "description" | "capabilities" | "skills">): ReadonlyArray<A2aSkill> => {
  if (options.skills !== undefined && options.skills.length > 0) return options.skills
  const capabilities = options.capabilities ?? []
  if (capabilities.length > 0) return capabilities.map((c) => ({ id: c, name: c, description: `The ${c} capability.`, tags: [c] }))
  return [{
    id: "run",
    name: options.name,
    description: options.description ?? `Answers a message (text, or structured data parts) as the agent ${options.name}: the reply streams back as the task's artifact, as POST /v1/run answers it.`,
    tags: ["run"]
  }]
}

/** The card for the identity in context, signed with its key. */
export const make = (options: Options): Effect.Effect<{ readonly text: Effect.Effect<string> }, never, Identity | Keys> =>
  Effect.gen(function* () {
    const identity = yield* Identity
    const keys = yield* Keys
    const skills = skillsOf(options)
    const sign = Effect.gen(function* () {
      const base = (yield* identity.url).replace(/\/+$/, "")
      const endpoint = `${base}/`
      const card: Record<string, unknown> = {
        name: options.name,
        description: options.description ?? `The agent-mesh agent ${options.name} (${identity.did}).`,
        supportedInterfaces: [
          { url: endpoint, protocolBinding: "JSONRPC", protocolVersion: VERSION_1_0 },
          { url: endpoint, protocolBinding: "JSONRPC", protocolVersion: VERSION_0_3 }
        ],
        provider: { organization: identity.did, url: base },
        version: VERSION,
        capabilities: { streaming: true },
        ...securityOf(options.auth ?? "none"),
        defaultInputModes: ["text/plain", "application/json"],
        defaultOutputModes: ["text/plain"],
        skills: skills.map((s) => ({ id: s.id, name: s.name, description: s.description ?? s.name, tags: [...(s.tags ?? [])], ...(s.examples === undefined ? {} : { examples: [...s.examples] }) }))
      }
      const signature = yield* signCard(card, verificationMethodId(identity.did), identity.privateKey).pipe(Effect.provideService(Keys, keys))
      // The 0.3 fields sit outside the 1.0 schema (so outside what the signature covers) and let 0.3 clients find
      // the endpoint; a 1.0 client reads `supportedInterfaces` first.
      return JSON.stringify({ ...card, signatures: [signature], url: endpoint, protocolVersion: VERSION_0_3, preferredTransport: "JSONRPC" })
    })
    return { text: yield* Effect.cached(sign) }
  })

/** `A2aCard` with these settings. */
export const layer = (options: Options): Layer.Layer<A2aCard, never, Identity | Keys> => Layer.effect(A2aCard, make(options))
