import { assert, describe, it } from "@effect/vitest"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import * as fs from "node:fs"
import { generateDid, identityFromKey } from "../../src/core/Did.js"
import * as Hub from "../../src/hub/Hub.js"
import { Keys } from "../../src/core/Keys.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import { toBase64, utf8 } from "../../src/core/internal/bytes.js"
import { registeredAgent, request, startHub, statusWithHost } from "./support.js"

/** Advances the TestClock while the fiber waits on it, letting real I/O run in between (bounded). */
const drive = <A, E>(fiber: Fiber.RuntimeFiber<A, E>, step: Duration.DurationInput) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000 && Option.isNone(yield* Fiber.poll(fiber)); i++) {
      yield* TestServices.provideLive(Effect.sleep("10 millis"))
      yield* TestClock.adjust(step)
    }
  })

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

describe("platform API", () => {
  it.live("status reports the platform and its registry", () =>
    provide(
      Effect.gen(function* () {
        const { client } = yield* startHub()
        const pkg = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
        assert.deepStrictEqual(yield* client.status, { status: "ok", version: pkg.version, registry: { reachable: true, mode: "local" } })
      })
    ))

  it.live("the challenge exchange gives an agent an API key that works on the registry", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const agent = yield* generateDid("solo")
        const got = yield* client.requestAgentKey(agent)
        assert.strictEqual(got.did, agent.did)
        // The key registers the agent itself.
        const anon = yield* MeshClient.make({ hubUrl: hub.url, apiKey: got.apiKey, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const rec = yield* anon.registerAgent({ manifest: { name: "solo", meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9", identity: agent })
        assert.strictEqual(rec.did, agent.did)
      })
    ))

  it.live("every refusal of the challenge exchange, with the spec's status and code", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const keys = yield* Keys
        const agent = yield* generateDid("agent")
        const other = yield* generateDid("other")
        const url = (p: string) => `${hub.url}/api/agent-keys${p}`
        const check = (r: { status: number; body: Record<string, unknown> }, status: number, code: string) => {
          assert.strictEqual(r.status, status, JSON.stringify(r.body))
          assert.strictEqual(r.body.code, code)
          assert.strictEqual(typeof r.body.correlationId, "string")
        }
        check(yield* request(url("/challenge"), "POST", "{oops"), 400, "INVALID_JSON")
        check(yield* request(url("/challenge"), "POST", { did: "nope", publicKeyB64: agent.publicKey }), 422, "INVALID_DID")
        check(yield* request(url("/challenge"), "POST", { did: agent.did, publicKeyB64: "abc" }), 422, "INVALID_PUBLIC_KEY")
        // A registered DID is challenged only for the key the registry holds.
        const registered = yield* registeredAgent(client, "registered")
        check(yield* request(url("/challenge"), "POST", { did: registered.identity.did, publicKeyB64: other.publicKey }), 422, "INVALID_PUBLIC_KEY")
        assert.strictEqual((yield* request(url("/challenge"), "POST", { did: registered.identity.did, publicKeyB64: registered.identity.publicKey })).status, 201)
        const ch = (yield* request(url("/challenge"), "POST", { did: agent.did, publicKeyB64: agent.publicKey })).body as { challengeId: string; challenge: string }
        const sign = (text: string, key = agent) => Effect.map(keys.sign(key.privateKey, utf8(text)), toBase64)
        // Signed by another key: refused, and the challenge is spent.
        check(yield* request(url(""), "POST", { challengeId: ch.challengeId, did: agent.did, signature: yield* sign(ch.challenge, other) }), 401, "SIGNATURE_INVALID")
        check(yield* request(url(""), "POST", { challengeId: ch.challengeId, did: agent.did, signature: yield* sign(ch.challenge) }), 401, "CHALLENGE_INVALID")
        // Answered for another DID than it was bound to.
        const ch2 = (yield* request(url("/challenge"), "POST", { did: agent.did, publicKeyB64: agent.publicKey })).body as { challengeId: string; challenge: string }
        check(yield* request(url(""), "POST", { challengeId: ch2.challengeId, did: other.did, signature: yield* sign(ch2.challenge, other) }), 401, "CHALLENGE_INVALID")
        // Unknown challenge; a signature over different text.
        check(yield* request(url(""), "POST", { challengeId: "ch_unknown", did: agent.did, signature: yield* sign("x") }), 401, "CHALLENGE_INVALID")
        const ch3 = (yield* request(url("/challenge"), "POST", { did: agent.did, publicKeyB64: agent.publicKey })).body as { challengeId: string; challenge: string }
        check(yield* request(url(""), "POST", { challengeId: ch3.challengeId, did: agent.did, signature: yield* sign(ch3.challenge + " ") }), 401, "SIGNATURE_INVALID")
        // Used once, never twice.
        const ch4 = (yield* request(url("/challenge"), "POST", { did: agent.did, publicKeyB64: agent.publicKey })).body as { challengeId: string; challenge: string }
        const ok = yield* request(url(""), "POST", { challengeId: ch4.challengeId, did: agent.did, signature: yield* sign(ch4.challenge) })
        assert.strictEqual(ok.status, 201)
        check(yield* request(url(""), "POST", { challengeId: ch4.challengeId, did: agent.did, signature: yield* sign(ch4.challenge) }), 401, "CHALLENGE_INVALID")
      })
    ))

  it.live("malformed bodies get the spec's platform codes: empty is INVALID_JSON, a missing or non-string did INVALID_DID", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub({ rateLimit: { capacity: 1000, perMinute: 1000 } })
        const agent = yield* generateDid("shape")
        const check = (r: { status: number; body: Record<string, unknown> }, status: number, code: string, what: string) => {
          assert.strictEqual(r.status, status, `${what}: ${JSON.stringify(r.body)}`)
          assert.strictEqual(r.body.code, code, what)
          assert.strictEqual(typeof r.body.correlationId, "string", what)
        }
        for (const path of ["/api/agent-keys/challenge", "/api/agent-keys"]) {
          const url = `${hub.url}${path}`
          check(yield* request(url, "POST"), 400, "INVALID_JSON", `${path} empty`)
          check(yield* request(url, "POST", ""), 400, "INVALID_JSON", `${path} empty string`)
          check(yield* request(url, "POST", "{oops"), 400, "INVALID_JSON", `${path} not JSON`)
          for (const body of [{}, { did: 5 }, { did: null }, { did: ["did:mesh:x"] }, { did: "did:web:x" }, [agent.did], "null", "3"]) {
            check(yield* request(url, "POST", body), 422, "INVALID_DID", `${path} ${JSON.stringify(body)}`)
          }
        }
        const challenge = `${hub.url}/api/agent-keys/challenge`
        for (const publicKeyB64 of [undefined, 5, "", "abc"]) {
          check(yield* request(challenge, "POST", { did: agent.did, publicKeyB64 }), 422, "INVALID_PUBLIC_KEY", `publicKeyB64 ${String(publicKeyB64)}`)
        }
        const answer = `${hub.url}/api/agent-keys`
        for (const challengeId of [undefined, 7]) {
          check(yield* request(answer, "POST", { did: agent.did, challengeId, signature: "AAAA" }), 401, "CHALLENGE_INVALID", `challengeId ${String(challengeId)}`)
        }
        for (const signature of [undefined, 7, "%%%"]) {
          const ch = (yield* request(challenge, "POST", { did: agent.did, publicKeyB64: agent.publicKey })).body as { challengeId: string }
          check(yield* request(answer, "POST", { did: agent.did, challengeId: ch.challengeId, signature }), 401, "SIGNATURE_INVALID", `signature ${String(signature)}`)
        }
      })
    ))

  it.live("a challenge answered after the DID's key changed is CHALLENGE_INVALID: rotated, or registered meanwhile with another key", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const keys = yield* Keys
        const url = (p: string) => `${hub.url}/api/agent-keys${p}`
        const ask = (did: string, publicKeyB64: string) =>
          Effect.map(request(url("/challenge"), "POST", { did, publicKeyB64 }), (r) => r.body as { challengeId: string; challenge: string })
        const answer = (ch: { challengeId: string; challenge: string }, who: { did: string; privateKey: Parameters<typeof keys.sign>[0] }) =>
          Effect.flatMap(keys.sign(who.privateKey, utf8(ch.challenge)), (sig) => request(url(""), "POST", { challengeId: ch.challengeId, did: who.did, signature: toBase64(sig) }))

        // Issued under the old key, answered after a rotation.
        const alice = yield* registeredAgent(client, "rotating")
        const before = yield* ask(alice.identity.did, alice.identity.publicKey)
        const next = identityFromKey(alice.identity.did, (yield* generateDid("rotating-next")).privateKey)
        yield* client.rotateAgentKey({ identity: alice.identity, newIdentity: next, apiKey: alice.apiKey })
        const late = yield* answer(before, alice.identity)
        assert.strictEqual(late.status, 401, JSON.stringify(late.body))
        assert.strictEqual(late.body.code, "CHALLENGE_INVALID")
        // The new key gets a challenge and an API key.
        assert.strictEqual((yield* answer(yield* ask(next.did, next.publicKey), next)).status, 201)

        // Issued while the DID was free, answered after someone registered it with another key.
        const squatter = yield* generateDid("contested")
        const early = yield* ask(squatter.did, squatter.publicKey)
        const owner = yield* registeredAgent(client, "contested")
        assert.notStrictEqual(owner.identity.publicKey, squatter.publicKey)
        const refused = yield* answer(early, squatter)
        assert.strictEqual(refused.status, 401, JSON.stringify(refused.body))
        assert.strictEqual(refused.body.code, "CHALLENGE_INVALID")
      })
    ))

  it.effect("a challenge expires after 5 minutes (TestClock drives the hub's clock)", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub()
        const keys = yield* Keys
        const agent = yield* generateDid("late")
        const url = (p: string) => `${hub.url}/api/agent-keys${p}`
        const ask = () => request(url("/challenge"), "POST", { did: agent.did, publicKeyB64: agent.publicKey }).pipe(Effect.map((r) => r.body as { challengeId: string; challenge: string }))
        const answer = (c: { challengeId: string; challenge: string }) =>
          Effect.flatMap(keys.sign(agent.privateKey, utf8(c.challenge)), (sig) => request(url(""), "POST", { challengeId: c.challengeId, did: agent.did, signature: toBase64(sig) }))
        const late = yield* ask()
        yield* TestClock.adjust("5 minutes")
        const r = yield* answer(late)
        assert.strictEqual(r.status, 401)
        assert.strictEqual(r.body.code, "CHALLENGE_INVALID")
        const inTime = yield* ask()
        yield* TestClock.adjust("4 minutes")
        assert.strictEqual((yield* answer(inTime)).status, 201)
      })
    ))

  it.effect("per-address rate limiting: 429 RATE_LIMITED with retryAfterSeconds and Retry-After, refilled on the Clock", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub({ rateLimit: { capacity: 2, perMinute: 6 } })
        const agent = yield* generateDid("busy")
        const ask = request(`${hub.url}/api/agent-keys/challenge`, "POST", { did: agent.did, publicKeyB64: agent.publicKey })
        assert.strictEqual((yield* ask).status, 201)
        assert.strictEqual((yield* ask).status, 201)
        const limited = yield* ask
        assert.strictEqual(limited.status, 429)
        assert.strictEqual(limited.body.code, "RATE_LIMITED")
        assert.strictEqual(limited.body.retryAfterSeconds, 10)
        assert.strictEqual(limited.headers.get("retry-after"), "10")
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual((yield* ask).status, 201)
      })
    ))

  it.live("a platform apart from its registry: works through it, and answers 502 REGISTRY_UNREACHABLE without it", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey } = yield* startHub()
        const platform = yield* Hub.startPlatform({ registryUrl: hub.url, apiKey: adminKey })
        const agent = yield* generateDid("remote")
        const viaPlatform = yield* MeshClient.make({ hubUrl: hub.url, platformUrl: platform.url, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        assert.deepStrictEqual((yield* viaPlatform.status).registry, { reachable: true, mode: "remote" })
        const key = yield* viaPlatform.requestAgentKey(agent)
        assert.strictEqual(key.did, agent.did)

        const orphan = yield* Hub.startPlatform({ registryUrl: "http://127.0.0.1:1", apiKey: adminKey })
        const viaOrphan = yield* MeshClient.make({ hubUrl: orphan.url, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        assert.deepStrictEqual((yield* viaOrphan.status).registry, { reachable: false, mode: "remote" })
        const e = yield* Effect.flip(viaOrphan.requestAgentKey(agent))
        assert.strictEqual(e.code, "REGISTRY_UNREACHABLE")
        // A challenge needs the registry too: a registered DID may only be challenged for its registered key.
        const raw = yield* request(`${orphan.url}/api/agent-keys/challenge`, "POST", { did: agent.did, publicKeyB64: agent.publicKey })
        assert.strictEqual(raw.status, 502)
        assert.strictEqual(raw.body.code, "REGISTRY_UNREACHABLE")
      })
    ))

  it.live("a platform apart takes the serving guards: its allowed host is answered, another name is 421", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey } = yield* startHub()
        const platform = yield* Hub.startPlatform({ registryUrl: hub.url, apiKey: adminKey, serving: { allowedHosts: ["platform.example.test"] } })
        assert.strictEqual(yield* statusWithHost(`${platform.url}/api/status`, "platform.example.test"), 200)
        assert.strictEqual(yield* statusWithHost(`${platform.url}/api/status`, "rebound.example.test"), 421)
      })
    ))

  it.live("a hub answers the host of its publicUrl", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub({ publicUrl: "https://hub.example.test" })
        assert.strictEqual(yield* statusWithHost(`${hub.url}/api/status`, "hub.example.test"), 200)
        assert.strictEqual(yield* statusWithHost(`${hub.url}/api/status`, "rebound.example.test"), 421)
      })
    ))

  it.effect("the client retries REGISTRY_UNREACHABLE with backoff, and RATE_LIMITED after retryAfterSeconds", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub({ rateLimit: { capacity: 1, perMinute: 2 } })
        const agent = yield* generateDid("patient")
        const client = yield* MeshClient.make({ hubUrl: hub.url, retry: { times: 3, baseDelayMs: 100 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const impatient = yield* MeshClient.make({ hubUrl: hub.url, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        assert.strictEqual((yield* Effect.flip(impatient.requestAgentKey(agent))).code, "RATE_LIMITED") // the challenge took the one token
        const fiber = yield* Effect.fork(client.requestAgentKey(agent))
        // Each refusal says retryAfterSeconds = 30; the client waits that long on the Clock before trying again.
        yield* drive(fiber, "30 seconds")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.did, agent.did)

        const dead = yield* MeshClient.make({ hubUrl: "http://127.0.0.1:1", retry: { times: 2, baseDelayMs: 100 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const f2 = yield* Effect.fork(Effect.flip(dead.status))
        yield* drive(f2, "1 second")
        assert.strictEqual((yield* Fiber.join(f2)).code, "REGISTRY_UNREACHABLE")
      })
    ))

  it.effect("the client retries OVERLOADED after retryAfterSeconds: a shed request never ran, so repeating it is safe", () =>
    provide(
      Effect.gen(function* () {
        // The first two requests find the event loop lagging and are shed with 503 OVERLOADED (Retry-After: 1).
        let shed = 2
        const { hub, adminKey } = yield* startHub({ serving: { maxEventLoopLagMs: 100, eventLoopLag: () => (shed-- > 0 ? 1_000 : 0) } })
        const impatient = yield* MeshClient.make({ hubUrl: hub.url, apiKey: adminKey, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
        assert.strictEqual((yield* Effect.flip(impatient.status)).code, "OVERLOADED")
        const client = yield* MeshClient.make({ hubUrl: hub.url, apiKey: adminKey, retry: { times: 3 } }).pipe(Effect.provide(FetchHttpClient.layer))
        const fiber = yield* Effect.fork(client.status)
        yield* drive(fiber, "1 second")
        assert.strictEqual((yield* Fiber.join(fiber)).status, "ok")
        assert.isBelow(shed, 0) // the retry came after the second shed
      })
    ))
})
