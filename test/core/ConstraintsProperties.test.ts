import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import * as TestClock from "effect/TestClock"
import fc from "fast-check"
import { CONSTRAINT_MEMBERS, constraintsProblem, type MandateKind } from "../../src/core/Constraints.js"
import type { Keys } from "../../src/core/Keys.js"
import { verifyMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import {
  brokenConstraints,
  extraMember,
  modelBudgetConstraints,
  paymentConstraints,
  spendingConstraints,
  taskConstraints
} from "../support/arbitraries.js"
import { cast, headerFor, resolverFor, signRaw } from "../support/mandates.js"

// Generated constraints at and past every bound: the valid ones are accepted whatever their optional members, and
// one wrong member (wrong type, out of range, over-long, missing, unknown) is refused, naming that member.

const T0 = 1_800_000_000_000

describe("constraintsProblem on generated constraints", () => {
  it("accepts every valid cns of each kind, at its bounds, with or without optional members", () => {
    const kinds: ReadonlyArray<readonly [MandateKind, fc.Arbitrary<Record<string, unknown>>]> = [
      ["task", taskConstraints],
      ["intent", spendingConstraints],
      ["cart", spendingConstraints],
      ["payment", paymentConstraints],
      ["model-budget", modelBudgetConstraints]
    ]
    for (const [kind, arb] of kinds) {
      fc.assert(fc.property(arb, (cns) => assert.isUndefined(constraintsProblem(kind, cns), JSON.stringify(cns).slice(0, 300))), { numRuns: 300 })
    }
  })

  it("refuses a cns with one member of the wrong type, out of range, over-long or missing, naming the member", () => {
    for (const kind of ["task", "intent", "payment", "model-budget"] as const) {
      fc.assert(
        fc.property(brokenConstraints(kind), ({ cns, member }) => {
          const problem = constraintsProblem(kind, cns)
          assert.isString(problem, `${kind}.${member}`)
          assert.include(problem, member)
          if (kind === "intent") assert.strictEqual(constraintsProblem("cart", cns), problem)
        }),
        { numRuns: 400 }
      )
    }
  })

  it("refuses an unknown member of any name and value, quoting its name", () => {
    for (const kind of ["task", "intent", "payment", "model-budget"] as const) {
      fc.assert(
        fc.property(extraMember(kind), ({ cns, key }) => assert.strictEqual(
          constraintsProblem(kind, cns),
          `constraints: unknown member ${/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(key) ? key : JSON.stringify(key)}; allowed: ${CONSTRAINT_MEMBERS[kind].join(", ")}`
        )),
        { numRuns: 200 }
      )
    }
  })

  it.effect("through the verifier: a signed token whose cns has one bad member is MANDATE_INVALID, MALFORMED", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const { alice, bob } = yield* cast
      const resolver = resolverFor([alice, bob])
      const run = Runtime.runPromise(yield* Effect.runtime<Keys>())
      const now = Math.floor(T0 / 1000)
      const kindArb = fc.constantFrom("task", "intent", "payment", "model-budget")
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(kindArb.chain((kind) => brokenConstraints(kind).map((b) => ({ kind, ...b }))), ({ kind, cns, member }) =>
            run(Effect.gen(function* () {
              const payload = { iss: alice.did, aud: bob.did, iat: now, nbf: now, exp: now + 600, jti: "generatedmandate00001", kv: 1, kind, cns }
              const token = yield* signRaw(headerFor(alice.did), payload, alice.key)
              const e = yield* Effect.flip(verifyMandate(token, resolver, { expectedGrantee: bob.did }))
              assert.strictEqual(e.code, "MANDATE_INVALID", `${kind}.${member}`)
              assert.strictEqual(e.reason, "MALFORMED", `${kind}.${member}: ${e.message}`)
            }))
          ),
          { numRuns: 60 }
        )
      )
    }).pipe(Effect.provide(KeysNative.layer)))
})
