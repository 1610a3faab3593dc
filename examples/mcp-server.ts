/**
 * The mesh as an MCP server: a hub with a translator agent, and the bridge `mesh mcp` runs (here in-process, over
 * Streamable HTTP) in front of it. An MCP client — the official MCP SDK's, as a desktop assistant would use — finds
 * the agent with `search_agents` and calls it with `call_agent`; the agent's streamed chunks arrive as progress
 * notifications, and the bridge signs each call as its identity (mesh-sig).
 *
 *   npx tsx examples/mcp-server.ts
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as AgentServer from "../src/agent/AgentServer.js"
import { generateDid } from "../src/core/Did.js"
import * as Hub from "../src/hub/Hub.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as MeshMcpServer from "../src/mesh/MeshMcpServer.js"
import * as KeysNative from "../src/node/KeysNative.js"

/** The whole scene; returns what the MCP client found, the reply and the progress it saw. */
export const program = Effect.gen(function* () {
  const hub = yield* Hub.start({ database: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-example-")), "hub.db") })
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey })

  // The translator answers signed callers only, word by word.
  const translator = yield* generateDid("translator", undefined, "example")
  const served = yield* AgentServer.make({
    name: "translator",
    did: translator.did,
    privateKey: translator.privateKey,
    database: ":memory:",
    auth: "mesh-sig",
    hubUrl: hub.url,
    handler: async function* ({ message }) {
      for (const word of message.split(" ")) yield `${word === "hello" ? "olá" : word === "world" ? "mundo" : word} `
    }
  })
  yield* registry.registerAgent({ identity: translator, endpointUrl: served.url, manifest: { name: translator.did, meshProtocolVersion: "1.0", capabilities: ["translate"] } })

  // The bridge's identity is registered too, so agents can check its signatures.
  const bridgeIdentity = yield* generateDid("desktop", undefined, "example")
  yield* registry.registerAgent({ identity: bridgeIdentity, endpointUrl: "http://127.0.0.1:9/none", manifest: { name: bridgeIdentity.did, meshProtocolVersion: "1.0", capabilities: [] } })
  const bridge = yield* MeshMcpServer.serveHttp({ hubUrl: hub.url, identity: { did: bridgeIdentity.did, privateKey: bridgeIdentity.privateKey } })
  yield* Console.log(`MCP endpoint ${bridge.url} (hub ${hub.url})`)

  return yield* Effect.promise(async () => {
    const client = new Client({ name: "example-desktop", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(bridge.url)))
    try {
      const found = (await client.callTool({ name: "search_agents", arguments: { query: "translator" } })) as { structuredContent?: { hits?: Array<{ didHash: string; name: string }> } }
      const hit = found.structuredContent?.hits?.[0]
      if (hit === undefined) throw new Error("the translator was not found")
      console.log(`found ${hit.name} (${hit.didHash})`)
      const progress: Array<string> = []
      const called = (await client.callTool({ name: "call_agent", arguments: { didHash: hit.didHash, message: "hello world" } }, undefined, {
        onprogress: (p) => void progress.push(String(p.message))
      })) as { content: Array<{ text?: string }> }
      const reply = called.content.map((c) => c.text ?? "").join("")
      console.log(`progress: ${JSON.stringify(progress)}\nreply: ${reply}`)
      return { found: hit.name, reply, progress }
    } finally {
      await client.close()
    }
  })
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await Effect.runPromise(program)
