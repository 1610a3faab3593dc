import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { runOn, runPromise } from "../src/node/internal/promiseRuntime.js"
import * as Mesh from "../src/promise/Promise.js"

describe("Promise facade", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-promise-"))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  it("generates identities, signs and validates envelopes, answering [valid, reason]", async () => {
    const alice = await Mesh.generateDid("alice", "http://127.0.0.1:1", "acme")
    const bob = await Mesh.generateDid("bob")
    expect(alice.did).toBe("did:mesh:acme.alice")
    expect(Mesh.didHash("DID:MESH:ACME.ALICE")).toBe(Mesh.didHash(alice.did))
    expect(await Mesh.extractPublicKey(alice.document)).toEqual(alice.publicKeyBytes)

    const env = await Mesh.buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body: { capability: "echo", params: {} }, privateKey: alice.privateKey.seed })
    const store = Mesh.createMemoryNonceStore()
    expect(await Mesh.validateEnvelope(env, alice.publicKey, bob.did, store)).toEqual([true, null])
    expect(await Mesh.validateEnvelope(env, alice.publicKey, bob.did, store)).toEqual([false, "REPLAYED"])
    expect(await Mesh.validateEnvelope({ ...env, to: alice.did }, alice.publicKey, bob.did, store)).toEqual([false, "WRONG_RECIPIENT"])
    expect(await Mesh.validateEnvelope(null, alice.publicKey, bob.did, store)).toEqual([false, "MALFORMED"])
  })

  it("rejects with the typed error, matchable on code", async () => {
    await expect(Mesh.generateDid("not valid")).rejects.toMatchObject({ _tag: "InvalidDid", code: "INVALID_DID" })
    await expect(Mesh.importPrivateKey(new Uint8Array(3))).rejects.toMatchObject({ code: "MALFORMED_KEY" })
    expect(() => Mesh.didHash("nope")).toThrow(expect.objectContaining({ code: "INVALID_DID" }))
    const id = await Mesh.generateDid("eve")
    const revoked = { ...id.document, verificationMethod: [{ ...id.document.verificationMethod[0], revoked: "2026-01-01T00:00:00Z" }] }
    await expect(Mesh.extractPublicKey(revoked)).rejects.toMatchObject({ code: "KEY_REVOKED" })
  })

  it("signMessage / verifyMessage over any JSON object", async () => {
    const id = await Mesh.generateDid("signer")
    const signed = await Mesh.signMessage({ taskId: "t-1", capability: "pay" }, id.privateKey, `${id.did}#key-1`)
    expect(signed.proof.cryptosuite).toBe("eddsa-jcs-2022")
    expect(await Mesh.verifyMessage(signed, id.publicKeyBytes)).toBe(true)
    expect(await Mesh.verifyMessage({ ...signed, capability: "refund" }, id.publicKeyBytes)).toBe(false)
    expect(await Mesh.verifyMessage(signed, id.publicKeyBytes, { verificationMethod: "did:mesh:other#key-1" })).toBe(false)
    expect(typeof Mesh.newCorrelationId()).toBe("string")
  })

  it("a SQLite nonce store refuses a replay after it is closed and reopened", async () => {
    const file = path.join(dir, "nonces.db")
    const alice = await Mesh.generateDid("alice")
    const bob = await Mesh.generateDid("bob")
    const env = await Mesh.buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body: {}, privateKey: alice.privateKey })
    const first = await Mesh.openSqliteNonceStore(file)
    expect(await Mesh.validateEnvelope(env, alice.publicKeyBytes, bob.did, first)).toEqual([true, null])
    await first.close()
    const second = await Mesh.openSqliteNonceStore(file)
    expect(await Mesh.validateEnvelope(env, alice.publicKeyBytes, bob.did, second)).toEqual([false, "REPLAYED"])
    await second.close()
  })

  it("opening a database at an unusable path rejects with DATABASE_ERROR", async () => {
    const blocker = path.join(dir, "file")
    fs.writeFileSync(blocker, "")
    await expect(Mesh.openSqliteNonceStore(path.join(blocker, "sub", "x.db"))).rejects.toMatchObject({ code: "DATABASE_ERROR" })
  })
})

describe("Promise runner (one for every facade)", () => {
  class Refused extends Data.TaggedError("Refused")<{ readonly code: "REFUSED" }> {}

  it("resolves with the value; rejects with the typed error itself, not a FiberFailure", async () => {
    expect(await runPromise(Effect.succeed(1))).toBe(1)
    const failed = await runPromise(Effect.fail(new Refused({ code: "REFUSED" }))).then(() => undefined, (e: unknown) => e)
    expect(failed).toBeInstanceOf(Refused)
    const runtime = ManagedRuntime.make(Layer.empty)
    try {
      const onRuntime = await runOn(runtime)(Effect.fail(new Refused({ code: "REFUSED" }))).then(() => undefined, (e: unknown) => e)
      expect(onRuntime).toBeInstanceOf(Refused)
    } finally {
      await runtime.dispose()
    }
  })

  it("rejects a defect with the defect's own value", async () => {
    const boom = new Error("boom")
    await expect(runPromise(Effect.die(boom))).rejects.toBe(boom)
  })
})
