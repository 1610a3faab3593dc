import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { KeyResolver } from "../../src/core/KeyResolver.js"
import { attenuateTaskMandate, issueTaskMandate } from "../../src/core/Mandate.js"
import { type TaskAction, TaskGuard } from "../../src/core/TaskGuard.js"
import * as TaskStore from "../../src/core/TaskStore.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { cast, headerFor, resolverFor, signRaw } from "../support/mandates.js"

// A clock at a realistic instant (not 0), so a retention horizon off by a factor shows.
const T0 = 1_800_000_000_000

/** The guard over a memory store that also records each charge's and adjustment's retention horizon. */
const spied = Effect.gen(function* () {
  const parties = yield* cast
  const horizons: Array<number> = []
  const charged: Array<ReadonlyArray<TaskStore.CounterCharge>> = []
  const adjusted: Array<ReadonlyArray<TaskStore.CounterAdjustment>> = []
  const inner = TaskStore.makeMemory()
  const store: TaskStore.TaskStoreApi = {
    ...inner,
    charge: (charges, until) =>
      Effect.zipRight(Effect.sync(() => void (horizons.push(until), charged.push(charges))), inner.charge(charges, until)),
    adjust: (adjustments, until) =>
      Effect.zipRight(Effect.sync(() => void (horizons.push(until), adjusted.push(adjustments))), inner.adjust(adjustments, until))
  }
  const layer = TaskGuard.layer.pipe(
    Layer.provide(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor(Object.values(parties))), Layer.succeed(TaskStore.TaskStore, store), KeysNative.layer))
  )
  const guard = yield* Effect.provide(TaskGuard, layer)
  return { ...parties, guard, horizons, charged, adjusted }
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

/** A task mandate exactly as another implementation might sign it: only the members given, no defaults written in. */
const rawTask = (cns: Record<string, unknown>) =>
  Effect.gen(function* () {
    const { alice, bob } = yield* cast
    const now = Math.floor(T0 / 1000)
    const payload = { iss: alice.did, aud: bob.did, iat: now, nbf: now, exp: now + 3_600, jti: "rawtaskmandate0000001", kv: 1, kind: "task", cns }
    return yield* signRaw(headerFor(alice.did), payload, alice.key)
  }).pipe(Effect.provide(KeysNative.layer))

const act = (presenter: string, a: Partial<TaskAction> = {}): TaskAction => ({ presenter, capability: "search", reversible: true, sandboxed: false, ...a })

describe("TaskGuard on what reaches the store", () => {
  it.effect("only counted amounts are charged: no limit or a zero amount charges nothing, and the store is not called", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, guard, charged, adjusted } = yield* spied
      const m = yield* issueTaskMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        constraints: { allowed: ["search"], computeLimit: { llmTokens: 100 }, maxDelegationDepth: 0 }
      }).pipe(Effect.provide(KeysNative.layer))
      yield* guard.check(m.token, act(bob.did))
      yield* guard.check(m.token, act(bob.did, { llmTokens: 0 }))
      // webRequests has no limit on this mandate: using some is not counted anywhere.
      yield* guard.check(m.token, act(bob.did, { webRequests: 5 }))
      yield* guard.reserveCompute(m.token, bob.did, { webRequests: 5 })
      assert.deepStrictEqual(charged, [])
      yield* guard.check(m.token, act(bob.did, { llmTokens: 7, webRequests: 2 }))
      assert.deepStrictEqual(charged, [[{ scope: TaskStore.counterScope(m), counter: "compute:llmTokens", amount: 7, limit: 100 }]])
      // Settling exactly what was reserved changes nothing; an unlimited resource is never adjusted.
      yield* guard.settleCompute(m, { llmTokens: 7, webRequests: 2 }, { llmTokens: 7, webRequests: 9 })
      assert.deepStrictEqual(adjusted, [])
      yield* guard.settleCompute(m, { llmTokens: 7 }, { llmTokens: 3 })
      assert.deepStrictEqual(adjusted, [[{ scope: TaskStore.counterScope(m), counter: "compute:llmTokens", delta: -4, limit: 100 }]])
    }))

  it.effect("a mandate signed with only its required members: defaults hold, nothing is counted, nothing throws", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { bob, guard, charged, adjusted } = yield* spied
      const token = yield* rawTask({ allowed: ["search", "send"], maxDelegationDepth: 0 })
      const m = yield* guard.check(token, act(bob.did, { reversible: false, llmTokens: 50, webRequests: 3 }))
      yield* guard.check(token, act(bob.did, { capability: "send" }))
      yield* guard.reserveCompute(token, bob.did, { llmTokens: 10 })
      yield* guard.settleCompute(m, { llmTokens: 10 }, { llmTokens: 500 })
      assert.deepStrictEqual(charged, [])
      assert.deepStrictEqual(adjusted, [])
      // No data access is granted by default, and an unlisted capability is still refused.
      assert.strictEqual(yield* codeOf(guard.check(token, act(bob.did, { dataScopes: ["crm:read"] }))), "DATA_ACCESS_VIOLATION")
      assert.strictEqual(yield* codeOf(guard.check(token, act(bob.did, { capability: "delete" }))), "CAPABILITY_NOT_PERMITTED")
    }))

  it.effect("each refusal names what it refuses: the capability, the data scope, the resource and the limit, the reason", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob, carol, guard } = yield* spied
      const m = yield* issueTaskMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        constraints: {
          allowed: ["search", "send_email", "wipe"],
          blocked: ["wipe"],
          reversibleOnly: true,
          humanGates: ["send_email"],
          actionLimits: { search: 1 },
          computeLimit: { llmTokens: 40 },
          dataAccess: ["crm:read"],
          maxDelegationDepth: 0
        }
      }).pipe(Effect.provide(KeysNative.layer))
      const sandboxed = yield* issueTaskMandate({
        grantorDid: alice.did,
        granteeDid: bob.did,
        privateKey: alice.key,
        constraints: { allowed: ["search"], sandbox: true, maxDelegationDepth: 0 }
      }).pipe(Effect.provide(KeysNative.layer))
      type Refused = Effect.Effect<unknown, { readonly code: string; readonly message: string }>
      const refusal = (e: Refused) => Effect.flip(e)
      const cases: ReadonlyArray<readonly [Refused, string, ReadonlyArray<string>]> = [
        [guard.check(m.token, act(bob.did, { capability: "wipe" })), "CAPABILITY_NOT_PERMITTED", ["wipe", "blocked"]],
        [guard.check(m.token, act(bob.did, { capability: "fly" })), "CAPABILITY_NOT_PERMITTED", ["fly", "not allowed"]],
        [guard.check(m.token, act(bob.did, { reversible: false })), "REVERSIBILITY_VIOLATION", ["search", "irreversible"]],
        [guard.check(sandboxed.token, act(bob.did)), "SANDBOX_REQUIRED", ["sandbox"]],
        [guard.check(m.token, act(bob.did, { dataScopes: ["crm:read", "hr:salaries"] })), "DATA_ACCESS_VIOLATION", ["\"hr:salaries\""]],
        [guard.check(m.token, act(bob.did, { capability: "send_email" })), "HUMAN_GATE_REQUIRED", ["send_email", "human approval"]],
        [guard.check(m.token, act(bob.did, { llmTokens: -1 })), "COMPUTE_LIMIT_EXCEEDED", ["llmTokens", "non-negative integers"]],
        [guard.reserveCompute(m.token, bob.did, { webRequests: 0.5 }), "COMPUTE_LIMIT_EXCEEDED", ["webRequests", "non-negative integers"]],
        [guard.check(m.token, act(carol.did)), "MANDATE_INVALID", ["GRANTEE_MISMATCH"]],
        [guard.check(m.token, act(bob.did, { llmTokens: 41 })), "COMPUTE_LIMIT_EXCEEDED", ["llmTokens", "limit of 40", TaskStore.counterScope(m)]]
      ]
      for (const [effect, code, names] of cases) {
        const e = yield* refusal(effect)
        assert.strictEqual(e.code, code, names[0])
        for (const n of names) assert.include(e.message, n, code)
        // The resource is named as the mandate names it, not by the store's counter name.
        assert.notInclude(e.message, "compute:", code)
      }
      yield* guard.check(m.token, act(bob.did))
      const limit = yield* refusal(guard.check(m.token, act(bob.did)))
      assert.strictEqual(limit.code, "ACTION_LIMIT_EXCEEDED")
      for (const n of ["search", "limit of 1", TaskStore.counterScope(m)]) assert.include(limit.message, n)
    }))
})
