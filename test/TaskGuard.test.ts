import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import type { TaskConstraints } from "../src/core/Constraints.js"
import type { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { KeyResolver } from "../src/core/KeyResolver.js"
import { attenuateTaskMandate, issueTaskMandate } from "../src/core/Mandate.js"
import { type TaskAction, TaskGuard } from "../src/core/TaskGuard.js"
import * as TaskStore from "../src/core/TaskStore.js"
import * as TaskStoreSql from "../src/sql/TaskStoreSql.js"
import * as Database from "../src/sql/Database.js"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cast, headerFor, payloadOf, resolverFor, signRaw } from "./support/mandates.js"

const guarded = <A, E>(effect: Effect.Effect<A, E, TaskGuard | Keys>) =>
  Effect.gen(function* () {
    const { alice, bob, carol, dave } = yield* Effect.provide(cast, KeysNative.layer)
    const layer = TaskGuard.layer.pipe(
      Layer.provideMerge(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor([alice, bob, carol, dave])), TaskStore.layerMemory, KeysNative.layer))
    )
    return yield* Effect.provide(effect, layer)
  })

const constraints: TaskConstraints = {
  allowed: ["search", "summarize", "send_email", "delete_draft"],
  blocked: ["delete_draft"],
  humanGates: ["send_email"],
  actionLimits: { search: 3, send_email: 1 },
  computeLimit: { llmTokens: 1000, webRequests: 5 },
  dataAccess: ["crm:read"],
  reversibleOnly: false,
  sandbox: false,
  maxDelegationDepth: 2
}

const setup = (overrides: Partial<TaskConstraints> = {}) =>
  Effect.gen(function* () {
    const { alice, bob } = yield* cast
    const m = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { ...constraints, ...overrides } })
    const action = (a: Partial<TaskAction> = {}): TaskAction => ({ presenter: bob.did, capability: "search", reversible: true, sandboxed: false, ...a })
    return { m, action }
  })

const codeOf = <A>(e: Effect.Effect<A, { readonly code: string }, TaskGuard>) => Effect.map(Effect.flip(e), (x) => x.code)

describe("TaskGuard", () => {
  it.effect("permits an allowed action and returns the verified mandate", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      const v = yield* TaskGuard.check(m.token, action({ dataScopes: ["crm:read"], llmTokens: 100, webRequests: 1 }))
      assert.strictEqual(v.jti, m.jti)
    })))

  it.effect("CAPABILITY_NOT_PERMITTED for a capability not allowed, or blocked", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ capability: "wire_money" }))), "CAPABILITY_NOT_PERMITTED")
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ capability: "delete_draft" }))), "CAPABILITY_NOT_PERMITTED")
    })))

  it.effect("REVERSIBILITY_VIOLATION for an irreversible action under reversibleOnly", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup({ reversibleOnly: true })
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ reversible: false }))), "REVERSIBILITY_VIOLATION")
      yield* TaskGuard.check(m.token, action({ reversible: true }))
    })))

  it.effect("HUMAN_GATE_REQUIRED until the runtime records an approval", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ capability: "send_email" }))), "HUMAN_GATE_REQUIRED")
      yield* TaskGuard.check(m.token, action({ capability: "send_email", humanApproved: true }))
    })))

  it.effect("ACTION_LIMIT_EXCEEDED past a capability's limit (a hard stop)", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      for (let i = 0; i < 3; i++) yield* TaskGuard.check(m.token, action())
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action())), "ACTION_LIMIT_EXCEEDED")
      // Other capabilities are unaffected.
      yield* TaskGuard.check(m.token, action({ capability: "summarize" }))
    })))

  it.effect("COMPUTE_LIMIT_EXCEEDED for LLM tokens or web requests past the budget; a refused action charges nothing", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      yield* TaskGuard.check(m.token, action({ capability: "summarize", llmTokens: 900 }))
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ capability: "summarize", llmTokens: 101 }))), "COMPUTE_LIMIT_EXCEEDED")
      yield* TaskGuard.check(m.token, action({ capability: "summarize", llmTokens: 100 }))
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ capability: "summarize", webRequests: 6 }))), "COMPUTE_LIMIT_EXCEEDED")
      // The refused search (tokens over budget) did not use one of the three searches.
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ llmTokens: 1 }))), "COMPUTE_LIMIT_EXCEEDED")
      for (let i = 0; i < 3; i++) yield* TaskGuard.check(m.token, action())
    })))

  it.effect("reserveCompute charges LLM tokens without a capability; settleCompute gives back the unused part", () =>
    guarded(Effect.gen(function* () {
      const { m } = yield* setup({ allowed: [] })
      const { bob } = yield* cast
      const v = yield* Effect.flatMap(TaskGuard, (g) => g.reserveCompute(m.token, bob.did, { llmTokens: 600 }))
      assert.strictEqual(yield* codeOf(Effect.flatMap(TaskGuard, (g) => g.reserveCompute(m.token, bob.did, { llmTokens: 401 }))), "COMPUTE_LIMIT_EXCEEDED")
      yield* Effect.flatMap(TaskGuard, (g) => g.settleCompute(v, { llmTokens: 600 }, { llmTokens: 250 }))
      // 250 spent: 750 remain.
      yield* Effect.flatMap(TaskGuard, (g) => g.reserveCompute(m.token, bob.did, { llmTokens: 750 }))
      assert.strictEqual(yield* codeOf(Effect.flatMap(TaskGuard, (g) => g.reserveCompute(m.token, bob.did, { llmTokens: 1 }))), "COMPUTE_LIMIT_EXCEEDED")
    })))

  it.effect("reserveCompute verifies the mandate for the presenter; settleCompute charges an overrun up to every link's limit", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol } = yield* cast
      const root = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints })
      assert.strictEqual(yield* codeOf(Effect.flatMap(TaskGuard, (g) => g.reserveCompute(root.token, carol.did, { llmTokens: 1 }))), "MANDATE_INVALID")
      const child = yield* attenuateTaskMandate({
        parent: root,
        granteeDid: carol.did,
        grantorPrivateKey: bob.key,
        constraints: { ...constraints, allowed: [], computeLimit: { llmTokens: 500, webRequests: 5 }, maxDelegationDepth: 0 }
      })
      const v = yield* Effect.flatMap(TaskGuard, (g) => g.reserveCompute(child.token, carol.did, { llmTokens: 100 }))
      yield* Effect.flatMap(TaskGuard, (g) => g.settleCompute(v, { llmTokens: 100 }, { llmTokens: 5000 }))
      // 5000 were spent: the child is full (500 of 500), and so is the root (1000 of 1000), not past it.
      assert.strictEqual(yield* codeOf(Effect.flatMap(TaskGuard, (g) => g.reserveCompute(child.token, carol.did, { llmTokens: 1 }))), "COMPUTE_LIMIT_EXCEEDED")
      assert.strictEqual(yield* codeOf(Effect.flatMap(TaskGuard, (g) => g.reserveCompute(root.token, bob.did, { llmTokens: 1 }))), "COMPUTE_LIMIT_EXCEEDED")
    })))

  it.effect("DATA_ACCESS_VIOLATION for a data scope not granted", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ dataScopes: ["crm:read", "hr:read"] }))), "DATA_ACCESS_VIOLATION")
    })))

  it.effect("SANDBOX_REQUIRED when the mandate sets sandbox and the runtime is not sandboxed", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup({ sandbox: true })
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action({ sandboxed: false }))), "SANDBOX_REQUIRED")
      yield* TaskGuard.check(m.token, action({ sandboxed: true }))
    })))

  it.effect("DELEGATION_DEPTH_EXCEEDED for a chain deeper than its root allows", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol, dave } = yield* cast
      const root = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { ...constraints, maxDelegationDepth: 1 } })
      const child = yield* attenuateTaskMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { ...constraints, maxDelegationDepth: 0 } })
      yield* TaskGuard.check(child.token, { presenter: carol.did, capability: "search", reversible: true, sandboxed: false })
      const tooDeep = yield* signRaw(headerFor(carol.did), { ...payloadOf(child.token), iss: carol.did, aud: dave.did, prf: child.token }, carol.key)
      assert.strictEqual(yield* codeOf(TaskGuard.check(tooDeep, { presenter: dave.did, capability: "search", reversible: true, sandboxed: false })), "DELEGATION_DEPTH_EXCEEDED")
    })))

  it.effect("MANDATE_INVALID (with its reason) for a wrong presenter, an expired or a non-task mandate", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      const { carol } = yield* cast
      const e = yield* Effect.flip(TaskGuard.check(m.token, action({ presenter: carol.did })))
      assert.strictEqual(e.code, "MANDATE_INVALID")
      assert.strictEqual(e._tag === "TaskConstraintViolation" ? e.reason : undefined, "GRANTEE_MISMATCH")
      yield* TestClock.adjust("1 hour")
      const expired = yield* Effect.flip(TaskGuard.check(m.token, action()))
      assert.strictEqual(expired._tag === "TaskConstraintViolation" ? expired.reason : undefined, "EXPIRED")
    })))

  it.effect("limits of every link hold: children cannot together exceed their parent's action limit", () =>
    guarded(Effect.gen(function* () {
      const { alice, bob, carol, dave } = yield* cast
      const root = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["search"], actionLimits: { search: 3 }, maxDelegationDepth: 1 } })
      const toCarol = yield* attenuateTaskMandate({ parent: root, granteeDid: carol.did, grantorPrivateKey: bob.key, constraints: { allowed: ["search"], actionLimits: { search: 3 }, maxDelegationDepth: 0 } })
      const toDave = yield* attenuateTaskMandate({ parent: root, granteeDid: dave.did, grantorPrivateKey: bob.key, constraints: { allowed: ["search"], actionLimits: { search: 3 }, maxDelegationDepth: 0 } })
      const act = (presenter: string) => ({ presenter, capability: "search", reversible: true, sandboxed: false })
      yield* TaskGuard.check(toCarol.token, act(carol.did))
      yield* TaskGuard.check(toCarol.token, act(carol.did))
      yield* TaskGuard.check(toDave.token, act(dave.did))
      assert.strictEqual(yield* codeOf(TaskGuard.check(toDave.token, act(dave.did))), "ACTION_LIMIT_EXCEEDED")
    })))

  it.effect("many fibers racing for the last use: exactly the limit wins", () =>
    guarded(Effect.gen(function* () {
      const { m, action } = yield* setup()
      const results = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i), () => Effect.either(TaskGuard.check(m.token, action())), { concurrency: "unbounded" })
      assert.strictEqual(results.filter((r) => r._tag === "Right").length, 3)
    })))

  it.effect("limits are hard stops across a restart on the SQL store", () =>
    Effect.gen(function* () {
      const { alice, bob } = yield* Effect.provide(cast, KeysNative.layer)
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-taskguard-")), "mesh.db")
      const guardOn = (db: string) =>
        TaskGuard.layer.pipe(
          Layer.provideMerge(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor([alice, bob])), KeysNative.layer)),
          Layer.provideMerge(TaskStoreSql.layer.pipe(Layer.provide(Database.layerSqlite(db))))
        )
      const m = yield* Effect.provide(
        issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { allowed: ["pay"], actionLimits: { pay: 2 }, maxDelegationDepth: 0 } }),
        KeysNative.layer
      )
      const act = { presenter: bob.did, capability: "pay", reversible: false, sandboxed: false }
      // First process: one use. Its layer scope (and the database) closes when the provide ends.
      yield* Effect.provide(TaskGuard.check(m.token, act), guardOn(file))
      // Second process: one more use, then the hard stop.
      const codes = yield* Effect.provide(
        Effect.all([Effect.either(TaskGuard.check(m.token, act)), Effect.either(TaskGuard.check(m.token, act))]),
        guardOn(file)
      )
      assert.deepStrictEqual(codes.map((r) => (r._tag === "Left" ? r.left.code : "ok")), ["ok", "ACTION_LIMIT_EXCEEDED"])
    }))
})
