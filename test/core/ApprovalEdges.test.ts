import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { APPROVAL_TYPE, resumeTask, SignedApproval, signApproval, verifyApproval } from "../../src/core/Approval.js"
import { signMessage, toDateTimeSeconds } from "../../src/core/Proof.js"
import { type PausedTask, TaskStore, layerMemory } from "../../src/core/TaskStore.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { cast, resolverFor } from "../support/mandates.js"

const T0 = Date.UTC(2027, 0, 15, 8)

const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const parties = yield* cast
  return { ...parties, resolver: resolverFor([parties.alice, parties.bob, parties.mallory]) }
})

const expected = { taskId: "task-1", capability: "send_email", grantor: "did:mesh:alice" }

const fields = (over: Record<string, unknown> = {}) => ({
  type: APPROVAL_TYPE,
  taskId: "task-1",
  capability: "send_email",
  decision: "approve",
  expiresAt: new Date(T0 + 60_000).toISOString(),
  ...over
})

describe("Approval refusals say what they refuse", () => {
  it.effect("each ApprovalError names the task, capability, signer, time or key at fault", () =>
    Effect.gen(function* () {
      const { alice, bob, mallory, resolver } = yield* setup
      const vm = "did:mesh:alice#key-1"
      const good = yield* signApproval({ taskId: "task-1", capability: "send_email", ttlSeconds: 60 }, alice.did, alice.key)
      const { proof: _p, ...unsigned } = good
      const byMallory = yield* signApproval({ taskId: "task-1", capability: "send_email" }, mallory.did, mallory.key)
      const future = yield* signMessage(fields({ expiresAt: new Date(T0 + 3_600_000).toISOString() }), alice.key, vm, { created: toDateTimeSeconds(T0 + 600_000) })
      const tooLong = yield* signMessage(fields({ expiresAt: new Date(T0 + 86_401_000).toISOString() }), alice.key, vm, { created: toDateTimeSeconds(T0) })
      const cases: ReadonlyArray<readonly [unknown, typeof expected, string, ReadonlyArray<string>]> = [
        [unsigned, expected, "APPROVAL_UNSIGNED", ["proof"]],
        [{ ...good, proof: { ...good.proof, proofPurpose: "authentication" } }, expected, "APPROVAL_MALFORMED", ["proof:", "proofPurpose"]],
        [byMallory, expected, "APPROVAL_WRONG_SIGNER", ["did:mesh:mallory#key-1", vm]],
        [good, { ...expected, taskId: "task-2" }, "APPROVAL_MISMATCH", ["task-1"]],
        [good, { ...expected, capability: "wire_money" }, "APPROVAL_MISMATCH", ["send_email", "wire_money"]],
        [future, expected, "APPROVAL_EXPIRED", [toDateTimeSeconds(T0 + 600_000), "future"]],
        [tooLong, expected, "APPROVAL_EXPIRED", ["86400"]],
        [{ ...good, capability: "send_email", taskId: "task-1", decision: "deny" }, expected, "APPROVAL_INVALID", ["SIGNATURE_INVALID"]]
      ]
      for (const [approval, exp, code, names] of cases) {
        const e = yield* Effect.flip(verifyApproval(approval, exp, resolver))
        assert.strictEqual(e._tag, "ApprovalError")
        assert.strictEqual(e.code, code, names[0])
        for (const n of names) assert.include(e.message, n, code)
      }
      const noKey = yield* Effect.flip(verifyApproval(good, expected, resolverFor([bob])))
      assert.strictEqual(noKey.code, "APPROVAL_INVALID")
      assert.include(noKey.message, "did:mesh:alice has no current key")
      yield* TestClock.adjust("91 seconds")
      const expired = yield* Effect.flip(verifyApproval(good, expected, resolver))
      assert.strictEqual(expired.code, "APPROVAL_EXPIRED")
      assert.include(expired.message, good.expiresAt)
      const ttl = yield* Effect.flip(signApproval({ taskId: "t", capability: "c", ttlSeconds: 0 }, alice.did, alice.key))
      assert.strictEqual(ttl.code, "APPROVAL_MALFORMED")
      for (const n of ["ttlSeconds", "86400", "got 0"]) assert.include(ttl.message, n)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a lifetime of zero is refused: expiresAt must be after proof.created", () =>
    Effect.gen(function* () {
      const { alice, resolver } = yield* setup
      const zero = yield* signMessage(fields({ expiresAt: new Date(T0).toISOString() }), alice.key, "did:mesh:alice#key-1", { created: toDateTimeSeconds(T0) })
      const e = yield* Effect.flip(verifyApproval(zero, expected, resolver))
      assert.strictEqual(e.code, "APPROVAL_EXPIRED")
      assert.include(e.message, "lifetime")
      const oneSecond = yield* signMessage(fields({ expiresAt: new Date(T0 + 1000).toISOString() }), alice.key, "did:mesh:alice#key-1", { created: toDateTimeSeconds(T0) })
      assert.deepStrictEqual(yield* verifyApproval(oneSecond, expected, resolver), { decision: "approve", expiresAt: T0 + 1000 })
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("the wire schema of a signed approval holds a signed approval and nothing less", () =>
    Effect.gen(function* () {
      const { alice } = yield* setup
      const signed = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      const is = Schema.is(SignedApproval)
      assert.isTrue(is(signed))
      const { proof: _p, ...unsigned } = signed
      assert.isFalse(is(unsigned))
      assert.isFalse(is({}))
      assert.isFalse(is({ ...signed, decision: "maybe" }))
    }).pipe(Effect.provide(KeysNative.layer)))
})

describe("resumeTask edges", () => {
  const pausedBy = (owner: string, grantor: string): PausedTask => ({
    taskId: "task-r",
    owner,
    capability: "send_email",
    mandateJti: "jti-r",
    grantor,
    mandate: "token",
    state: {},
    createdAt: T0,
    expiresAt: T0 + 3_600_000
  })

  it.effect("the owner is compared as a DID, in any case; an approve leaves the task resumed, a missing task is named", () =>
    Effect.gen(function* () {
      const { alice, bob, resolver } = yield* setup
      const store = yield* TaskStore
      yield* store.pause(pausedBy(bob.did, alice.did))
      const approval = yield* signApproval({ taskId: "task-r", capability: "send_email" }, alice.did, alice.key)
      const missing = yield* Effect.flip(resumeTask({ taskId: "task-none", owner: bob.did, approval }, resolver))
      assert.strictEqual(missing.code, "TASK_NOT_FOUND")
      assert.include(missing.message, "task-none")
      const resumed = yield* resumeTask({ taskId: "task-r", owner: bob.did.toUpperCase(), approval }, resolver)
      assert.strictEqual(resumed.decision, "approve")
      const again = yield* Effect.flip(resumeTask({ taskId: "task-r", owner: bob.did, approval }, resolver))
      assert.deepStrictEqual([again.code, again._tag === "TaskNotPaused" ? again.status : undefined], ["TASK_ALREADY_RESUMED", "resumed"])
    }).pipe(Effect.provide(Layer.merge(KeysNative.layer, layerMemory))))
})
