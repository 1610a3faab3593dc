/**
 * The registry and the platform fail with errors named after what happened, each with the spec's code and no HTTP
 * status (called as services over SQLite `:memory:`); the hub's HTTP surface still answers each with the same status
 * and body as before.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import { Keys } from "../../src/core/Keys.js"
import { signMessage } from "../../src/core/Proof.js"
import { toBase64, utf8 } from "../../src/core/internal/bytes.js"
import * as Hub from "../../src/hub/Hub.js"
import * as Platform from "../../src/hub/Platform.js"
import * as Registry from "../../src/hub/Registry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { request, startHub } from "./support.js"

const HUB = "http://hub.test"
const ctx: Registry.WriteContext = { hub: HUB, client: "10.0.0.1" }
const admin: Registry.Caller = { keyId: "key_admin", owner: "admin", kind: "admin" }
const manifest = { name: "probe", meshProtocolVersion: "1.0" }

/** The registry and platform of a hub over SQLite `:memory:`, built by `Hub.layerServices`. */
const services = Hub.layerServices({
  database: ":memory:",
  rateLimit: { capacity: 1, perMinute: 1 },
  limits: { maxNameLength: 8, searchRateLimit: { capacity: 1, perMinute: 1 } }
})

const withServices = <A, E>(f: (s: { registry: Registry.RegistryApi; platform: Platform.PlatformApi }) => Effect.Effect<A, E, Keys>) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(services)
    return yield* f({ registry: Context.get(context, Registry.Registry), platform: Context.get(context, Platform.Platform) })
  }).pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A registration of `identity` with a proof for `HUB`, over a pinned manifest. */
const registration = (registry: Registry.RegistryApi, identity: MeshIdentity) =>
  Effect.gen(function* () {
    const { cid } = yield* registry.pinManifest(admin, manifest, ctx)
    const fields = { did: identity.did, manifestCID: cid, publicKeyB64: identity.publicKey, endpointUrl: "http://127.0.0.1:9/a" }
    const signed = yield* Effect.orDie(
      signMessage(Registry.registrationDocument({ ...fields, hub: HUB }), identity.privateKey, verificationMethodId(identity.did), { proofPurpose: Registry.WRITE_PROOF_PURPOSE })
    )
    return { ...fields, proof: signed.proof }
  })

/** The failure's tag and code, the two things a caller matches on. */
const tagAndCode = (e: { readonly _tag: string; readonly code: string }) => [e._tag, e.code]

describe("Registry fails with domain errors", () => {
  it.effect("an unknown API key is InvalidApiKey; a known one authenticates as a Caller, not a key row", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.authenticate("mk_nope"))), ["InvalidApiKey", "INVALID_API_KEY"])
        const created = yield* registry.createApiKey("carol", "user", "ci")
        assert.deepStrictEqual(yield* registry.authenticate(created.apiKey), { keyId: created.id, owner: "carol", kind: "user" })
      })
    ))

  it.effect("only the admin issues keys (AdminRequired); a DID owner gets an agent key", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        const user: Registry.Caller = { keyId: "key_u", owner: "carol", kind: "user" }
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.issueApiKey(user, "dave"))), ["AdminRequired", "ADMIN_REQUIRED"])
        assert.strictEqual((yield* registry.issueApiKey(admin, "did:mesh:abc")).kind, "agent")
        assert.strictEqual((yield* registry.issueApiKey(admin, "dave")).kind, "user")
      })
    ))

  it.effect("revoking: ApiKeyNotFound, NotOwner for another's key, ApiKeyAlreadyRevoked the second time", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.revokeApiKey(admin, "key_missing"))), ["ApiKeyNotFound", "NOT_FOUND"])
        const key = yield* registry.createApiKey("carol", "user")
        const other: Registry.Caller = { keyId: "key_other", owner: "carol", kind: "user" }
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.revokeApiKey(other, key.id))), ["NotOwner", "NOT_OWNER"])
        yield* registry.revokeApiKey({ keyId: key.id, owner: "carol", kind: "user" }, key.id)
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.revokeApiKey(admin, key.id))), ["ApiKeyAlreadyRevoked", "ALREADY_REVOKED"])
      })
    ))

  it.effect("manifests: InvalidManifest, ManifestNotFound, ManifestNotPinned", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.pinManifest(admin, [], ctx))), ["InvalidManifest", "INVALID_MANIFEST"])
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.manifest("bafkrei-none"))), ["ManifestNotFound", "NOT_FOUND"])
        const agent = yield* generateDid("unpinned")
        const input = { ...(yield* registration(registry, agent)), manifestCID: "bafkrei-none" }
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.registerAgent(admin, input, ctx))), ["ManifestNotPinned", "MANIFEST_NOT_PINNED"])
      })
    ))

  it.effect("registering an agent: InvalidDid, InvalidPublicKey, InvalidEndpoint, InvalidSignature, then DidTaken", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        const agent = yield* generateDid("probe")
        const input = yield* registration(registry, agent)
        const refusal = (patch: { readonly did?: string; readonly publicKeyB64?: string; readonly endpointUrl?: string }, c: Registry.WriteContext = ctx) => Effect.map(Effect.flip(registry.registerAgent(admin, { ...input, ...patch }, c)), tagAndCode)
        assert.deepStrictEqual(yield* refusal({ did: "did:web:x" }), ["InvalidDid", "INVALID_DID"])
        assert.deepStrictEqual(yield* refusal({ publicKeyB64: "AAAA" }), ["InvalidPublicKey", "INVALID_PUBLIC_KEY"])
        assert.deepStrictEqual(yield* refusal({ endpointUrl: "ftp://x" }), ["InvalidEndpoint", "INVALID_ENDPOINT"])
        assert.deepStrictEqual(yield* refusal({}, { hub: "http://other.test", client: "10.0.0.1" }), ["InvalidSignature", "SIGNATURE_INVALID"])
        const record = yield* registry.registerAgent(admin, input, ctx)
        assert.strictEqual(record.did, agent.did)
        // A fresh proof (a second later), so it is the DID that is refused, not a replayed proof.
        yield* TestClock.adjust("1 second")
        const again = yield* registration(registry, agent)
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.registerAgent(admin, again, ctx))), ["DidTaken", "DID_TAKEN"])
      })
    ))

  it.effect("a key issued to one DID registering another is NotOwner; unknown records are EntryNotFound with their kind", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        const agent = yield* generateDid("probe")
        const bound: Registry.Caller = { keyId: "key_bound", owner: "did:mesh:someone-else", kind: "agent" }
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.registerAgent(bound, yield* registration(registry, agent), ctx))), ["NotOwner", "NOT_OWNER"])
        const missing = yield* Effect.flip(registry.resolveMcp("nohash"))
        assert.deepStrictEqual([...tagAndCode(missing), missing._tag === "EntryNotFound" ? missing.kind : undefined], ["EntryNotFound", "NOT_FOUND", "mcp"])
      })
    ))

  it.effect("the resolver: InvalidDid for a malformed DID, DidNotRegistered for an unknown one", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.resolveDid("not-a-did"))), ["InvalidDid", "INVALID_DID"])
        const agent = yield* generateDid("nobody")
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.resolveDid(agent.did))), ["DidNotRegistered", "NOT_FOUND"])
      })
    ))

  it.effect("size and search limits: RecordTooLarge, InvalidQuery, LimitReached with when to retry", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        const agent = yield* generateDid("owner")
        const skill = registry.registerSkill(admin, { name: "a-name-too-long", did: `${agent.did}.skill` }, ctx)
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(skill)), ["RecordTooLarge", "PAYLOAD_TOO_LARGE"])
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.search("10.0.0.2", "ab", 10))), ["InvalidQuery", "INVALID_REQUEST"])
        const limited = yield* Effect.flip(registry.search("10.0.0.2", "probe", 10))
        assert.deepStrictEqual(tagAndCode(limited), ["LimitReached", "RATE_LIMITED"])
        assert.isAbove(limited._tag === "LimitReached" ? limited.retryAfterSeconds : 0, 0)
      })
    ))

  it.effect("mandate revocation: MalformedRevocation without its fields, DidNotRegistered for an unknown grantor", () =>
    withServices(({ registry }) =>
      Effect.gen(function* () {
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.revokeMandate({}))), ["MalformedRevocation", "MISSING_FIELD"])
        const grantor = yield* generateDid("grantor")
        const signed = { type: "MandateRevocation", jti: "j1", grantor: grantor.did, proof: {} }
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(registry.revokeMandate(signed))), ["DidNotRegistered", "NOT_FOUND"])
      })
    ))
})

describe("Platform fails with domain errors", () => {
  it.effect("the challenge: EmptyBody, InvalidDid, InvalidPublicKey, then LimitReached past the address's limit", () =>
    withServices(({ platform }) =>
      Effect.gen(function* () {
        // The limit is one request per address, so each refusal comes from its own address.
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(platform.challenge("10.0.1.1", undefined))), ["EmptyBody", "INVALID_JSON"])
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(platform.challenge("10.0.1.2", { did: "nope" }))), ["InvalidDid", "INVALID_DID"])
        const agent = yield* generateDid("agent")
        const weak = platform.challenge("10.0.1.3", { did: agent.did, publicKeyB64: "AAAA" })
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(weak)), ["InvalidPublicKey", "INVALID_PUBLIC_KEY"])
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(platform.challenge("10.0.1.3", undefined))), ["LimitReached", "RATE_LIMITED"])
      })
    ))

  it.effect("the answer: InvalidChallenge for an unknown challenge, InvalidSignature for a wrong signature", () =>
    withServices(({ platform }) =>
      Effect.gen(function* () {
        const agent = yield* generateDid("agent")
        const unknown = platform.agentKey("10.0.2.1", { challengeId: "ch_none", did: agent.did, signature: "AAAA" })
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(unknown)), ["InvalidChallenge", "CHALLENGE_INVALID"])
        const ch = yield* platform.challenge("10.0.2.2", { did: agent.did, publicKeyB64: agent.publicKey })
        const keys = yield* Keys
        const wrong = toBase64(yield* keys.sign(agent.privateKey, utf8("something else")))
        const answer = platform.agentKey("10.0.2.3", { challengeId: ch.challengeId, did: agent.did, signature: wrong })
        assert.deepStrictEqual(tagAndCode(yield* Effect.flip(answer)), ["InvalidSignature", "SIGNATURE_INVALID"])
      })
    ))

  it.live("a platform apart from a registry it cannot reach fails with RegistryNotReached", () =>
    Effect.gen(function* () {
      const platform = yield* Platform.Platform
      const agent = yield* generateDid("agent")
      const e = yield* Effect.flip(platform.challenge("10.0.3.1", { did: agent.did, publicKeyB64: agent.publicKey }))
      assert.deepStrictEqual(tagAndCode(e), ["RegistryNotReached", "REGISTRY_UNREACHABLE"])
    }).pipe(
      Effect.provide(Platform.layer().pipe(Layer.provide(Platform.layerRemoteGateway({ registryUrl: "http://127.0.0.1:9", apiKey: "mk_x" })))),
      Effect.provide(KeysNative.layer)
    ))
})

describe("the hub's HTTP surface answers the domain errors as before", () => {
  it.live("the same status, _tag and code for a representative failure of each HTTP class", () =>
    Effect.gen(function* () {
      const { hub, adminKey, client } = yield* startHub()
      const user = yield* client.createApiKey({ owner: "carol" })
      const agent = yield* generateDid("http")
      const seen = [
        yield* request(`${hub.url}/keys`, "POST", { owner: "x" }, "mk_nope"),
        yield* request(`${hub.url}/keys`, "POST", { owner: "x" }, user.apiKey),
        yield* request(`${hub.url}/v1/agents/nohash`, "GET"),
        yield* request(`${hub.url}/v1/dids/not-a-did`, "GET"),
        yield* request(`${hub.url}/v1/search?q=ab`, "GET"),
        yield* request(`${hub.url}/v1/mandates/revocations`, "POST", {}),
        yield* request(`${hub.url}/api/agent-keys`, "POST", { challengeId: "ch_none", did: agent.did, signature: "AAAA" }),
        yield* request(`${hub.url}/keys/${user.id}`, "DELETE", undefined, adminKey),
        yield* request(`${hub.url}/keys/${user.id}`, "DELETE", undefined, adminKey)
      ].map((r) => [r.status, r.body._tag, r.body.code])
      assert.deepStrictEqual(seen, [
        [401, "Unauthorized", "INVALID_API_KEY"],
        [403, "Forbidden", "ADMIN_REQUIRED"],
        [404, "NotFound", "NOT_FOUND"],
        [422, "Unprocessable", "INVALID_DID"],
        [400, "BadRequest", "INVALID_REQUEST"],
        [400, "BadRequest", "MISSING_FIELD"],
        [401, "Unauthorized", "CHALLENGE_INVALID"],
        [204, undefined, undefined],
        [409, "Conflict", "ALREADY_REVOKED"]
      ])
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
