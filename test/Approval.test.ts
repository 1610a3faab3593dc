import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import {
  APPROVAL_TYPE,
  type ApprovalErrorCode,
  resumeTask,
  signApproval,
  verifyApproval,
  type VerifyApprovalOptions
} from "../src/core/Approval.js"
import type { TaskConstraints } from "../src/core/Constraints.js"
import { KeyRevoked } from "../src/core/Did.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { KeyResolver, type KeyResolverApi, KeyResolverUnavailable } from "../src/core/KeyResolver.js"
import { issueTaskMandate } from "../src/core/Mandate.js"
import { signMessage, toDateTimeSeconds } from "../src/core/Proof.js"
import { TaskGuard } from "../src/core/TaskGuard.js"
import { type PausedTask, TaskStore, layerMemory } from "../src/core/TaskStore.js"
import { cast, party, resolverFor } from "./support/mandates.js"

const T0 = Date.UTC(2026, 0, 1)
const expected = (over: Partial<{ taskId: string; capability: string; grantor: string }> = {}) => ({
  taskId: "task-1",
  capability: "send_email",
  grantor: "did:mesh:alice",
  ...over
})

/** The cast, a resolver knowing alice, bob and mallory, and the clock at T0. */
const setup = Effect.gen(function* () {
  yield* TestClock.setTime(T0)
  const parties = yield* cast
  return { ...parties, resolver: resolverFor([parties.alice, parties.bob, parties.mallory]) }
})

const codeOf = <A, R>(e: Effect.Effect<A, { readonly code: string }, R>) => Effect.map(Effect.flip(e), (x) => x.code)

const refusedWith = (
  approval: unknown,
  resolver: KeyResolverApi,
  over: Parameters<typeof expected>[0] = {},
  options: VerifyApprovalOptions = {}
): Effect.Effect<ApprovalErrorCode, unknown, Keys> =>
  Effect.map(Effect.flip(verifyApproval(approval, expected(over), resolver, options)), (e) => e.code)

describe("Approval", () => {
  it.effect("round trip: approve (the default) and deny, with a 900 s default lifetime", () =>
    Effect.gen(function* () {
      const { alice, resolver } = yield* setup
      const yes = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      assert.strictEqual(yes.type, APPROVAL_TYPE)
      assert.strictEqual(yes.decision, "approve")
      assert.strictEqual(yes.proof.verificationMethod, "did:mesh:alice#key-1")
      assert.strictEqual(yes.proof.created, "2026-01-01T00:00:00Z")
      assert.strictEqual(yes.expiresAt, "2026-01-01T00:15:00.000Z")
      assert.deepStrictEqual(yield* verifyApproval(yes, expected(), resolver), { decision: "approve", expiresAt: T0 + 900_000 })
      const no = yield* signApproval({ taskId: "task-1", capability: "send_email", decision: "deny", ttlSeconds: 60 }, alice.did, alice.key)
      assert.deepStrictEqual(yield* verifyApproval(no, expected(), resolver), { decision: "deny", expiresAt: T0 + 60_000 })
      // A JSON round trip (the wire) changes nothing; an any-case grantor DID is the same grantor.
      yield* verifyApproval(JSON.parse(JSON.stringify(yes)), expected({ grantor: "did:mesh:ALICE" }), resolver)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("signMessage-made approvals are byte-identical on Keys.native and Keys.noble and verify on both", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const layers = [KeysNative.layer, Keys.noble] as const
      const signed = yield* Effect.forEach(layers, (layer) =>
        Effect.provide(
          Effect.flatMap(party("alice", 1), (alice) => signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)),
          layer
        ))
      assert.deepStrictEqual(signed[0], signed[1])
      const alice = yield* Effect.provide(party("alice", 1), Keys.noble)
      for (const approval of signed) {
        for (const layer of layers) {
          const v = yield* Effect.provide(verifyApproval(approval, expected(), resolverFor([alice])), layer)
          assert.strictEqual(v.decision, "approve")
        }
      }
      // A fixed vector: seed 0x01 × 32, 2026-01-01T00:00:00Z, the default lifetime.
      assert.strictEqual(signed[0]!.proof.proofValue, VECTOR_PROOF_VALUE)
    }))

  it.effect("APPROVAL_MALFORMED for anything but a well-formed approval", () =>
    Effect.gen(function* () {
      const { alice, resolver } = yield* setup
      const good = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      const bad: ReadonlyArray<unknown> = [
        null,
        "approve",
        [good],
        { ...good, type: "MeshApprovalX" },
        { ...good, decision: "maybe" },
        { ...good, taskId: "" },
        { ...good, taskId: 7 },
        { ...good, expiresAt: "tomorrow" },
        { ...good, expiresAt: "2026-13-45T00:00:00Z" },
        { ...good, extra: true },
        { ...good, proof: "signed" },
        { ...good, proof: { ...good.proof, cryptosuite: "ecdsa-jcs-2019" } },
        { ...good, proof: { ...good.proof, proofPurpose: "authentication" } },
        { ...good, proof: { ...good.proof, created: undefined } },
        { ...good, proof: { ...good.proof, proofValue: "abc" } },
        { ...good, proof: { ...good.proof, domain: "example.com" } }
      ]
      for (const approval of bad) assert.strictEqual(yield* refusedWith(approval, resolver), "APPROVAL_MALFORMED", JSON.stringify(approval))
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("APPROVAL_UNSIGNED without a proof", () =>
    Effect.gen(function* () {
      const { alice, resolver } = yield* setup
      const { proof: _proof, ...unsigned } = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      assert.strictEqual(yield* refusedWith(unsigned, resolver), "APPROVAL_UNSIGNED")
      assert.strictEqual(yield* refusedWith({ ...unsigned, proof: null }, resolver), "APPROVAL_UNSIGNED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("APPROVAL_WRONG_SIGNER when someone other than the grantor signs: a stranger, or the grantee itself", () =>
    Effect.gen(function* () {
      const { bob, mallory, resolver } = yield* setup
      const input = { taskId: "task-1", capability: "send_email" }
      assert.strictEqual(yield* refusedWith(yield* signApproval(input, mallory.did, mallory.key), resolver), "APPROVAL_WRONG_SIGNER")
      assert.strictEqual(yield* refusedWith(yield* signApproval(input, bob.did, bob.key), resolver), "APPROVAL_WRONG_SIGNER")
      // Another method of the right DID is not the grantor's signing key either.
      const other = yield* signMessage(
        { type: APPROVAL_TYPE, ...input, decision: "approve", expiresAt: new Date(T0 + 60_000).toISOString() },
        bob.key,
        "did:mesh:alice#key-2",
        { created: toDateTimeSeconds(T0) }
      )
      assert.strictEqual(yield* refusedWith(other, resolver), "APPROVAL_WRONG_SIGNER")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("APPROVAL_INVALID for another key under the grantor's name, or any field changed after signing", () =>
    Effect.gen(function* () {
      const { alice, mallory, resolver } = yield* setup
      // mallory's key, claiming alice's method
      const forged = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, mallory.key)
      assert.strictEqual(forged.proof.verificationMethod, "did:mesh:alice#key-1")
      assert.strictEqual(yield* refusedWith(forged, resolver), "APPROVAL_INVALID")
      const no = yield* signApproval({ taskId: "task-1", capability: "send_email", decision: "deny" }, alice.did, alice.key)
      assert.strictEqual(yield* refusedWith({ ...no, decision: "approve" }, resolver), "APPROVAL_INVALID")
      assert.strictEqual(yield* refusedWith({ ...no, expiresAt: new Date(T0 + 3_600_000).toISOString() }, resolver), "APPROVAL_INVALID")
      assert.strictEqual(yield* refusedWith({ ...no, taskId: "task-2" }, resolver, { taskId: "task-2" }), "APPROVAL_INVALID")
      assert.strictEqual(yield* refusedWith({ ...no, capability: "wire_money" }, resolver, { capability: "wire_money" }), "APPROVAL_INVALID")
      assert.strictEqual(yield* refusedWith({ ...no, proof: { ...no.proof, created: "2026-01-01T00:00:01Z" } }, resolver), "APPROVAL_INVALID")
      const flipped = no.proof.proofValue.slice(0, -1) + (no.proof.proofValue.endsWith("1") ? "2" : "1")
      assert.strictEqual(yield* refusedWith({ ...no, proof: { ...no.proof, proofValue: flipped } }, resolver), "APPROVAL_INVALID")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("APPROVAL_INVALID when the grantor has no current key (unknown, revoked, rotated since signing)", () =>
    Effect.gen(function* () {
      const { alice, bob, mallory } = yield* setup
      const approval = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      assert.strictEqual(yield* refusedWith(approval, resolverFor([bob])), "APPROVAL_INVALID")
      const revoked: KeyResolverApi = {
        resolve: (did) =>
          Effect.fail(new KeyRevoked({ code: "KEY_REVOKED", message: "revoked", verificationMethod: `${did}#key-1`, revoked: "2025-12-31T00:00:00Z" }))
      }
      assert.strictEqual(yield* refusedWith(approval, revoked), "APPROVAL_INVALID")
      const rotated = resolverFor([{ did: alice.did, key: mallory.key }], { [alice.did]: 2 })
      assert.strictEqual(yield* refusedWith(approval, rotated), "APPROVAL_INVALID")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("RESOLVER_UNAVAILABLE when the grantor's key cannot be looked up (retry later)", () =>
    Effect.gen(function* () {
      const { alice } = yield* setup
      const approval = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      const down: KeyResolverApi = { resolve: (did) => Effect.fail(new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: "down", did })) }
      assert.strictEqual(yield* refusedWith(approval, down), "RESOLVER_UNAVAILABLE")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("APPROVAL_MISMATCH for another task or another capability", () =>
    Effect.gen(function* () {
      const { alice, resolver } = yield* setup
      const approval = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      assert.strictEqual(yield* refusedWith(approval, resolver, { taskId: "task-2" }), "APPROVAL_MISMATCH")
      assert.strictEqual(yield* refusedWith(approval, resolver, { capability: "wire_money" }), "APPROVAL_MISMATCH")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("APPROVAL_EXPIRED past expiresAt (with the clock tolerance), when created ahead, or when it lives over a day", () =>
    Effect.gen(function* () {
      const { alice, resolver } = yield* setup
      const approval = yield* signApproval({ taskId: "task-1", capability: "send_email", ttlSeconds: 60 }, alice.did, alice.key)
      yield* TestClock.setTime(T0 + 60_000 + 29_999)
      yield* verifyApproval(approval, expected(), resolver)
      yield* TestClock.setTime(T0 + 60_000 + 30_000)
      assert.strictEqual(yield* refusedWith(approval, resolver), "APPROVAL_EXPIRED")
      yield* verifyApproval(approval, expected(), resolver, { clockToleranceMs: 60_000 })
      assert.strictEqual(yield* refusedWith(approval, resolver, {}, { clockToleranceMs: 0 }), "APPROVAL_EXPIRED")

      // Signed with a clock two minutes ahead: refused until the verifier's clock is within the tolerance.
      yield* TestClock.setTime(T0 + 120_000)
      const early = yield* signApproval({ taskId: "task-1", capability: "send_email" }, alice.did, alice.key)
      yield* TestClock.setTime(T0)
      assert.strictEqual(yield* refusedWith(early, resolver), "APPROVAL_EXPIRED")
      yield* TestClock.setTime(T0 + 90_000)
      yield* verifyApproval(early, expected(), resolver)

      // A day is the longest an approval may live: signApproval makes exactly that, a hand-made one cannot pass it.
      yield* TestClock.setTime(T0)
      const day = yield* signApproval({ taskId: "task-1", capability: "send_email", ttlSeconds: 86_400 }, alice.did, alice.key)
      yield* verifyApproval(day, expected(), resolver)
      const fields = { type: APPROVAL_TYPE, taskId: "task-1", capability: "send_email", decision: "approve" }
      const long = yield* signMessage({ ...fields, expiresAt: new Date(T0 + 86_401_000).toISOString() }, alice.key, "did:mesh:alice#key-1")
      assert.strictEqual(yield* refusedWith(long, resolver), "APPROVAL_EXPIRED")
      const backwards = yield* signMessage({ ...fields, expiresAt: new Date(T0).toISOString() }, alice.key, "did:mesh:alice#key-1", {
        created: toDateTimeSeconds(T0 + 1000)
      })
      assert.strictEqual(yield* refusedWith(backwards, resolver), "APPROVAL_EXPIRED")
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("signApproval refuses a bad lifetime, an empty task or capability, a bad DID or key", () =>
    Effect.gen(function* () {
      const { alice } = yield* setup
      for (const ttlSeconds of [0, -1, 1.5, 86_401, Number.NaN]) {
        assert.strictEqual(yield* codeOf(signApproval({ taskId: "t", capability: "c", ttlSeconds }, alice.did, alice.key)), "APPROVAL_MALFORMED")
      }
      assert.strictEqual(yield* codeOf(signApproval({ taskId: "", capability: "c" }, alice.did, alice.key)), "APPROVAL_MALFORMED")
      assert.strictEqual(yield* codeOf(signApproval({ taskId: "t", capability: "" }, alice.did, alice.key)), "APPROVAL_MALFORMED")
      assert.strictEqual(yield* codeOf(signApproval({ taskId: "t\uD800", capability: "c" }, alice.did, alice.key)), "APPROVAL_MALFORMED")
      assert.strictEqual(yield* codeOf(signApproval({ taskId: "t", capability: "c" }, "alice", alice.key)), "INVALID_DID")
      assert.strictEqual(yield* codeOf(signApproval({ taskId: "t", capability: "c" }, alice.did, new Uint8Array(7))), "MALFORMED_KEY")
      // The DID is normalized: the proof names the lower-case method.
      const upper = yield* signApproval({ taskId: "t", capability: "c" }, "did:mesh:ALICE", alice.key)
      assert.strictEqual(upper.proof.verificationMethod, "did:mesh:alice#key-1")
    }).pipe(Effect.provide(KeysNative.layer)))
})

const constraints: TaskConstraints = {
  allowed: ["search", "send_email"],
  humanGates: ["send_email"],
  actionLimits: { send_email: 1 },
  maxDelegationDepth: 0
}

/** A human gate end to end on the memory store: the guard stops, the task pauses, an approval resumes it once. */
const gated = Effect.gen(function* () {
  const { alice, bob, mallory, resolver } = yield* setup
  const m = yield* issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints, ttlSeconds: 3600 })
  const pause = (taskId: string) => {
    const task: PausedTask = {
      taskId,
      owner: bob.did,
      capability: "send_email",
      mandateJti: m.jti,
      grantor: m.grantor,
      mandate: m.token,
      state: { input: { to: "carol@example.com" }, journal: [] },
      createdAt: T0,
      // Mandate times are in seconds, the store's in ms.
      expiresAt: m.expiresAt * 1000
    }
    return Effect.as(TaskStore.pipe(Effect.flatMap((s) => s.pause(task))), task)
  }
  const approve = (taskId: string, decision: "approve" | "deny" = "approve") =>
    signApproval({ taskId, capability: "send_email", decision }, alice.did, alice.key)
  return { alice, bob, mallory, resolver, m, pause, approve }
})

const withGate = <A, E>(effect: Effect.Effect<A, E, TaskGuard | TaskStore | Keys>) =>
  Effect.gen(function* () {
    const { alice, bob } = yield* Effect.provide(cast, KeysNative.layer)
    const layer = TaskGuard.layer.pipe(
      Layer.provideMerge(Layer.mergeAll(Layer.succeed(KeyResolver, resolverFor([alice, bob])), layerMemory, KeysNative.layer))
    )
    return yield* Effect.provide(effect, layer)
  })

describe("resumeTask", () => {
  it.effect("HUMAN_GATE_REQUIRED → pause → the grantor's approval resumes the task exactly once", () =>
    withGate(Effect.gen(function* () {
      const { bob, resolver, m, pause, approve } = yield* gated
      const action = { presenter: bob.did, capability: "send_email", reversible: false, sandboxed: false }
      assert.strictEqual(yield* codeOf(TaskGuard.check(m.token, action)), "HUMAN_GATE_REQUIRED")
      const task = yield* pause("task-a")
      const approval = yield* approve("task-a")
      const resumed = yield* resumeTask({ taskId: "task-a", owner: bob.did, approval }, resolver)
      assert.strictEqual(resumed.decision, "approve")
      assert.deepStrictEqual(resumed.task, task)
      // The runtime records the approval for this very action and runs it under the mandate.
      yield* TaskGuard.check(resumed.task.mandate, { ...action, capability: resumed.task.capability, humanApproved: true })
      const reused = yield* Effect.flip(resumeTask({ taskId: "task-a", owner: bob.did, approval }, resolver))
      assert.strictEqual(reused.code, "TASK_ALREADY_RESUMED")
    })))

  it.effect("a deny cancels; refused approvals and other owners leave the task paused", () =>
    withGate(Effect.gen(function* () {
      const { alice, bob, mallory, resolver, pause, approve } = yield* gated
      yield* pause("task-b")
      const store = yield* TaskStore
      const status = Effect.map(store.paused("task-b"), (o) => Option.getOrThrow(o).status)
      const forged = yield* signApproval({ taskId: "task-b", capability: "send_email" }, mallory.did, mallory.key)
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-b", owner: bob.did, approval: forged }, resolver)), "APPROVAL_WRONG_SIGNER")
      const forgedAsAlice = yield* signApproval({ taskId: "task-b", capability: "send_email" }, alice.did, mallory.key)
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-b", owner: bob.did, approval: forgedAsAlice }, resolver)), "APPROVAL_INVALID")
      const { proof: _p, ...unsigned } = yield* approve("task-b")
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-b", owner: bob.did, approval: unsigned }, resolver)), "APPROVAL_UNSIGNED")
      const otherTask = yield* approve("task-other")
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-b", owner: bob.did, approval: otherTask }, resolver)), "APPROVAL_MISMATCH")
      const good = yield* approve("task-b")
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-b", owner: "did:mesh:someone-else", approval: good }, resolver)), "TASK_NOT_FOUND")
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-none", owner: bob.did, approval: good }, resolver)), "TASK_NOT_FOUND")
      assert.strictEqual(yield* status, "paused")

      const denied = yield* resumeTask({ taskId: "task-b", owner: bob.did, approval: yield* approve("task-b", "deny") }, resolver)
      assert.strictEqual(denied.decision, "deny")
      assert.strictEqual(yield* status, "cancelled")
      // An approve that arrives after the deny finds the task finished.
      const late = yield* Effect.flip(resumeTask({ taskId: "task-b", owner: bob.did, approval: good }, resolver))
      assert.deepStrictEqual([late.code, late._tag === "TaskNotPaused" ? late.status : undefined], ["TASK_ALREADY_RESUMED", "cancelled"])
    })))

  it.effect("one approval presented many times at once resumes the task once", () =>
    withGate(Effect.gen(function* () {
      const { bob, resolver, pause, approve } = yield* gated
      yield* pause("task-c")
      const approval = yield* approve("task-c")
      const results = yield* Effect.forEach(
        Array.from({ length: 30 }, (_, i) => i),
        () => Effect.either(resumeTask({ taskId: "task-c", owner: bob.did, approval }, resolver)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter((r) => r._tag === "Right").length, 1)
      assert.deepStrictEqual([...new Set(results.flatMap((r) => (r._tag === "Left" ? [r.left.code] : [])))], ["TASK_ALREADY_RESUMED"])
    })))

  it.effect("a task whose mandate expired cannot resume, even with a valid approval", () =>
    withGate(Effect.gen(function* () {
      const { bob, resolver, m, pause, approve } = yield* gated
      yield* pause("task-d")
      yield* TestClock.setTime(m.expiresAt * 1000 - 60_000)
      const approval = yield* approve("task-d")
      yield* TestClock.setTime(m.expiresAt * 1000)
      assert.strictEqual(yield* codeOf(resumeTask({ taskId: "task-d", owner: bob.did, approval }, resolver)), "TASK_EXPIRED")
    })))
})

const VECTOR_PROOF_VALUE = "z3jdsvwDBEVq18xEZvsk84aYs9Vqhr3LHJjZduHRrFo5M3ahhPM3icF3NjycwJAjGXmwTYmabyzQTF8Z67emj1WMB"
