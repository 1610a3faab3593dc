/**
 * Regressions for defects a review found: counters shared through a reused jti, capabilities named like built-in
 * object properties, unsigned proof members, unbounded decimal exponents, and an envelope's proof time.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { generateDid } from "../src/core/Did.js"
import { buildEnvelope, validateEnvelope } from "../src/core/Envelope.js"
import { KeyResolver } from "../src/core/KeyResolver.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { attenuateTaskMandate, issueIntentMandate, issueTaskMandate } from "../src/core/Mandate.js"
import { parseUsd } from "../src/core/Money.js"
import { makeMemory } from "../src/core/NonceStore.js"
import { signMessage, verifyMessage } from "../src/core/Proof.js"
import { SpendingGuard } from "../src/core/SpendingGuard.js"
import { TaskGuard } from "../src/core/TaskGuard.js"
import * as TaskStore from "../src/core/TaskStore.js"
import { cast, headerFor, payloadOf, resolverFor, signRaw } from "./support/mandates.js"

const guards = Effect.gen(function* () {
  const parties = yield* cast
  const layer = Layer.mergeAll(SpendingGuard.layer, TaskGuard.layer).pipe(
    Layer.provideMerge(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor(Object.values(parties))), TaskStore.layerMemory, KeysNative.layer))
  )
  return { parties, layer }
})

describe("review regressions", () => {
  it.effect("a mandate of another grantor reusing a jti cannot spend the first mandate's counters", () =>
    Effect.gen(function* () {
      const { parties, layer } = yield* guards
      const { alice, bob, mallory } = parties
      const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 10 } })
      const p = payloadOf(intent.token)
      // Mallory signs her own root with Alice's jti and a huge limit, and spends under it.
      const forged = yield* signRaw(headerFor(mallory.did), { ...p, iss: mallory.did, aud: mallory.did, cns: { spendLimitUsd: 999_999 } }, mallory.key)
      yield* Effect.provide(
        Effect.gen(function* () {
          yield* SpendingGuard.authorize(forged, { amountUsd: 100, merchant: "shop", presenter: mallory.did })
          const ok = yield* SpendingGuard.authorize(intent.token, { amountUsd: 1, merchant: "shop", presenter: bob.did })
          assert.strictEqual(ok.amountMicros, 1_000_000)
        }),
        layer
      )
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("capabilities named like Object.prototype members are plain names", () =>
    Effect.gen(function* () {
      const { parties, layer } = yield* guards
      const { alice, bob } = parties
      const task = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["toString", "constructor"], maxDelegationDepth: 1 } })
      yield* Effect.provide(TaskGuard.check(task.token, { presenter: bob.did, capability: "toString", reversible: true, sandboxed: true }), layer)
      // A child that drops a parent's limit on "constructor" is wider, and is refused at issue time.
      const limited = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["constructor"], actionLimits: { constructor: 1 }, maxDelegationDepth: 1 } })
      const wider = yield* Effect.either(attenuateTaskMandate({ parent: limited, granteeDid: parties.carol.did, grantorPrivateKey: bob.key, constraints: { allowed: ["constructor"], actionLimits: {}, maxDelegationDepth: 0 } }))
      assert.isTrue(Either.isLeft(wider) && wider.left.code === "ATTENUATION_WIDENED", JSON.stringify(wider))
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a proof member added after signing is covered by the signature", () =>
    Effect.gen(function* () {
      const id = yield* generateDid("signer")
      const signed = yield* signMessage({ a: 1 }, id.privateKey, `${id.did}#key-1`)
      const injected = { ...signed, proof: { ...signed.proof, challenge: "injected" } }
      const e = yield* Effect.flip(verifyMessage(injected, id.publicKeyBytes))
      assert.strictEqual(e.code, "SIGNATURE_INVALID")
    }).pipe(Effect.provide(KeysNative.layer)))

  it("an amount with a huge exponent is refused, not expanded", () => {
    for (const s of ["1e-900000000", "1e900000000", "1e31"]) assert.isTrue(Either.isLeft(parseUsd(s)), s)
    assert.strictEqual(Either.getOrThrow(parseUsd("15e-1")), 1_500_000)
  })

  it.effect("an envelope whose proof time differs from createdAt is MALFORMED", () =>
    Effect.gen(function* () {
      const alice = yield* generateDid("alice")
      const bob = yield* generateDid("bob")
      const env = yield* buildEnvelope({ type: "MeshRequest", from: alice.did, to: bob.did, body: {}, privateKey: alice.privateKey })
      const e = yield* Effect.flip(validateEnvelope({ ...env, proof: { ...env.proof, created: "2020-01-01T00:00:00.000Z" } }, alice.publicKeyBytes, bob.did, makeMemory()))
      assert.strictEqual(e.code, "MALFORMED")
    }).pipe(Effect.provide(KeysNative.layer)))
})
