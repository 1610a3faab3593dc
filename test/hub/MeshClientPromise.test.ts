import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { generateDid } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { createMeshClient } from "../../src/promise/MeshClientPromise.js"
import { startHub } from "./support.js"

describe("MeshClient Promise facade", () => {
  it.live("registers, resolves and lists; rejects with typed errors matchable on code", () =>
    Effect.gen(function* () {
      const { hub, adminKey } = yield* startHub()
      const alice = yield* generateDid("alice")
      yield* Effect.promise(async () => {
        const client = await createMeshClient({ hubUrl: hub.url, apiKey: adminKey, retry: { times: 0 } })
        try {
          const status = await client.status()
          assert.strictEqual(status.status, "ok")
          const rec = await client.registerAgent({ manifest: { name: "alice", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9", identity: alice })
          assert.strictEqual((await client.resolveAgent(rec.didHash)).did, alice.did)
          assert.strictEqual((await client.listAgents({ limit: 10 })).items.length, 1)
          const err = await client.resolveAgent("nope").then(() => undefined, (e: { code: string }) => e)
          assert.strictEqual(err?.code, "NOT_FOUND")
          const key = await client.requestAgentKey(alice)
          assert.strictEqual(key.did, alice.did)
          // Registration was signed by alice's key; an MCP server without a DID gets one from the client.
          const mcp = await client.registerMcp({ name: "Files", endpointUrl: "http://127.0.0.1:9/mcp", tools: ["read"] })
          assert.match(mcp.did, /^did:mesh:mcp\.files-[0-9a-f]{8}$/)
        } finally {
          await client.close()
        }
      })
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
