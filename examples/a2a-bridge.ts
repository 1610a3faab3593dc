/**
 * A2A both ways. A mesh agent server answers the official A2A client (`@a2a-js/sdk`, 1.0): the client reads the
 * agent's signed card, checks its signature against the agent's key, and sends a message. Then a third-party A2A
 * agent (built with the SDK's server, `examples/a2a-sdk-agent.ts`) is registered in a hub from its card URL, and a
 * mesh caller reaches it by didHash with `AgentClient`, as it would any mesh agent.
 *
 *   npx tsx examples/a2a-bridge.ts
 */
import { type AgentCard, Role, verifyAgentCardSignature } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { pathToFileURL } from "node:url"
import * as AgentClient from "../src/agent/AgentClient.js"
import * as AgentServer from "../src/agent/AgentServer.js"
import * as Hub from "../src/hub/Hub.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { startSdkAgent } from "./a2a-sdk-agent.js"

/** Runs both directions and returns what each side received. */
export const program = Effect.gen(function* () {
  // 1. An A2A client calls a mesh agent.
  const agent = yield* AgentServer.make({
    name: "translator",
    database: ":memory:",
    capabilities: ["translate"],
    handler: ({ message }) => `«${message}» in French: «${message === "good morning" ? "bonjour" : "?"}»`
  })
  const { card, verified, reply } = yield* Effect.promise(async () => {
    const client = await new ClientFactory().createFromUrl(agent.url)
    const card: AgentCard = await client.getAgentCard()
    const x = Buffer.from(agent.publicKeyB64, "base64").toString("base64url")
    const verified = await verifyAgentCardSignature(async () => ({ kty: "OKP", crv: "Ed25519", x }))(card).then(() => true, () => false)
    const reply = await client.sendMessage({
      tenant: "",
      message: {
        messageId: crypto.randomUUID(),
        contextId: "",
        taskId: "",
        role: Role.ROLE_USER,
        parts: [{ content: { $case: "text", value: "good morning" }, metadata: undefined, filename: "", mediaType: "" }],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: []
      },
      configuration: undefined,
      metadata: undefined
    })
    return { card, verified, reply }
  })
  const task = "status" in reply ? reply : undefined
  const translated = (task?.artifacts ?? []).flatMap((a) => a.parts).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")
  yield* Console.log(`A2A client → mesh agent "${card.name}" (card signature ${verified ? "verified" : "NOT verified"}): ${translated}`)

  // 2. A mesh caller calls a third-party A2A agent through the hub.
  const remote = yield* Effect.acquireRelease(
    Effect.promise(() => startSdkAgent({ name: "shouter", reply: (text) => [text.toUpperCase(), "!"] })),
    (a) => Effect.promise(() => a.close())
  )
  // The A2A agent runs beside the hub on 127.0.0.1, so the hub may fetch cards from its own network.
  const hub = yield* Hub.start({ port: 0, database: ":memory:", a2aCardUrls: "any" })
  const apiKey = Option.getOrThrow(hub.admin).apiKey
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey })
  const record = yield* registry.registerA2a({ cardUrl: `${remote.url}/.well-known/agent-card.json` })
  const calls = yield* AgentClient.make({ hubUrl: hub.url })
  const answer = yield* calls.call(record.didHash, "hello from the mesh")
  const message = "message" in answer ? answer.message : ""
  yield* Console.log(`mesh caller → A2A agent "${record.name}" (${record.did}): ${message}`)
  return { cardName: card.name, verified, translated, registered: record, message }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await Effect.runPromise(program)
