import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import fc from "fast-check"
import type { SpendingConstraints, TaskConstraints } from "../src/core/Constraints.js"
import type { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { attenuateTaskMandate, attenuateToCart, attenuateToPayment, issueIntentMandate, issueTaskMandate, type Mandate, verifyMandate } from "../src/core/Mandate.js"
import { parseUsd } from "../src/core/Money.js"
import { cast, type Party, resolverFor } from "./support/mandates.js"

const runSync = <A, E>(effect: Effect.Effect<A, E, Keys>) => Effect.runSync(Effect.provide(effect, KeysNative.layer))
const runExit = <A, E>(effect: Effect.Effect<A, E, Keys>) => Effect.runSyncExit(Effect.provide(effect, KeysNative.layer))

const { alice, bob, carol, dave, erin, mallory } = runSync(cast)
const people: ReadonlyArray<Party> = [alice, bob, carol, dave, erin, mallory]
const resolver = resolverFor(people)

// --- An independent statement of "within", written from docs/protocol.md §9 rather than from Constraints.ts. ---

const CAPS = ["a", "b", "c", "d", "e"]
const SCOPES = ["s1", "s2", "s3"]
const all = (xs: ReadonlyArray<string>, ys: ReadonlyArray<string>) => xs.every((x) => ys.includes(x))

/** True when `leaf`, `depth` delegations below `root`, grants nothing `root` does not. */
const taskWithin = (root: TaskConstraints, leaf: TaskConstraints, depth: number): boolean =>
  all(leaf.allowed, root.allowed) &&
  all(root.blocked ?? [], leaf.blocked ?? []) &&
  all(root.humanGates ?? [], leaf.humanGates ?? []) &&
  all(leaf.dataAccess ?? [], root.dataAccess ?? []) &&
  (!root.reversibleOnly || leaf.reversibleOnly === true) &&
  (!root.sandbox || leaf.sandbox === true) &&
  Object.entries(root.actionLimits ?? {}).every(([k, v]) => (leaf.actionLimits ?? {})[k] !== undefined && leaf.actionLimits![k]! <= v) &&
  (["llmTokens", "webRequests"] as const).every((k) => root.computeLimit?.[k] === undefined || (leaf.computeLimit?.[k] !== undefined && leaf.computeLimit[k]! <= root.computeLimit[k]!)) &&
  leaf.maxDelegationDepth <= root.maxDelegationDepth - depth

const subsetOf = (xs: ReadonlyArray<string>) => fc.subarray([...xs])
const limits = (keys: ReadonlyArray<string>) =>
  fc.dictionary(fc.constantFrom(...keys), fc.integer({ min: 0, max: 10 }), { maxKeys: keys.length })

const taskConstraints: fc.Arbitrary<TaskConstraints> = fc.record({
  allowed: subsetOf(CAPS),
  blocked: subsetOf(CAPS),
  reversibleOnly: fc.boolean(),
  humanGates: subsetOf(CAPS),
  actionLimits: limits(CAPS),
  computeLimit: fc.record({ llmTokens: fc.integer({ min: 0, max: 1000 }), webRequests: fc.integer({ min: 0, max: 10 }) }, { requiredKeys: [] }),
  dataAccess: subsetOf(SCOPES),
  sandbox: fc.boolean(),
  maxDelegationDepth: fc.integer({ min: 0, max: 6 })
})

/** A candidate for the next link: either random constraints or the parent's with a random edit (often narrower). */
const candidate = (parent: TaskConstraints, pick: { readonly fresh: TaskConstraints; readonly mode: number; readonly k: number }): TaskConstraints => {
  if (pick.mode === 0) return pick.fresh
  const c: TaskConstraints = { ...parent, maxDelegationDepth: Math.max(0, parent.maxDelegationDepth - 1) }
  switch (pick.mode) {
    case 1: return { ...c, allowed: c.allowed.filter((_, i) => i !== pick.k % Math.max(1, c.allowed.length)) }
    case 2: return { ...c, blocked: [...new Set([...(c.blocked ?? []), CAPS[pick.k % CAPS.length]!])] }
    case 3: return { ...c, actionLimits: { ...c.actionLimits, [CAPS[pick.k % CAPS.length]!]: pick.k % 4 } }
    case 4: return { ...c, computeLimit: { ...c.computeLimit, llmTokens: pick.k * 50 } }
    case 5: return { ...c, sandbox: pick.k % 2 === 0 ? true : false, reversibleOnly: pick.k % 3 === 0 }
    case 6: return { ...c, dataAccess: pick.fresh.dataAccess ?? [] }
    default: return c
  }
}

describe("attenuation properties", () => {
  it("random task attenuation chains never end wider than their root, and every chain that was issued verifies", () => {
    let deepest = 0
    fc.assert(
      fc.property(
        taskConstraints,
        fc.array(fc.record({ fresh: taskConstraints, mode: fc.integer({ min: 0, max: 7 }), k: fc.nat(20) }), { minLength: 1, maxLength: 6 }),
        (rootCns, steps) => {
          const root = runSync(issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: rootCns }))
          let leaf: Mandate<"task"> = root
          let holder = 1 // index in `people` of the leaf's grantee
          for (const step of steps) {
            const cns = candidate(leaf.constraints, step)
            const next = (holder + 1) % people.length
            const exit = runExit(attenuateTaskMandate({ parent: leaf, granteeDid: people[next]!.did, grantorPrivateKey: people[holder]!.key, constraints: cns }))
            const allowed = taskWithin(leaf.constraints, cns, 1) && leaf.constraints.maxDelegationDepth >= 1
            // Issue-time checking agrees exactly with the independent rule.
            assert.strictEqual(Exit.isSuccess(exit), allowed, JSON.stringify({ parent: leaf.constraints, cns }))
            if (Exit.isSuccess(exit)) {
              leaf = exit.value
              holder = next
            }
          }
          assert.isTrue(taskWithin(root.constraints, leaf.constraints, leaf.depth))
          deepest = Math.max(deepest, leaf.depth)
          runSync(verifyMandate(leaf.token, resolver, { expectedGrantee: people[holder]!.did }))
        }
      ),
      { numRuns: 150 }
    )
    // The generator does reach long chains, not only refused first steps.
    assert.isAtLeast(deepest, 3)
  })

  it("random spending chains never authorize more, or other merchants, than the intent", () => {
    const merchants = ["m1", "m2", "m3"]
    const micros = fc.integer({ min: 0, max: 5_000_000 })
    const usd = (m: number) => m / 1_000_000
    fc.assert(
      fc.property(
        micros, fc.option(subsetOf(merchants), { nil: undefined }),
        micros, fc.option(subsetOf(merchants), { nil: undefined }),
        micros, fc.constantFrom(...merchants), fc.boolean(),
        (limit, allowedMerchants, cartLimit, cartMerchants, amount, merchant, viaCart) => {
          const intentCns: SpendingConstraints = allowedMerchants === undefined ? { spendLimitUsd: usd(limit) } : { spendLimitUsd: usd(limit), allowedMerchants }
          const intent = runSync(issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: intentCns }))
          let parent: Mandate<"intent" | "cart"> = intent
          let grantor = bob
          if (viaCart) {
            const cartCns: SpendingConstraints = cartMerchants === undefined ? { spendLimitUsd: usd(cartLimit) } : { spendLimitUsd: usd(cartLimit), allowedMerchants: cartMerchants }
            const cart = runExit(attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: cartCns }))
            const ok = cartLimit <= limit && (allowedMerchants === undefined || (cartMerchants !== undefined && all(cartMerchants, allowedMerchants)))
            assert.strictEqual(Exit.isSuccess(cart), ok)
            if (!Exit.isSuccess(cart)) return
            parent = cart.value
            grantor = carol
          }
          const payment = runExit(attenuateToPayment({ parent, granteeDid: dave.did, grantorPrivateKey: grantor.key, amountUsd: usd(amount), merchant }))
          if (Exit.isSuccess(payment)) {
            const p = payment.value.constraints
            assert.isTrue(parseUsd(p.amountUsd).pipe((e) => e._tag === "Right" && e.right <= limit))
            assert.isTrue(allowedMerchants === undefined || allowedMerchants.includes(p.merchant))
            runSync(verifyMandate(payment.value.token, resolver, { expectedGrantee: dave.did }))
          } else {
            const pl = parent.constraints
            const plMicros = parseUsd(pl.spendLimitUsd).pipe((e) => (e._tag === "Right" ? e.right : -1))
            assert.isTrue(amount > plMicros || (pl.allowedMerchants !== undefined && !pl.allowedMerchants.includes(merchant)))
          }
        }
      ),
      { numRuns: 150 }
    )
  })
})

describe("tamper properties", () => {
  const chain = runSync(Effect.gen(function* () {
    const intent = yield* issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.key, constraints: { spendLimitUsd: 100, allowedMerchants: ["shop"] } })
    const cart = yield* attenuateToCart({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.key, narrowed: { spendLimitUsd: 50, allowedMerchants: ["shop"] } })
    return yield* attenuateToPayment({ parent: cart, granteeDid: dave.did, grantorPrivateKey: carol.key, amountUsd: 20, merchant: "shop" })
  }))
  const token = chain.token
  const verifies = (t: string) => Exit.isSuccess(runExit(verifyMandate(t, resolver)))
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \n"

  it("the untampered chain verifies", () => {
    assert.isTrue(verifies(token))
  })

  it("replacing, inserting or deleting any character, or truncating, never verifies", () => {
    const edit = fc.oneof(
      fc.record({ op: fc.constant("replace" as const), at: fc.nat(token.length - 1), c: fc.constantFrom(...chars) }),
      fc.record({ op: fc.constant("insert" as const), at: fc.nat(token.length), c: fc.constantFrom(...chars) }),
      fc.record({ op: fc.constant("delete" as const), at: fc.nat(token.length - 1), c: fc.constant("") }),
      fc.record({ op: fc.constant("truncate" as const), at: fc.nat(token.length - 1), c: fc.constant("") })
    )
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 3 }), (edits) => {
        let t = token
        for (const e of edits) {
          const at = Math.min(e.at, t.length)
          t = e.op === "replace" ? t.slice(0, at) + e.c + t.slice(at + 1)
            : e.op === "insert" ? t.slice(0, at) + e.c + t.slice(at)
            : e.op === "delete" ? t.slice(0, at) + t.slice(at + 1)
            : t.slice(0, at)
        }
        fc.pre(t !== token)
        assert.isFalse(verifies(t))
      }),
      { numRuns: 600 }
    )
  })

  it("re-encoding or editing the JSON of any link (without the grantor's key) never verifies", () => {
    // Rebuilds the leaf with its payload (or a parent's, through prf) re-serialized or edited, keeping signatures.
    const reencode = (t: string, depth: number, edit: (p: Record<string, unknown>) => Record<string, unknown>): string => {
      const [h, p, s] = t.split(".") as [string, string, string]
      const payload = JSON.parse(Buffer.from(p, "base64url").toString()) as Record<string, unknown>
      const next = depth === 0 ? edit(payload) : { ...payload, prf: reencode(payload.prf as string, depth - 1, edit) }
      return `${h}.${Buffer.from(JSON.stringify(next, null, depth % 2)).toString("base64url")}.${s}`
    }
    const edits: ReadonlyArray<(p: Record<string, unknown>) => Record<string, unknown>> = [
      (p) => p,
      (p) => ({ ...p, exp: (p.exp as number) + 1 }),
      (p) => ({ ...p, aud: "did:mesh:mallory" }),
      (p) => ({ ...p, cns: { ...(p.cns as object), spendLimitUsd: 1000 } }),
      (p) => Object.fromEntries(Object.entries(p).reverse())
    ]
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: edits.length - 1 }), (depth, i) => {
        const t = reencode(token, depth, edits[i]!)
        fc.pre(t !== token)
        assert.isFalse(verifies(t))
      }),
      { numRuns: 60 }
    )
  })
})
