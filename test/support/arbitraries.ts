/**
 * fast-check arbitraries that reach the edges of the wire shapes: values of the wrong type, boundary values (a
 * count at 0 and at the largest safe integer, a name of 1 and of 256 characters, a list of 64 entries) and values
 * one step past them (257 characters, 65 entries, a fraction, a negative, a number past 2^53).
 */
import fc from "fast-check"
import { MAX_LIST_ENTRIES, TASK_TYPES } from "../../src/core/Constraints.js"

/** Values of every JSON-ish type, and strings at and past the lengths the envelope checks, for any member. */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.string(), { maxKeys: 2 }),
  fc.string({ maxLength: 3 }),
  fc.constant(""),
  fc.string({ minLength: 127, maxLength: 130 }),
  fc.string({ minLength: 255, maxLength: 258 }),
  fc.stringMatching(/^[A-Za-z0-9_-]{14,18}$/),
  fc.stringMatching(/^[A-Za-z0-9_-]{127,130}$/),
  fc.constant("2026-06-01T00:00:00.000Z"),
  fc.constant("2026-02-30T00:00:00Z"),
  fc.constant("did:mesh:ABC"),
  fc.constant("zABC")
)

/** A value that is not JSON-typed as `kind` says (never undefined: a missing member is its own case). */
const notA = (kind: "number" | "string" | "boolean" | "array" | "object"): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.integer(),
    fc.string({ maxLength: 4 }),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.integer(), { maxLength: 2 }),
    fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 })
  ).filter((v) => {
    switch (kind) {
      case "number": return typeof v !== "number"
      case "string": return typeof v !== "string"
      case "boolean": return typeof v !== "boolean"
      case "array": return !Array.isArray(v)
      case "object": return v === null || typeof v !== "object" || Array.isArray(v)
    }
  })

/** A count within bounds: 0, small, and the largest safe integer. */
export const count: fc.Arbitrary<number> = fc.oneof(fc.constantFrom(0, Number.MAX_SAFE_INTEGER), fc.nat(1_000))

/** Numbers that are not counts: negative, fractional, past 2^53, NaN and the infinities. */
export const badCount: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(-1, 0.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  fc.integer({ max: -1 }),
  fc.double({ min: 0.001, max: 1e6, noInteger: true, noNaN: true }),
  notA("number")
)

/** A capability, merchant or scope name: 1 to 256 characters, the bounds included. */
export const name: fc.Arbitrary<string> = fc.oneof(
  fc.string({ minLength: 1, maxLength: 12 }),
  fc.constantFrom("x", "y".repeat(256))
)

/** Not a name: empty, over-long (257 and more), or not a string. */
export const badName: fc.Arbitrary<unknown> = fc.oneof(fc.constant(""), fc.string({ minLength: 257, maxLength: 300 }), notA("string"))

/** A list of names, up to the 64 entries allowed. */
export const nameList: fc.Arbitrary<ReadonlyArray<string>> = fc.oneof(
  fc.uniqueArray(name, { maxLength: 4 }),
  fc.constant(Array.from({ length: MAX_LIST_ENTRIES }, (_, i) => `n${i}`))
)

/** Not a list of names: not an array, one entry more than allowed, or an entry that is not a name. */
export const badNameList: fc.Arbitrary<unknown> = fc.oneof(
  notA("array"),
  fc.constant(Array.from({ length: MAX_LIST_ENTRIES + 1 }, (_, i) => `n${i}`)),
  fc.tuple(fc.array(name, { maxLength: 3 }), badName).map(([ok, bad]) => [...ok, bad])
)

/** A USD amount the protocol accepts: whole, with up to six decimals, and 0. */
export const usd: fc.Arbitrary<number> = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 100_000_000 }).map((micros) => micros / 1_000_000))

/** Not a USD amount: negative, more than six decimals, not finite, or not a number. */
export const badUsd: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(-0.01, 0.0000001, 1.2345678, Number.NaN, Number.POSITIVE_INFINITY),
  notA("number")
)

/** Valid task constraints, reaching every member's bounds; optional members present or not. */
export const taskConstraints: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    allowed: nameList,
    blocked: nameList,
    reversibleOnly: fc.boolean(),
    humanGates: nameList,
    actionLimits: fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }).filter((k) => k !== "__proto__"), count, { maxKeys: 4 }),
    computeLimit: fc.record({ llmTokens: count, webRequests: count }, { requiredKeys: [] }),
    dataAccess: nameList,
    sandbox: fc.boolean(),
    maxDelegationDepth: count
  },
  { requiredKeys: ["allowed", "maxDelegationDepth"] }
)

/** Valid constraints of each other kind. */
export const spendingConstraints = fc.record({ spendLimitUsd: usd, allowedMerchants: nameList }, { requiredKeys: ["spendLimitUsd"] })
export const paymentConstraints = fc.record({ amountUsd: usd, merchant: name })
export const modelBudgetConstraints = fc.record({
  token_budget: count,
  cost_budget_usd: usd,
  quality_threshold: fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true })),
  task_type: fc.constantFrom(...TASK_TYPES),
  expected_steps: count
})

/** For each kind, a bad value for each member (undefined: the member is missing where it is required). */
export const badMembers = {
  task: {
    allowed: fc.oneof(badNameList, fc.constant(undefined)),
    blocked: badNameList,
    humanGates: badNameList,
    dataAccess: badNameList,
    reversibleOnly: notA("boolean"),
    sandbox: notA("boolean"),
    maxDelegationDepth: fc.oneof(badCount, fc.constant(undefined)),
    actionLimits: fc.oneof(
      notA("object"),
      fc.tuple(name, badCount).map(([k, v]) => ({ [k]: v })),
      fc.constantFrom({ "": 1 }, { ["k".repeat(257)]: 1 }, Object.fromEntries(Array.from({ length: MAX_LIST_ENTRIES + 1 }, (_, i) => [`c${i}`, 1])))
    ),
    computeLimit: fc.oneof(
      notA("object"),
      fc.tuple(fc.constantFrom("llmTokens", "webRequests"), badCount).map(([k, v]) => ({ [k]: v })),
      fc.constant({ cpuSeconds: 1 })
    )
  },
  intent: { spendLimitUsd: fc.oneof(badUsd, fc.constant(undefined)), allowedMerchants: badNameList },
  payment: { amountUsd: fc.oneof(badUsd, fc.constant(undefined)), merchant: fc.oneof(badName, fc.constant(undefined)) },
  "model-budget": {
    token_budget: fc.oneof(badCount, fc.constant(undefined)),
    cost_budget_usd: fc.oneof(badUsd, fc.constant(undefined)),
    quality_threshold: fc.oneof(fc.constantFrom(-0.001, 1.001, Number.NaN, undefined), notA("number")),
    task_type: fc.oneof(fc.constantFrom("code", "", "REASONING ", undefined), notA("string")),
    expected_steps: fc.oneof(badCount, fc.constant(undefined))
  }
} as const

/** A valid `cns` of `kind` with one member replaced by a bad value (or removed), and that member's name. */
export const brokenConstraints = (kind: keyof typeof badMembers) => {
  const valid = { task: taskConstraints, intent: spendingConstraints, payment: paymentConstraints, "model-budget": modelBudgetConstraints }[kind]
  const members = badMembers[kind] as Record<string, fc.Arbitrary<unknown>>
  return fc.tuple(valid, fc.constantFrom(...Object.keys(members))).chain(([cns, member]) =>
    members[member]!.map((bad) => {
      const broken: Record<string, unknown> = { ...cns }
      if (bad === undefined) delete broken[member]
      else broken[member] = bad
      return { cns: broken, member }
    })
  )
}

/** A valid `cns` of `kind` with one member it does not have, of any value. */
export const extraMember = (kind: keyof typeof badMembers) => {
  const valid = { task: taskConstraints, intent: spendingConstraints, payment: paymentConstraints, "model-budget": modelBudgetConstraints }[kind]
  const known = new Set(Object.keys(badMembers[kind]))
  return fc.tuple(valid, fc.string({ minLength: 1, maxLength: 300 }).filter((k) => !known.has(k) && k !== "__proto__"), wrongValue.filter((v) => v !== undefined))
    .map(([cns, key, value]) => ({ cns: { ...cns, [key]: value } as Record<string, unknown>, key }))
}

/**
 * A mandate's `iat`, `nbf` or `exp` around `now`: at, one second before and after each moment a verifier compares it
 * with (`now`, `now ± tolerance`, each other), the NumericDate bounds 0 and 2^53 - 1, or not a NumericDate at all.
 */
export const numericDate = (now: number, tolerance: number): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(-tolerance - 1, -tolerance, -1, 0, 1, tolerance - 1, tolerance, tolerance + 1, 60).map((d) => now + d) },
    { weight: 1, arbitrary: fc.constantFrom(0, Number.MAX_SAFE_INTEGER) },
    { weight: 1, arbitrary: fc.oneof(fc.constantFrom(-1, now + 0.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN, `${now}`, null), notA("number")) }
  )
