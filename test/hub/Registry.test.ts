import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { didHash, generateDid, identityFromKey, makeDidDocument } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, registrationBody, request, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("hub registry over HTTP", () => {
  it.live("manifests are content-addressed (CIDv1 raw sha2-256 of the JCS form) and need name and meshProtocolVersion", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey } = yield* startHub()
        assert.strictEqual((yield* request(`${hub.url}/v1/manifests`, "POST", { name: "x", meshProtocolVersion: "1.0" })).status, 401)
        const a = yield* request(`${hub.url}/v1/manifests`, "POST", { name: "x", meshProtocolVersion: "1.0", extra: { b: 1, a: 2 } }, adminKey)
        assert.strictEqual(a.status, 201)
        assert.match(String(a.body.cid), /^bafkrei[a-z2-7]{52}$/)
        // Same content, other key order: same CID.
        const b = yield* request(`${hub.url}/v1/manifests`, "POST", { extra: { a: 2, b: 1 }, meshProtocolVersion: "1.0", name: "x" }, adminKey)
        assert.strictEqual(b.body.cid, a.body.cid)
        const got = yield* request(`${hub.url}/v1/manifests/${a.body.cid}`, "GET")
        assert.deepStrictEqual(got.body, { extra: { a: 2, b: 1 }, meshProtocolVersion: "1.0", name: "x" })
        for (const bad of [{ name: "x" }, { name: "", meshProtocolVersion: "1.0" }, { name: "x", meshProtocolVersion: "2.0" }, [1]]) {
          const r = yield* request(`${hub.url}/v1/manifests`, "POST", bad, adminKey)
          assert.strictEqual(r.status, 422, JSON.stringify(bad))
          assert.strictEqual(r.body.code, "INVALID_MANIFEST")
        }
        const missing = yield* request(`${hub.url}/v1/manifests/bafkreinothere`, "GET")
        assert.strictEqual(missing.status, 404)
        assert.strictEqual(missing.body.code, "NOT_FOUND")
      })
    ))

  it.live("register, resolve, list, update, rotate and delete an agent, with every refusal code", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey, client } = yield* startHub()
        const { identity, apiKey, record } = yield* registeredAgent(client, "alice")
        assert.strictEqual(record.didHash, didHash(identity.did))
        assert.strictEqual(record.keyVersion, 1)
        const resolved = yield* client.resolveAgent(record.didHash)
        assert.strictEqual(resolved.publicKeyB64, identity.publicKey)
        assert.deepStrictEqual<unknown>(resolved.document, makeDidDocument(identity.did, identity.publicKeyBytes, "http://127.0.0.1:9/agent"))
        assert.strictEqual(resolved.endpointUrl, "http://127.0.0.1:9/agent")

        const { cid } = yield* client.pinManifest({ name: "bob", meshProtocolVersion: "1.0" })
        const bob = yield* generateDid("bob")
        const body = yield* registrationBody({ did: bob.did, manifestCID: cid, publicKeyB64: bob.publicKey, endpointUrl: "http://127.0.0.1:9/bob" }, bob, hub.url)
        const url = `${hub.url}/v1/agents`
        const expect = (r: { status: number; body: Record<string, unknown> }, status: number, code: string) => {
          assert.strictEqual(r.status, status, JSON.stringify(r.body))
          assert.strictEqual(r.body.code, code)
          assert.strictEqual(typeof r.body.correlationId, "string")
          assert.strictEqual(typeof r.body.error, "string")
          assert.strictEqual(typeof r.body._tag, "string")
        }
        expect(yield* request(url, "POST", { ...body, did: undefined }, adminKey), 400, "INVALID_REQUEST")
        expect(yield* request(url, "POST", "{ not json", adminKey), 400, "INVALID_JSON")
        expect(yield* request(url, "POST", body), 401, "INVALID_API_KEY")
        expect(yield* request(url, "POST", body, "mk_unknownunknownunknownunknownunknownunknow"), 401, "INVALID_API_KEY")
        expect(yield* request(url, "POST", body, "not-a-key"), 401, "INVALID_API_KEY")
        expect(yield* request(url, "POST", { ...body, did: "did:web:bob" }, adminKey), 422, "INVALID_DID")
        expect(yield* request(url, "POST", { ...body, publicKeyB64: "AAAA" }, adminKey), 422, "INVALID_PUBLIC_KEY")
        expect(yield* request(url, "POST", { ...body, manifestCID: "bafkreinotpinned" }, adminKey), 422, "MANIFEST_NOT_PINNED")
        expect(yield* request(url, "POST", { ...body, endpointUrl: "ftp://x" }, adminKey), 422, "INVALID_ENDPOINT")
        const taken = yield* registrationBody({ did: identity.did, manifestCID: cid, publicKeyB64: bob.publicKey, endpointUrl: "http://127.0.0.1:9/bob" }, identityFromKey(identity.did, bob.privateKey), hub.url)
        expect(yield* request(url, "POST", taken, adminKey), 409, "DID_TAKEN")
        // A revoked key is refused.
        const temp = yield* client.createApiKey({ owner: "temp" })
        yield* client.revokeApiKey(temp.id)
        expect(yield* request(url, "POST", body, temp.apiKey), 401, "INVALID_API_KEY")

        // Ownership: only the registering key (or the admin) may change the record.
        const other = yield* client.createApiKey({ owner: "mallory" })
        const h = record.didHash
        expect(yield* request(`${url}/${h}`, "PATCH", { endpointUrl: "http://evil" }, other.apiKey), 403, "NOT_OWNER")
        expect(yield* request(`${url}/${h}/key`, "POST", { publicKeyB64: bob.publicKey, newKeyProof: {} }, other.apiKey), 403, "NOT_OWNER")
        expect(yield* request(`${url}/${h}`, "DELETE", undefined, other.apiKey), 403, "NOT_OWNER")
        const updated = yield* client.updateAgent(h, { endpointUrl: "http://127.0.0.1:10/alice" }, { apiKey, identity })
        assert.strictEqual(updated.endpointUrl, "http://127.0.0.1:10/alice")
        const rotated = yield* client.rotateAgentKey({ identity, newIdentity: identityFromKey(identity.did, bob.privateKey), apiKey })
        assert.strictEqual(rotated.keyVersion, 2)
        assert.strictEqual((yield* client.resolveDid(identity.did)).keyVersion, 2)
        yield* client.deleteAgent(h, { apiKey, identity: identityFromKey(identity.did, bob.privateKey) })
        expect(yield* request(`${url}/${h}`, "GET"), 404, "NOT_FOUND")
        expect(yield* request(`${url}/${h}`, "DELETE", undefined, apiKey), 404, "NOT_FOUND")
      })
    ))

  it.live("lists with a limit and a cursor", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub()
        for (const n of ["a1", "a2", "a3", "a4", "a5"]) yield* registeredAgent(client, n)
        const first = yield* client.listAgents({ limit: 2 })
        assert.strictEqual(first.items.length, 2)
        assert.isNotNull(first.nextCursor)
        const second = yield* client.listAgents({ limit: 2, cursor: first.nextCursor! })
        const third = yield* client.listAgents({ limit: 2, cursor: second.nextCursor! })
        const all = [...first.items, ...second.items, ...third.items].map((a) => a.did).sort()
        assert.deepStrictEqual(all, ["did:mesh:a1", "did:mesh:a2", "did:mesh:a3", "did:mesh:a4", "did:mesh:a5"])
        assert.isNull(third.nextCursor)
        // Exactly one full page left: the cursor still says there is no more.
        const exact = yield* client.listAgents({ limit: 5 })
        assert.strictEqual(exact.items.length, 5)
        assert.isNull(exact.nextCursor)
      })
    ))

  it.live("MCP servers and skills register, resolve and list; search finds agents, tools and skill types", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub()
        yield* registeredAgent(client, "translator")
        const mcp = yield* client.registerMcp({ name: "Files", endpointUrl: "http://127.0.0.1:9/mcp", tools: ["read_file", { name: "write_file", inputSchema: { type: "object" } }] })
        assert.match(mcp.did, /^did:mesh:mcp\.files-[0-9a-f]{8}$/)
        assert.deepStrictEqual(mcp.tools, [{ name: "read_file" }, { name: "write_file", inputSchema: { type: "object" } }])
        assert.deepStrictEqual(yield* client.resolveMcp(mcp.didHash), mcp)
        const named = yield* client.registerMcp({ name: "Named", endpointUrl: "http://127.0.0.1:9/mcp2", tools: [], did: "did:mesh:mcp.named" })
        assert.strictEqual(named.did, "did:mesh:mcp.named")
        const skill = yield* client.registerSkill({ name: "Web search", skillType: "web-search" })
        const plain = yield* client.registerSkill({ name: "Plain" })
        assert.strictEqual(plain.skillType, "custom")
        assert.deepStrictEqual(yield* client.resolveSkill(skill.didHash), skill)
        const hits = (q: string) => Effect.map(client.search(q), (r) => r.items.map((i) => `${i.kind}:${i.didHash}`))
        assert.include(yield* hits("write_file"), `mcp:${mcp.didHash}`)
        assert.include(yield* hits("web-search"), `skill:${skill.didHash}`)
        assert.include(yield* hits("echo"), `agent:${didHash("did:mesh:translator" as never)}`)
        assert.deepStrictEqual(yield* hits("100%_match"), [])
      })
    ))

  it.live("/keys: the admin creates keys; only the admin may; a key's owner may revoke it", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const k = yield* client.createApiKey({ owner: "carol", label: "ci" })
        assert.match(k.apiKey, /^mk_[A-Za-z0-9_-]{43}$/)
        const r = yield* request(`${hub.url}/keys`, "POST", { owner: "x" }, k.apiKey)
        assert.strictEqual(r.status, 403)
        assert.strictEqual(r.body.code, "ADMIN_REQUIRED")
        const admin = yield* request(`${hub.url}/keys`, "POST", { owner: "admin" }, k.apiKey)
        assert.strictEqual(admin.status, 403)
        // A non-admin key may revoke only itself: not another key of the same owner name, not the admin's.
        const sibling = yield* client.createApiKey({ owner: "carol" })
        const adminRow = yield* request(`${hub.url}/keys/${sibling.id}`, "DELETE", undefined, k.apiKey)
        assert.strictEqual(adminRow.status, 403)
        assert.strictEqual(adminRow.body.code, "NOT_OWNER")
        const self = yield* request(`${hub.url}/keys/${k.id}`, "DELETE", undefined, k.apiKey)
        assert.strictEqual(self.status, 204)
        const again = yield* request(`${hub.url}/keys/${k.id}`, "DELETE", undefined, k.apiKey)
        assert.strictEqual(again.status, 401)
      })
    ))

  it.live("serves the OpenAPI document and a browsable docs page from the same contract", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub()
        const doc = yield* request(`${hub.url}/openapi.json`, "GET")
        const paths = Object.keys(doc.body.paths as object)
        for (const p of ["/v1/agents", "/v1/agents/{didHash}", "/v1/spending/pools", "/api/agent-keys/challenge", "/keys"]) assert.include(paths, p)
        const page = yield* Effect.promise(() => fetch(`${hub.url}/docs`).then(async (r) => ({ type: r.headers.get("content-type"), text: await r.text() })))
        assert.include(page.type ?? "", "text/html")
        assert.include(page.text, "/v1/agents/{didHash}")
      })
    ))
})
