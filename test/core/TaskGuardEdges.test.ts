import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { KeyResolver } from "../../src/core/KeyResolver.js"
import { attenuateTaskMandate, issueTaskMandate } from "../../src/core/Mandate.js"
import { type TaskAction, TaskGuard } from "../../src/core/TaskGuard.js"
import * as TaskStore from "../../src/core/TaskStore.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { cast, resolverFor } from "../support/mandates.js"

// A clock at a realistic instant (not 0), so a retention horizon off by a factor shows.
const T0 = 1_800_000_000_000

/** The guard over a memory store that also records each charge's and adjustment's retention horizon. */
const spied = Effect.gen(function* () {
  const parties = yield* cast
  const horizons: Array<number> = []
  const inner = TaskStore.makeMemory()
  const store: TaskStore.TaskStoreApi = {
    ...inner,
    charge: (charges, until) => Effect.zipRight(Effect.sync(() => void horizons.push(until)), inner.charge(charges, until)),
    adjust: (adjustments, until) => Effect.zipRight(Effect.sync(() => void horizons.push(until)), inner.adjust(adjustments, until))
  }
  const layer = TaskGuard.layer.pipe(
    Layer.provide(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor(Object.values(parties))), Layer.succeed(TaskStore.TaskStore, store), KeysNative.layer))
  )
  const guard = yield* Effect.provide(TaskGuard, layer)
  return { ...parties, guard, horizons }
}).pipe(Effect.provide(KeysNative.layer))

const codeOf = <A>(e: Effect.Effect<A, { readonly code: string }>) => Effect.map(Effect.flip(e), (x) => x.code)

describe("TaskGuard counters and amounts", () => {
  it.effect("counters are kept until the root of the chain expires, in epoch milliseconds", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, carol, guard, horizons } = yield* spied
      const root = yield* issueTaskMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        ttlSeconds: 7_200,
        constraints: { allowed: ["search"], actionLimits: { search: 5 }, computeLimit: { llmTokens: 100 }, maxDelegationDepth: 1 }
      }).pipe(Effect.provide(KeysNative.layer))
      const child = yield* attenuateTaskMandate({
        parent: root,
        granteeDid: carol.did,
        grantorPrivateKey: bob.key,
        ttlSeconds: 600,
        constraints: { allowed: ["search"], actionLimits: { search: 2 }, computeLimit: { llmTokens: 50 }, maxDelegationDepth: 0 }
      }).pipe(Effect.provide(KeysNative.layer))
      const action: TaskAction = { presenter: carol.did, capability: "search", reversible: true, sandboxed: false }
      yield* guard.check(child.token, action)
      const m = yield* guard.reserveCompute(child.token, carol.did, { llmTokens: 10 })
      yield* guard.settleCompute(m, { llmTokens: 10 }, { llmTokens: 4 })
      const rootExpiryMs = Math.floor(T0 / 1000) * 1000 + 7_200_000
      assert.deepStrictEqual(horizons, [rootExpiryMs, rootExpiryMs, rootExpiryMs])
      assert.strictEqual(root.expiresAt * 1000, rootExpiryMs)
    }))

  it.effect("compute amounts must be non-negative integers, in checks and in reservations; nothing is charged then", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, guard, horizons } = yield* spied
      const m = yield* issueTaskMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        constraints: { allowed: ["search"], computeLimit: { llmTokens: 100, webRequests: 3 }, maxDelegationDepth: 0 }
      }).pipe(Effect.provide(KeysNative.layer))
      const action = (a: Partial<TaskAction>): TaskAction => ({ presenter: bob.did, capability: "search", reversible: true, sandboxed: false, ...a })
      for (const bad of [-1, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        assert.strictEqual(yield* codeOf(guard.check(m.token, action({ llmTokens: bad }))), "COMPUTE_LIMIT_EXCEEDED", `llmTokens ${bad}`)
        assert.strictEqual(yield* codeOf(guard.check(m.token, action({ webRequests: bad }))), "COMPUTE_LIMIT_EXCEEDED", `webRequests ${bad}`)
        assert.strictEqual(yield* codeOf(guard.reserveCompute(m.token, bob.did, { llmTokens: bad })), "COMPUTE_LIMIT_EXCEEDED", `reserve llmTokens ${bad}`)
        assert.strictEqual(yield* codeOf(guard.reserveCompute(m.token, bob.did, { webRequests: bad })), "COMPUTE_LIMIT_EXCEEDED", `reserve webRequests ${bad}`)
      }
      assert.deepStrictEqual(horizons, [])
      // Zero is a valid amount and charges nothing; the whole limit can be reserved, one more cannot.
      yield* guard.check(m.token, action({ llmTokens: 0, webRequests: 0 }))
      yield* guard.reserveCompute(m.token, bob.did, { llmTokens: 100, webRequests: 3 })
      assert.strictEqual(yield* codeOf(guard.reserveCompute(m.token, bob.did, { llmTokens: 1 })), "COMPUTE_LIMIT_EXCEEDED")
      assert.strictEqual(yield* codeOf(guard.check(m.token, action({ webRequests: 1 }))), "COMPUTE_LIMIT_EXCEEDED")
    }))

  it.effect("a reservation is verified for its presenter: another DID's reservation is MANDATE_INVALID", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, carol, guard } = yield* spied
      const m = yield* issueTaskMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        constraints: { allowed: [], computeLimit: { llmTokens: 100 }, maxDelegationDepth: 0 }
      }).pipe(Effect.provide(KeysNative.layer))
      assert.strictEqual(yield* codeOf(guard.reserveCompute(m.token, carol.did, { llmTokens: 1 })), "MANDATE_INVALID")
    }))
})
