/**
 * Liveness: the registry records when each agent was last heard from (registration, update, heartbeat), says whether
 * it is live (within the stale interval), and filters lists and searches by it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { didHash, generateDid, verificationMethodId } from "../../src/core/Did.js"
import type { Keys } from "../../src/core/Keys.js"
import { signMessage } from "../../src/core/Proof.js"
import * as Hub from "../../src/hub/Hub.js"
import * as Registry from "../../src/hub/Registry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, request, startHub } from "./support.js"

const HUB = "http://hub.test"
const ctx: Registry.WriteContext = { hub: HUB, client: "10.0.0.1" }
const admin: Registry.Caller = { keyId: "key_admin", owner: "admin", kind: "admin" }
const stranger: Registry.Caller = { keyId: "key_other", owner: "mallory", kind: "user" }

const withRegistry = <A, E>(f: (registry: Registry.RegistryApi) => Effect.Effect<A, E, Keys>) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(Hub.layerServices({ database: ":memory:" }))
    return yield* f(Context.get(context, Registry.Registry))
  }).pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const register = (registry: Registry.RegistryApi, name: string) =>
  Effect.gen(function* () {
    const identity = yield* generateDid(name)
    const { cid } = yield* registry.pinManifest(admin, { name, meshProtocolVersion: "1.0", description: "liveness probe" }, ctx)
    const fields = { did: identity.did, manifestCID: cid, publicKeyB64: identity.publicKey, endpointUrl: `http://127.0.0.1:9/${name}` }
    const signed = yield* Effect.orDie(
      signMessage(Registry.registrationDocument({ ...fields, hub: HUB }), identity.privateKey, verificationMethodId(identity.did), { proofPurpose: Registry.WRITE_PROOF_PURPOSE })
    ).pipe(Effect.provide(KeysNative.layer))
    return yield* registry.registerAgent(admin, { ...fields, proof: signed.proof }, ctx)
  })

describe("registry liveness", () => {
  it.effect("an agent is live after registering, stale past the interval, live again after a heartbeat by its key", () =>
    withRegistry((registry) =>
      Effect.gen(function* () {
        yield* TestClock.adjust(Duration.seconds(1))
        const alice = yield* register(registry, "alice")
        assert.isTrue(alice.live)
        assert.strictEqual(alice.lastSeenAt, new Date(1000).toISOString())
        assert.isTrue((yield* registry.resolveAgent(alice.didHash)).live)

        yield* TestClock.adjust(Duration.millis(Registry.DEFAULT_STALE_AFTER_MS + 1))
        const stale = yield* registry.resolveAgent(alice.didHash)
        assert.isFalse(stale.live)
        assert.strictEqual(stale.lastSeenAt, alice.lastSeenAt)

        // Only the key that registered the record (here the admin's) may say it is alive.
        const refused = yield* Effect.flip(registry.heartbeat(stranger, alice.didHash))
        assert.strictEqual(refused.code, "NOT_OWNER")
        assert.strictEqual((yield* Effect.flip(registry.heartbeat(admin, "nope"))).code, "NOT_FOUND")
        const beat = yield* registry.heartbeat(admin, alice.didHash)
        assert.isTrue(beat.live)
        assert.strictEqual(beat.staleAfterSeconds, Registry.DEFAULT_STALE_AFTER_MS / 1000)
        assert.isTrue((yield* registry.resolveAgent(alice.didHash)).live)
      })
    ))

  it.effect("list and search filter by liveness; a filtered search returns agents only", () =>
    withRegistry((registry) =>
      Effect.gen(function* () {
        const old = yield* register(registry, "oldprobe")
        yield* TestClock.adjust(Duration.minutes(5))
        const fresh = yield* register(registry, "freshprobe")
        yield* registry.registerMcp(admin, { name: "probe tools", endpointUrl: "http://127.0.0.1:9/mcp", tools: ["probe"], did: "did:mesh:mcp.probe" }, ctx)

        const hashes = (page: { readonly items: ReadonlyArray<{ readonly didHash: string }> }) => page.items.map((a) => a.didHash).sort()
        assert.deepStrictEqual(hashes(yield* registry.listAgents(50)), [old.didHash, fresh.didHash].sort())
        assert.deepStrictEqual(hashes(yield* registry.listAgents(50, undefined, true)), [fresh.didHash])
        assert.deepStrictEqual(hashes(yield* registry.listAgents(50, undefined, false)), [old.didHash])

        const all = yield* registry.search("client", "probe", 50)
        assert.deepStrictEqual(all.map((h) => h.kind).sort(), ["agent", "agent", "mcp"])
        assert.deepStrictEqual(all.filter((h) => h.kind === "agent").map((h) => [h.didHash, h.live]).sort(), [[old.didHash, false], [fresh.didHash, true]].sort())
        assert.deepStrictEqual((yield* registry.search("client", "probe", 50, true)).map((h) => h.didHash), [fresh.didHash])
        assert.deepStrictEqual((yield* registry.search("client", "probe", 50, false)).map((h) => h.didHash), [old.didHash])
      })
    ))

  it.live("over HTTP: the heartbeat needs the registering key; ?live= filters the list", () =>
    Effect.gen(function* () {
      const { hub, adminKey, client } = yield* startHub()
      const { identity, apiKey, record } = yield* registeredAgent(client, "beating")
      assert.isTrue(record.live)
      assert.strictEqual(record.didHash, didHash(identity.did))
      const url = `${hub.url}/v1/agents/${record.didHash}/heartbeat`
      assert.strictEqual((yield* request(url, "POST")).status, 401)
      const other = yield* client.createApiKey({ owner: "someone" })
      const refused = yield* request(url, "POST", undefined, other.apiKey)
      assert.strictEqual(refused.status, 403)
      assert.strictEqual(refused.body.code, "NOT_OWNER")
      const beat = yield* client.heartbeat(record.didHash, apiKey)
      assert.isTrue(beat.live)
      assert.strictEqual((yield* request(url, "POST", undefined, adminKey)).status, 200)
      assert.deepStrictEqual((yield* client.listAgents({ live: true })).items.map((a) => a.didHash), [record.didHash])
      assert.deepStrictEqual((yield* client.listAgents({ live: false })).items, [])
      const bad = yield* request(`${hub.url}/v1/agents?live=maybe`, "GET")
      assert.strictEqual(bad.status, 400)
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
