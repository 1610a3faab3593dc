import { assert, describe, it } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as AgentWeb from "../../src/agent/AgentWeb.js"
import { keygen } from "../../src/cli/Cli.js"
import { generateDid } from "../../src/core/Did.js"
import { csprng, Entropy, layerSeeded, requireCsprng, seeded, SeededEntropyRefused, uuidV7, xoshiro128ss } from "../../src/core/Entropy.js"
import { buildEnvelope } from "../../src/core/Envelope.js"
import { Keys } from "../../src/core/Keys.js"
import { KeyResolver, makeStatic } from "../../src/core/KeyResolver.js"
import { attenuateToCart, issueIntentMandate } from "../../src/core/Mandate.js"
import * as Hub from "../../src/hub/Hub.js"
import * as Ledger from "../../src/hub/Ledger.js"
import { Registry } from "../../src/hub/Registry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as Database from "../../src/sql/Database.js"

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** What a run makes through the real call paths: a key pair, a DID, a mandate and an envelope. */
const made = Effect.gen(function* () {
  const alice = yield* generateDid("alice")
  const bob = yield* generateDid("bob")
  const mandate = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, constraints: { spendLimitUsd: 10 }, privateKey: alice.privateKey })
  const envelope = yield* buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body: { q: 1 }, privateKey: alice.privateKey })
  return { alice: alice.publicKey, bob: bob.publicKey, jti: mandate.jti, envelope }
})

const withSeed = (seed: number, keys: typeof KeysNative.layer = KeysNative.layer) => made.pipe(Effect.provide(Layer.merge(keys, layerSeeded(seed))))

const defectOf = <A, E>(exit: Exit.Exit<A, E>): unknown =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined

describe("Entropy: the seeded generator", () => {
  it("is xoshiro128** (the reference outputs of state 1, 2, 3, 4)", () => {
    const next = xoshiro128ss([1, 2, 3, 4])
    assert.deepStrictEqual([next(), next(), next()], [11520, 0, 5927040])
  })

  it("gives the same bytes and UUIDs for the same seed, in the same order", () => {
    const a = seeded(42)
    const b = seeded(42)
    assert.deepStrictEqual([a.bytes(7), a.uuid(), a.nonceBytes(16)], [b.bytes(7), b.uuid(), b.nonceBytes(16)])
  })

  it("gives other bytes for another seed, the high 32 bits of a seed included", () => {
    assert.notDeepEqual(seeded(1).bytes(32), seeded(2).bytes(32))
    assert.notDeepEqual(seeded(1).bytes(32), seeded(1 + 2 ** 32).bytes(32))
  })

  it("makes version 4 UUIDs, each different", () => {
    const e = seeded(7)
    const ids = Array.from({ length: 100 }, () => e.uuid())
    for (const id of ids) assert.match(id, UUID_V4)
    assert.strictEqual(new Set(ids).size, ids.length)
  })

  it("makes version 7 UUIDs: the time in the first 48 bits, so later ids sort after earlier ones", () => {
    const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
    const e = seeded(9)
    const t = Date.UTC(2026, 10, 29, 12, 0, 0, 123)
    const ids = Array.from({ length: 200 }, (_, i) => uuidV7(t + Math.floor(i / 3), e))
    for (const id of ids) assert.match(id, UUID_V7)
    assert.strictEqual(parseInt(ids[0]!.replace("-", "").slice(0, 12), 16), t)
    assert.strictEqual(new Set(ids).size, ids.length)
    for (let i = 3; i < ids.length; i += 3) assert.isTrue(ids[i - 1]! < ids[i]!, `${ids[i - 1]} < ${ids[i]}`)
    assert.match(uuidV7(t, csprng), UUID_V7)
  })

  it("refuses a seed that is not a safe integer", () => {
    assert.throws(() => seeded(1.5), RangeError)
    assert.throws(() => seeded(2 ** 53), RangeError)
  })
})

describe("Entropy through the call paths", () => {
  it.effect("the CSPRNG is the default, and two runs differ", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* Entropy).kind, "csprng")
      assert.strictEqual(yield* Entropy, csprng)
      const one = yield* Effect.provide(made, KeysNative.layer)
      const two = yield* Effect.provide(made, KeysNative.layer)
      assert.notStrictEqual(one.alice, two.alice)
      assert.notStrictEqual(one.jti, two.jti)
      assert.notStrictEqual(one.envelope.nonce, two.envelope.nonce)
    }))

  it.effect("one seed gives the same keys, mandate jti and envelope (id, nonce, correlation id, proof) on both Keys layers", () =>
    Effect.gen(function* () {
      const native = yield* withSeed(2026)
      assert.deepStrictEqual(yield* withSeed(2026), native)
      assert.deepStrictEqual(yield* withSeed(2026, Keys.noble), native)
      assert.match(native.envelope.id, /^urn:uuid:/)
      assert.match(native.envelope.correlationId, UUID_V4)
    }))

  it.effect("another seed gives other keys, jti and envelope ids", () =>
    Effect.gen(function* () {
      const a = yield* withSeed(1)
      const b = yield* withSeed(2)
      assert.notStrictEqual(a.alice, b.alice)
      assert.notStrictEqual(a.jti, b.jti)
      assert.notStrictEqual(a.envelope.id, b.envelope.id)
      assert.notStrictEqual(a.envelope.nonce, b.envelope.nonce)
    }))

  it.effect("the hub's registry makes the same API key for the same seed", () =>
    Effect.gen(function* () {
      const adminKey = (seed: number) =>
        Effect.flatMap(Registry, (r) => r.issueAdminKey).pipe(
          Effect.provide(Hub.layerServices({ database: ":memory:" })),
          Effect.provide(Layer.merge(KeysNative.layer, layerSeeded(seed)))
        )
      const a = yield* adminKey(5)
      const b = yield* adminKey(5)
      const c = yield* adminKey(6)
      assert.deepStrictEqual([a.id, a.apiKey], [b.id, b.apiKey])
      assert.notStrictEqual(a.apiKey, c.apiKey)
    }))

  it.effect("the ledger makes the same allocation id for the same seed", () =>
    Effect.gen(function* () {
      const allocationId = (seed: number) =>
        Effect.gen(function* () {
          const buyer = yield* generateDid("buyer")
          const shopper = yield* generateDid("shopper")
          const merchant = yield* generateDid("merchant")
          const intent = yield* issueIntentMandate({ grantorDid: buyer.did, granteeDid: shopper.did, constraints: { spendLimitUsd: 100 }, privateKey: buyer.privateKey })
          const cart = yield* attenuateToCart({ parent: intent, granteeDid: merchant.did, narrowed: { spendLimitUsd: 40 }, grantorPrivateKey: shopper.privateKey })
          const resolver = makeStatic({ [buyer.did]: { publicKey: buyer.publicKeyBytes, keyVersion: 1 }, [shopper.did]: { publicKey: shopper.publicKeyBytes, keyVersion: 1 } })
          const ledger = Ledger.layer.pipe(Layer.provide(Layer.merge(Database.layer(":memory:"), Layer.succeed(KeyResolver, resolver))))
          return yield* Effect.flatMap(Ledger.Ledger, (l) =>
            Effect.flatMap(l.openPool(shopper.did, intent.token), (pool) => l.allocate(shopper.did, pool.poolId, { childToken: cart.token, idempotencyKey: "cart-1" }))
          ).pipe(Effect.provide(ledger))
        }).pipe(Effect.provide(layerSeeded(seed)), Effect.map((a) => a.allocationId))
      const a = yield* allocationId(11)
      assert.strictEqual(yield* allocationId(11), a)
      assert.notStrictEqual(yield* allocationId(12), a)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.live("an agent served in memory answers with the same session id, correlation id and generated key for the same seed", () =>
    Effect.gen(function* () {
      const run = (seed: number) =>
        Effect.gen(function* () {
          const handler = yield* AgentWeb.make({ name: "echo", handler: ({ message }) => message, publicUrl: "http://echo.sim" })
          const request = new Request("http://echo.sim/v1/run", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message: "hi" }) })
          const response = yield* Effect.promise(() => handler(request))
          const body = yield* Effect.promise(() => response.json() as Promise<Record<string, unknown>>)
          const health = yield* Effect.promise(() => handler(new Request("http://echo.sim/.well-known/mesh-agent.json")))
          const card = yield* Effect.promise(() => health.json() as Promise<Record<string, unknown>>)
          return { status: response.status, correlationId: response.headers.get("x-correlation-id"), sessionId: body.sessionId, publicKey: card.publicKeyB64 }
        }).pipe(Effect.scoped, Effect.provide(layerSeeded(seed)))
      const a = yield* run(21)
      assert.strictEqual(a.status, 200)
      assert.match(String(a.sessionId), UUID_V4)
      assert.strictEqual(typeof a.publicKey, "string")
      assert.deepStrictEqual(yield* run(21), a)
      const b = yield* run(22)
      assert.notStrictEqual(b.sessionId, a.sessionId)
      assert.notStrictEqual(b.correlationId, a.correlationId)
      assert.notStrictEqual(b.publicKey, a.publicKey)
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("Entropy: production refuses a seeded generator", () => {
  it.effect("requireCsprng passes the CSPRNG and dies on a seeded one, naming the caller", () =>
    Effect.gen(function* () {
      yield* requireCsprng("a test")
      const defect = defectOf(yield* Effect.exit(requireCsprng("a test").pipe(Effect.provide(layerSeeded(1)))))
      assert.instanceOf(defect, SeededEntropyRefused)
      assert.strictEqual((defect as SeededEntropyRefused).where, "a test")
    }))

  it.live("a hub will not listen on a socket with a seeded Entropy", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Hub.start({ database: ":memory:" }).pipe(Effect.provide(layerSeeded(3))))
      const defect = defectOf(exit)
      assert.instanceOf(defect, SeededEntropyRefused)
      assert.strictEqual((defect as SeededEntropyRefused).where, "Serve.make")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))

  it.live("mesh keygen will not write an identity from a seeded Entropy", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        keygen({ name: "seeded", namespace: Option.none(), endpoint: Option.none(), out: Option.some("/nonexistent-dir/never.json"), force: false }).pipe(
          Effect.provide(layerSeeded(4))
        )
      )
      assert.instanceOf(defectOf(exit), SeededEntropyRefused)
    }).pipe(Effect.provide(Layer.merge(KeysNative.layer, NodeContext.layer))))
})
