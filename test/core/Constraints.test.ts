import { assert, describe, it } from "@effect/vitest"
import {
  type AnyConstraints,
  CONSTRAINT_MEMBERS,
  constraintsProblem,
  MAX_LIST_ENTRIES,
  type MandateKind,
  narrowingViolation,
  normalizeTask,
  withCanonicalUsd
} from "../../src/core/Constraints.js"

// Every shape check of `constraintsProblem`, one bad value at a time on an otherwise valid `cns`: each must be
// refused, and the refusal must name the member it is about (the verifier's `reason` detail a user reads).

const spending = { spendLimitUsd: 10, allowedMerchants: ["shop"] }
const payment = { amountUsd: 5, merchant: "shop" }
const task = {
  allowed: ["read"],
  blocked: ["delete"],
  reversibleOnly: false,
  humanGates: ["pay"],
  actionLimits: { read: 3 },
  computeLimit: { llmTokens: 100, webRequests: 2 },
  dataAccess: ["inbox"],
  sandbox: true,
  maxDelegationDepth: 1
}
const model = { token_budget: 1000, cost_budget_usd: 1, quality_threshold: 0.5, task_type: "CODE", expected_steps: 3 }

const long = "x".repeat(257)
const many = Array.from({ length: MAX_LIST_ENTRIES + 1 }, (_, i) => `c${i}`)
const manyLimits = Object.fromEntries(many.map((c) => [c, 1]))

type Case = readonly [kind: MandateKind, base: Record<string, unknown>, member: string, bad: unknown, names: string]
const cases: ReadonlyArray<Case> = [
  ["intent", spending, "spendLimitUsd", "10", "spendLimitUsd"],
  ["intent", spending, "spendLimitUsd", undefined, "spendLimitUsd"],
  ["intent", spending, "spendLimitUsd", -1, "spendLimitUsd"],
  ["intent", spending, "spendLimitUsd", 0.0000001, "spendLimitUsd"],
  ["cart", spending, "allowedMerchants", "shop", "allowedMerchants"],
  ["cart", spending, "allowedMerchants", [""], "allowedMerchants"],
  ["cart", spending, "allowedMerchants", [long], "allowedMerchants"],
  ["cart", spending, "allowedMerchants", many, "allowedMerchants"],
  ["cart", spending, "allowedMerchants", [1], "allowedMerchants"],
  ["intent", spending, "extra", 1, "extra"],
  ["payment", payment, "amountUsd", "5", "amountUsd"],
  ["payment", payment, "amountUsd", Number.NaN, "amountUsd"],
  ["payment", payment, "merchant", "", "merchant"],
  ["payment", payment, "merchant", 7, "merchant"],
  ["payment", payment, "merchant", long, "merchant"],
  ["payment", payment, "merchant", undefined, "merchant"],
  ["payment", payment, "spendLimitUsd", 5, "spendLimitUsd"],
  ["task", task, "allowed", undefined, "allowed"],
  ["task", task, "allowed", "read", "allowed"],
  ["task", task, "allowed", many, "allowed"],
  ["task", task, "blocked", "delete", "blocked"],
  ["task", task, "blocked", [""], "blocked"],
  ["task", task, "blocked", many, "blocked"],
  ["task", task, "humanGates", {}, "humanGates"],
  ["task", task, "humanGates", [long], "humanGates"],
  ["task", task, "dataAccess", "inbox", "dataAccess"],
  ["task", task, "dataAccess", [null], "dataAccess"],
  ["task", task, "reversibleOnly", "yes", "reversibleOnly"],
  ["task", task, "reversibleOnly", 1, "reversibleOnly"],
  ["task", task, "sandbox", "true", "sandbox"],
  ["task", task, "sandbox", null, "sandbox"],
  ["task", task, "maxDelegationDepth", -1, "maxDelegationDepth"],
  ["task", task, "maxDelegationDepth", 1.5, "maxDelegationDepth"],
  ["task", task, "maxDelegationDepth", undefined, "maxDelegationDepth"],
  ["task", task, "maxDelegationDepth", "1", "maxDelegationDepth"],
  ["task", task, "actionLimits", [], "actionLimits"],
  ["task", task, "actionLimits", null, "actionLimits"],
  ["task", task, "actionLimits", 3, "actionLimits"],
  ["task", task, "actionLimits", { read: -1 }, "actionLimits.read"],
  ["task", task, "actionLimits", { read: 1.5 }, "actionLimits.read"],
  ["task", task, "actionLimits", { read: "3" }, "actionLimits.read"],
  ["task", task, "actionLimits", { read: Number.MAX_SAFE_INTEGER + 1 }, "actionLimits.read"],
  ["task", task, "actionLimits", { "": 1 }, "actionLimits"],
  ["task", task, "actionLimits", { [long]: 1 }, "actionLimits"],
  ["task", task, "actionLimits", manyLimits, "actionLimits"],
  ["task", task, "actionLimits", JSON.parse('{"__proto__": 1}'), "actionLimits"],
  ["task", task, "computeLimit", [], "computeLimit"],
  ["task", task, "computeLimit", 100, "computeLimit"],
  ["task", task, "computeLimit", { llmTokens: -1 }, "computeLimit.llmTokens"],
  ["task", task, "computeLimit", { llmTokens: 0.5 }, "computeLimit.llmTokens"],
  ["task", task, "computeLimit", { webRequests: -2 }, "computeLimit.webRequests"],
  ["task", task, "computeLimit", { webRequests: "2" }, "computeLimit.webRequests"],
  ["task", task, "computeLimit", { cpuSeconds: 1 }, "cpuSeconds"],
  ["task", task, "unknown", true, "unknown"],
  ["model-budget", model, "token_budget", -1, "token_budget"],
  ["model-budget", model, "token_budget", 1.5, "token_budget"],
  ["model-budget", model, "token_budget", "1000", "token_budget"],
  ["model-budget", model, "cost_budget_usd", "1", "cost_budget_usd"],
  ["model-budget", model, "cost_budget_usd", -0.5, "cost_budget_usd"],
  ["model-budget", model, "quality_threshold", -0.01, "quality_threshold"],
  ["model-budget", model, "quality_threshold", 1.01, "quality_threshold"],
  ["model-budget", model, "quality_threshold", "0.5", "quality_threshold"],
  ["model-budget", model, "task_type", "code", "task_type"],
  ["model-budget", model, "task_type", 3, "task_type"],
  ["model-budget", model, "expected_steps", -1, "expected_steps"],
  ["model-budget", model, "expected_steps", 2.5, "expected_steps"],
  ["model-budget", model, "tokens", 1, "tokens"]
]

const withMember = (base: Record<string, unknown>, member: string, value: unknown) => {
  const o: Record<string, unknown> = { ...base }
  if (value === undefined) delete o[member]
  else o[member] = value
  return o
}

describe("constraintsProblem", () => {
  it("accepts each kind's valid constraints, and their boundary values", () => {
    assert.isUndefined(constraintsProblem("intent", spending))
    assert.isUndefined(constraintsProblem("cart", { spendLimitUsd: 0 }))
    assert.isUndefined(constraintsProblem("payment", payment))
    assert.isUndefined(constraintsProblem("payment", { amountUsd: 0, merchant: "m".repeat(256) }))
    assert.isUndefined(constraintsProblem("task", task))
    assert.isUndefined(constraintsProblem("task", { allowed: [], maxDelegationDepth: 0 }))
    assert.isUndefined(constraintsProblem("task", { allowed: many.slice(1), maxDelegationDepth: 0, reversibleOnly: true, sandbox: false }))
    assert.isUndefined(constraintsProblem("task", { allowed: [], maxDelegationDepth: 0, actionLimits: Object.fromEntries(many.slice(1).map((c) => [c, 0])) }))
    assert.isUndefined(constraintsProblem("task", { allowed: [], maxDelegationDepth: 0, computeLimit: {} }))
    assert.isUndefined(constraintsProblem("model-budget", model))
    assert.isUndefined(constraintsProblem("model-budget", { ...model, quality_threshold: 0, token_budget: 0, expected_steps: 0 }))
    assert.isUndefined(constraintsProblem("model-budget", { ...model, quality_threshold: 1 }))
    for (const t of ["REASONING", "CODE", "EXTRACTION", "CREATIVE", "CLASSIFICATION", "SUMMARIZATION"]) {
      assert.isUndefined(constraintsProblem("model-budget", { ...model, task_type: t }), t)
    }
  })

  it("refuses cns that is not an object: null, an array, a string", () => {
    for (const kind of ["intent", "cart", "payment", "task", "model-budget"] as const) {
      for (const cns of [null, [], "x", 1, undefined]) {
        assert.match(constraintsProblem(kind, cns) ?? "", /constraints must be an object/, `${kind} ${JSON.stringify(cns)}`)
      }
    }
  })

  it.each(cases.map(([kind, base, member, bad, names]) => ({ kind, base, member, bad, names, label: `${kind} ${member}=${JSON.stringify(bad)?.slice(0, 40)}` })))(
    "refuses $label, naming the member",
    ({ base, bad, kind, member, names }) => {
      const problem = constraintsProblem(kind, withMember(base, member, bad))
      assert.isString(problem)
      assert.include(problem, names)
    }
  )
})

const narrow = (kind: MandateKind, parent: Record<string, unknown>, child: Record<string, unknown>, childKind: MandateKind = kind) =>
  narrowingViolation(kind, parent as unknown as AnyConstraints, childKind, child as unknown as AnyConstraints)

describe("narrowingViolation at the boundaries", () => {
  it("a model-budget child equal to its parent is within it; one unit more on any member is not", () => {
    assert.isUndefined(narrow("model-budget", model, model))
    const over: ReadonlyArray<[string, unknown]> = [
      ["token_budget", 1001],
      ["cost_budget_usd", 1.000001],
      ["quality_threshold", 0.49],
      ["task_type", "REASONING"],
      ["expected_steps", 4]
    ]
    for (const [member, value] of over) {
      const v = narrow("model-budget", model, { ...model, [member]: value })
      assert.strictEqual(v?.reason, "ATTENUATION_WIDENED", member)
      assert.include(v?.message, member)
    }
    assert.isUndefined(narrow("model-budget", model, { ...model, token_budget: 999, cost_budget_usd: 0.999999, quality_threshold: 0.51, expected_steps: 2 }))
  })

  it("spending children: equal amounts pass, a micro-dollar more does not; merchants narrow", () => {
    assert.isUndefined(narrow("intent", spending, spending, "cart"))
    assert.strictEqual(narrow("intent", spending, { ...spending, spendLimitUsd: 10.000001 }, "cart")?.reason, "ATTENUATION_WIDENED")
    assert.isUndefined(narrow("intent", spending, payment, "payment"))
    assert.isUndefined(narrow("intent", spending, { amountUsd: 10, merchant: "shop" }, "payment"))
    assert.strictEqual(narrow("intent", spending, { amountUsd: 10.000001, merchant: "shop" }, "payment")?.reason, "ATTENUATION_WIDENED")
    // A payment's own merchant, on its own: outside the parent's list is a widening.
    const other = narrow("cart", spending, { amountUsd: 1, merchant: "elsewhere" }, "payment")
    assert.strictEqual(other?.reason, "ATTENUATION_WIDENED")
    assert.include(other?.message, "elsewhere")
    // A parent with no merchant list allows any merchant; a child dropping the parent's list widens it.
    assert.isUndefined(narrow("intent", { spendLimitUsd: 10 }, { amountUsd: 1, merchant: "anyone" }, "payment"))
    assert.strictEqual(narrow("intent", spending, { spendLimitUsd: 1 }, "cart")?.reason, "ATTENUATION_WIDENED")
    assert.isUndefined(narrow("intent", { spendLimitUsd: 10 }, { spendLimitUsd: 1 }, "cart"))
  })

  it("kinds chain only as the protocol says", () => {
    assert.strictEqual(narrow("payment", payment, payment)?.reason, "CHAIN_BROKEN")
    assert.strictEqual(narrow("cart", spending, spending, "intent")?.reason, "CHAIN_BROKEN")
    assert.strictEqual(narrow("intent", spending, spending)?.reason, "CHAIN_BROKEN")
    assert.strictEqual(narrow("task", task, model, "model-budget")?.reason, "CHAIN_BROKEN")
    assert.strictEqual(narrow("model-budget", model, task, "task")?.reason, "CHAIN_BROKEN")
  })

  it("task children: every member narrows, each widening named", () => {
    const parent = normalizeTask(task as never) as unknown as Record<string, unknown>
    const child = { ...parent, maxDelegationDepth: 0 }
    assert.isUndefined(narrow("task", parent, child))
    assert.strictEqual(narrow("task", { ...parent, maxDelegationDepth: 0 }, child)?.reason, "DEPTH_EXCEEDED")
    const widenings: ReadonlyArray<[string, Record<string, unknown>]> = [
      ["maxDelegationDepth", { maxDelegationDepth: 1 }],
      ["allowed", { allowed: ["read", "write"] }],
      ["blocked", { blocked: [] }],
      ["humanGates", { humanGates: [] }],
      ["sandbox", { sandbox: false }],
      ["dataAccess", { dataAccess: ["inbox", "calendar"] }],
      ["actionLimits.read", { actionLimits: { read: 4 } }],
      ["actionLimits.read", { actionLimits: {} }],
      ["computeLimit.llmTokens", { computeLimit: { llmTokens: 101, webRequests: 2 } }],
      ["computeLimit.webRequests", { computeLimit: { llmTokens: 100 } }]
    ]
    for (const [member, change] of widenings) {
      const v = narrow("task", parent, { ...child, ...change })
      assert.strictEqual(v?.reason, "ATTENUATION_WIDENED", member)
      assert.include(v?.message, member)
    }
    const reversible = { ...parent, reversibleOnly: true }
    const r = narrow("task", reversible, { ...child, reversibleOnly: false })
    assert.include(r?.message, "reversibleOnly")
    assert.isUndefined(narrow("task", reversible, { ...child, reversibleOnly: true }))
    // Equal limits are within the parent; tighter ones too.
    assert.isUndefined(narrow("task", parent, { ...child, actionLimits: { read: 3, other: 9 }, computeLimit: { llmTokens: 100, webRequests: 0 } }))
    // A capability named like an Object.prototype member is not read from the prototype.
    assert.strictEqual(narrow("task", { ...parent, actionLimits: { constructor: 1 } }, { ...child, actionLimits: {} })?.reason, "ATTENUATION_WIDENED")
  })
})

describe("constraintsProblem and narrowingViolation: what a refusal names", () => {
  it("an unknown member is named with where it is and the members allowed there", () => {
    const bases: ReadonlyArray<readonly [MandateKind, Record<string, unknown>]> = [["intent", spending], ["cart", spending], ["payment", payment], ["task", task], ["model-budget", model]]
    for (const [kind, base] of bases) {
      assert.strictEqual(constraintsProblem(kind, { ...base, extra: 1 }), `constraints: unknown member extra; allowed: ${CONSTRAINT_MEMBERS[kind].join(", ")}`, kind)
    }
    assert.strictEqual(constraintsProblem("intent", { maxAmountUsd: 5 }), "constraints: unknown member maxAmountUsd; allowed: spendLimitUsd, allowedMerchants")
    assert.strictEqual(constraintsProblem("task", { ...task, computeLimit: { cpuSeconds: 1 } }), "computeLimit: unknown member cpuSeconds; allowed: llmTokens, webRequests")
    assert.strictEqual(constraintsProblem("intent", { ...spending, "a b": 1 }), "constraints: unknown member \"a b\"; allowed: spendLimitUsd, allowedMerchants")
  })

  it("withCanonicalUsd writes a USD member given as a decimal string or a number as the canonical number", () => {
    assert.deepStrictEqual(withCanonicalUsd("intent", { spendLimitUsd: "5.00", allowedMerchants: ["m"] }), { spendLimitUsd: 5, allowedMerchants: ["m"] })
    assert.deepStrictEqual(withCanonicalUsd("payment", { amountUsd: "0.250", merchant: "m" }), { amountUsd: 0.25, merchant: "m" })
    assert.deepStrictEqual(withCanonicalUsd("model-budget", { ...model, cost_budget_usd: "1.5e0" }), { ...model, cost_budget_usd: 1.5 })
    assert.deepStrictEqual(withCanonicalUsd("cart", { spendLimitUsd: 2.5 }), { spendLimitUsd: 2.5 })
    // Not an amount: left for constraintsProblem to name.
    assert.deepStrictEqual(withCanonicalUsd("intent", { spendLimitUsd: "five" }), { spendLimitUsd: "five" })
    assert.deepStrictEqual(withCanonicalUsd("intent", { spendLimitUsd: "0.1234567" }), { spendLimitUsd: "0.1234567" })
  })

  it("a task_type outside the list is refused with the list", () => {
    for (const bad of ["code", 3, null]) {
      const problem = constraintsProblem("model-budget", { ...model, task_type: bad })
      assert.include(problem, "task_type")
      assert.include(problem, "REASONING, CODE, EXTRACTION, CREATIVE, CLASSIFICATION, SUMMARIZATION")
    }
  })

  it("widenings name the member, both values, and \"unlimited\" for a limit the child drops", () => {
    const parent = normalizeTask(task as never) as unknown as Record<string, unknown>
    const child = { ...parent, maxDelegationDepth: 0 }
    const dropped = narrow("task", parent, { ...child, actionLimits: {} })
    assert.include(dropped?.message, "actionLimits.read: unlimited")
    const droppedCompute = narrow("task", parent, { ...child, computeLimit: { llmTokens: 100 } })
    assert.include(droppedCompute?.message, "computeLimit.webRequests: unlimited")
    const raised = narrow("task", parent, { ...child, computeLimit: { llmTokens: 150, webRequests: 2 } })
    assert.include(raised?.message, "computeLimit.llmTokens: 150")
    assert.include(narrow("task", { ...parent, maxDelegationDepth: 0 }, child)?.message, "maxDelegationDepth 0")
    const cart = narrow("intent", spending, { ...spending, spendLimitUsd: 10.5 }, "cart")
    for (const n of ["spendLimitUsd", "10.5", "10"]) assert.include(cart?.message, n)
    const pay = narrow("intent", spending, { amountUsd: 11, merchant: "shop" }, "payment")
    for (const n of ["amountUsd", "11", "spendLimitUsd"]) assert.include(pay?.message, n)
    assert.include(narrow("intent", spending, { spendLimitUsd: 1 }, "cart")?.message, "allowedMerchants")
    const kinds = narrow("cart", spending, spending, "intent")
    assert.include(kinds?.message, "cart")
    assert.include(kinds?.message, "intent")
  })

  it("task constraints signed without their optional members narrow by the documented defaults", () => {
    const bare = { allowed: ["read"], maxDelegationDepth: 1 }
    // Missing lists are empty: nothing blocked, gated or granted on either side, so nothing widens.
    assert.isUndefined(narrow("task", bare, { allowed: ["read"], maxDelegationDepth: 0 }))
    assert.isUndefined(narrow("task", bare, { allowed: [], maxDelegationDepth: 0, blocked: ["read"], humanGates: ["read"] }))
    assert.strictEqual(narrow("task", bare, { allowed: ["read"], maxDelegationDepth: 0, dataAccess: ["inbox"] })?.reason, "ATTENUATION_WIDENED")
    // A parent's list against a child that omits it.
    assert.include(narrow("task", { ...bare, blocked: ["wipe"] }, { allowed: ["read"], maxDelegationDepth: 0 })?.message, "blocked")
    assert.include(narrow("task", { ...bare, humanGates: ["read"] }, { allowed: ["read"], maxDelegationDepth: 0 })?.message, "humanGates")
    assert.include(narrow("task", { ...bare, computeLimit: { llmTokens: 5 } }, { allowed: ["read"], maxDelegationDepth: 0 })?.message, "computeLimit.llmTokens: unlimited")
    assert.include(narrow("task", { ...bare, actionLimits: { read: 5 } }, { allowed: ["read"], maxDelegationDepth: 0 })?.message, "actionLimits.read: unlimited")
  })

  it("normalizeTask writes every default in, and copies what is given", () => {
    assert.deepStrictEqual(normalizeTask({ allowed: ["read"], maxDelegationDepth: 2 }), {
      allowed: ["read"],
      blocked: [],
      reversibleOnly: false,
      humanGates: [],
      actionLimits: {},
      computeLimit: {},
      dataAccess: [],
      sandbox: false,
      maxDelegationDepth: 2
    })
    const full = {
      allowed: ["read"],
      blocked: ["wipe"],
      reversibleOnly: true,
      humanGates: ["pay"],
      actionLimits: { read: 3 },
      computeLimit: { llmTokens: 10, webRequests: 0 },
      dataAccess: ["inbox"],
      sandbox: true,
      maxDelegationDepth: 0
    }
    const n = normalizeTask(full)
    assert.deepStrictEqual(n, full)
    assert.notStrictEqual(n.actionLimits, full.actionLimits)
    assert.deepStrictEqual(normalizeTask({ allowed: [], maxDelegationDepth: 0, computeLimit: { webRequests: 1 } }).computeLimit, { webRequests: 1 })
  })
})
