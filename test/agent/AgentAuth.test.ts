import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { httpbis } from "http-message-signatures"
import { createHash, createPrivateKey, sign as nodeSign } from "node:crypto"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { post, readSse } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const whoami: AgentServer.Handler = ({ caller }) => `${caller.auth}:${caller.did ?? caller.principal}`

/** A POST to /v1/run signed with mesh-sig as `as`; the exact bytes and headers, so a test can replay or alter them. */
const signedRun = (url: string, as: MeshIdentity, body: unknown) =>
  Effect.gen(function* () {
    const bytes = new TextEncoder().encode(JSON.stringify(body))
    const headers = yield* signRequest({ method: "POST", url: `${url}/v1/run`, body: bytes }, { privateKey: as.privateKey, keyId: verificationMethodId(as.did) })
    return { bytes, headers: { ...headers } as Record<string, string> }
  })

const send = (url: string, bytes: Uint8Array | string, headers: Record<string, string>) =>
  post(`${url}/v1/run`, typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes), headers)

describe("agent server auth", () => {
  it.live("bearer: a set of tokens, compared in constant time; missing 401 AUTH_REQUIRED, wrong 401 INVALID_TOKEN", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({ name: "bearer-agent", handler: whoami, auth: "bearer", bearerTokens: ["t-one", "t-two"], database: ":memory:" })
        const missing = yield* post(`${agent.url}/v1/run`, { message: "x" })
        assert.strictEqual(missing.status, 401)
        assert.strictEqual(missing.body.code, "AUTH_REQUIRED")
        const wrong = yield* post(`${agent.url}/v1/run`, { message: "x" }, { authorization: "Bearer t-three" })
        assert.strictEqual(wrong.status, 401)
        assert.strictEqual(wrong.body.code, "INVALID_TOKEN")
        const ok = yield* post(`${agent.url}/v1/run`, { message: "x" }, { authorization: "Bearer t-two" })
        assert.strictEqual(ok.status, 200)
        assert.match(ok.body.message, /^bearer:bearer:[0-9a-f]{16}$/)
        // Health and discovery stay open.
        assert.strictEqual((yield* Effect.promise(() => fetch(`${agent.url}/health`))).status, 200)
      })
    ))

  it.live("bearer: a verify function (sync or async); one that throws refuses", () =>
    provide(
      Effect.gen(function* () {
        const agent = yield* AgentServer.make({
          name: "bearer-verify",
          handler: whoami,
          auth: "bearer",
          database: ":memory:",
          verifyBearer: async (token) => {
            if (token === "explode") throw new Error("verifier down")
            return token.startsWith("good-")
          }
        })
        assert.strictEqual((yield* post(`${agent.url}/v1/run`, { message: "x" }, { authorization: "Bearer good-1" })).status, 200)
        assert.strictEqual((yield* post(`${agent.url}/v1/run`, { message: "x" }, { authorization: "Bearer bad-1" })).body.code, "INVALID_TOKEN")
        assert.strictEqual((yield* post(`${agent.url}/v1/run`, { message: "x" }, { authorization: "Bearer explode" })).body.code, "INVALID_TOKEN")
      })
    ))

  it.live("mesh-sig: a verifiable caller reaches the handler with its DID; unsigned, unknown, tampered and replayed requests are refused", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const stranger = yield* generateDid("stranger")
        const agent = yield* AgentServer.make({
          name: "signed-agent",
          handler: whoami,
          auth: "mesh-sig",
          database: ":memory:",
          resolveCallerKey: (did) => (did === alice.did ? alice.publicKey : null)
        })
        const signed = yield* signedRun(agent.url, alice, { message: "hi" })
        const ok = yield* send(agent.url, signed.bytes, signed.headers)
        assert.strictEqual(ok.status, 200, JSON.stringify(ok.body))
        assert.strictEqual(ok.body.message, "mesh-sig:did:mesh:alice")

        const replay = yield* send(agent.url, signed.bytes, signed.headers)
        assert.strictEqual(replay.status, 401)
        assert.strictEqual(replay.body.code, "REPLAYED")

        const unsigned = yield* post(`${agent.url}/v1/run`, { message: "hi" })
        assert.strictEqual(unsigned.status, 401)
        assert.strictEqual(unsigned.body.code, "SIGNATURE_MISSING")

        const fresh = yield* signedRun(agent.url, alice, { message: "hi" })
        const tampered = yield* send(agent.url, JSON.stringify({ message: "pay mallory" }), fresh.headers)
        assert.strictEqual(tampered.status, 401)
        assert.strictEqual(tampered.body.code, "DIGEST_MISMATCH")

        const unknown = yield* signedRun(agent.url, stranger, { message: "hi" })
        const refused = yield* send(agent.url, unknown.bytes, unknown.headers)
        assert.strictEqual(refused.status, 401)
        assert.strictEqual(refused.body.code, "KEY_NOT_FOUND")

        // Signed for another address: the target URI is covered.
        const elsewhere = yield* signedRun("http://127.0.0.1:1", alice, { message: "hi" })
        assert.strictEqual((yield* send(agent.url, elsewhere.bytes, elsewhere.headers)).body.code, "SIGNATURE_INVALID")
      })
    ))

  it.live("mesh-sig: a resolveCallerKey that answers undefined (a Map miss) or no key at all refuses 401 KEY_NOT_FOUND, not 500", () =>
    provide(
      Effect.gen(function* () {
        const known = yield* generateDid("known")
        const missing = yield* generateDid("missing")
        const odd = yield* generateDid("odd")
        const keys = new Map([[known.did as string, known.publicKey]])
        const agent = yield* AgentServer.make({
          name: "map-agent",
          handler: whoami,
          auth: "mesh-sig",
          database: ":memory:",
          // As plain JavaScript may write it: a Map's miss, and a value that is no key.
          resolveCallerKey: ((did: string) => (did === odd.did ? 42 : keys.get(did))) as AgentServer.ResolveCallerKey
        })
        const ok = yield* signedRun(agent.url, known, { message: "hi" })
        assert.strictEqual((yield* send(agent.url, ok.bytes, ok.headers)).status, 200)
        for (const who of [missing, odd]) {
          const r = yield* signedRun(agent.url, who, { message: "hi" })
          const refused = yield* send(agent.url, r.bytes, r.headers)
          assert.strictEqual(refused.status, 401, JSON.stringify(refused.body))
          assert.strictEqual(refused.body.code, "KEY_NOT_FOUND")
        }
      })
    ))

  it.live("mesh-sig: a stream reconnect must be signed afresh; one reusing the first request's signature is 401 REPLAYED", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const agent = yield* AgentServer.make({
          name: "signed-stream",
          auth: "mesh-sig",
          database: ":memory:",
          resolveCallerKey: (did) => (did === alice.did ? alice.publicKey : null),
          handler: async function* () {
            yield "a"
            yield "b"
          }
        })
        const body = { message: "go" }
        const first = yield* signedRun(agent.url, alice, body)
        const started = yield* readSse(`${agent.url}/v1/run`, body, first.headers, () => true)
        assert.strictEqual(started.status, 200)
        const last = started.events[0]!.id

        const reused = yield* readSse(`${agent.url}/v1/run`, body, { ...first.headers, "last-event-id": last })
        assert.strictEqual(reused.status, 401)
        assert.strictEqual(reused.body.code, "REPLAYED")

        const fresh = yield* signedRun(agent.url, alice, body)
        const resumed = yield* readSse(`${agent.url}/v1/run`, body, { ...fresh.headers, "last-event-id": last })
        assert.strictEqual(resumed.status, 200)
        assert.deepStrictEqual(resumed.events.map((e) => e.event), ["chunk", "done"])
      })
    ))

  it.live("mesh-sig with allowedCallers: other verifiable callers get 403 CALLER_NOT_ALLOWED", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const bob = yield* generateDid("bob")
        const keys: Record<string, string> = { [alice.did]: alice.publicKey, [bob.did]: bob.publicKey }
        const looked: Array<string> = []
        const agent = yield* AgentServer.make({
          name: "signed-agent",
          handler: whoami,
          auth: "mesh-sig",
          database: ":memory:",
          allowedCallers: ["did:mesh:ALICE"],
          resolveCallerKey: async (did) => {
            looked.push(did)
            return keys[did] ?? null
          }
        })
        const a = yield* signedRun(agent.url, alice, { message: "hi" })
        assert.strictEqual((yield* send(agent.url, a.bytes, a.headers)).status, 200)
        const b = yield* signedRun(agent.url, bob, { message: "hi" })
        const refused = yield* send(agent.url, b.bytes, b.headers)
        assert.strictEqual(refused.status, 403)
        assert.strictEqual(refused.body.code, "CALLER_NOT_ALLOWED")
        // The allow-list is asked before any key lookup: Bob's request never reached the resolver.
        assert.deepStrictEqual(looked, [alice.did])
      })
    ))

  it.live("interop: a request signed by the stock http-message-signatures library is accepted", () =>
    provide(
      Effect.gen(function* () {
        const alice = yield* generateDid("alice")
        const agent = yield* AgentServer.make({
          name: "signed-agent",
          handler: whoami,
          auth: "mesh-sig",
          database: ":memory:",
          resolveCallerKey: (did) => (did === alice.did ? alice.publicKeyBytes : null)
        })
        const body = JSON.stringify({ message: "from a stock library" })
        const key = createPrivateKey({ key: Buffer.from(alice.privateKey.toPkcs8()), format: "der", type: "pkcs8" })
        const now = new Date(yield* Clock.currentTimeMillis)
        const signed = yield* Effect.promise(() =>
          httpbis.signMessage(
            {
              key: { id: verificationMethodId(alice.did), alg: "ed25519", sign: async (data) => nodeSign(null, data, key) },
              fields: ["@method", "@target-uri", "content-digest"],
              params: ["created", "expires", "nonce", "alg", "keyid", "tag"],
              paramValues: { created: now, expires: new Date(now.getTime() + 60_000), nonce: "stock-library-nonce-1", tag: "mesh-sig" }
            },
            {
              method: "POST",
              url: `${agent.url}/v1/run`,
              headers: { "content-type": "application/json", "content-digest": `sha-256=:${createHash("sha256").update(body).digest("base64")}:` }
            }
          )
        )
        const r = yield* send(agent.url, body, signed.headers as Record<string, string>)
        assert.strictEqual(r.status, 200, JSON.stringify(r.body))
        assert.strictEqual(r.body.message, "mesh-sig:did:mesh:alice")
      })
    ))
})
