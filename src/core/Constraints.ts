/**
 * The `cns` claim of a mandate, per kind: its JSON shape, how it is checked, and the narrowing rule an attenuated
 * child must satisfy against its parent (docs/protocol.md §9.4).
 *
 * Validation is hand-written rather than a Schema decode because it runs on every link of every verified chain;
 * it is strict: an unknown member, a wrong type or an out-of-range number makes the mandate MALFORMED, because a
 * constraint a verifier silently ignored would widen the authority.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Either from "effect/Either"
import { isRecord } from "./internal/record.js"
import { formatUsd, type Micros, parseUsd } from "./Money.js"

/** The mandate kinds (`kind` claim). */
export const MANDATE_KINDS = ["intent", "cart", "payment", "task", "model-budget"] as const
/** A mandate kind (`kind` claim). */
export type MandateKind = (typeof MANDATE_KINDS)[number]

/** Constraints of an intent or cart mandate: an upper bound on spending and, optionally, who may be paid. */
export interface SpendingConstraints {
  /** Upper bound in USD (decimal, at most six decimals). */
  readonly spendLimitUsd: number
  /** Merchants that may be paid; absent means any merchant. */
  readonly allowedMerchants?: ReadonlyArray<string>
}

/** Constraints of a payment mandate: one amount to one merchant. */
export interface PaymentConstraints {
  readonly amountUsd: number
  readonly merchant: string
}

/** Per-mandate compute budget. An absent member is unlimited. */
export interface ComputeLimit {
  /** LLM tokens (prompt + completion). */
  readonly llmTokens?: number
  /** Outbound web requests. */
  readonly webRequests?: number
}

/** Constraints of a task mandate. Optional members take the defaults documented on each. */
export interface TaskConstraints {
  /** Capabilities that may be exercised (exact names). */
  readonly allowed: ReadonlyArray<string>
  /** Capabilities that may never be exercised, even if allowed (default none). */
  readonly blocked?: ReadonlyArray<string>
  /** Only reversible actions (default false). */
  readonly reversibleOnly?: boolean
  /** Capabilities that need a recorded human approval before each use (default none). */
  readonly humanGates?: ReadonlyArray<string>
  /** Most uses of a capability over the mandate's life, per capability (default no limit). */
  readonly actionLimits?: Readonly<Record<string, number>>
  /** Compute budget over the mandate's life (default unlimited). */
  readonly computeLimit?: ComputeLimit
  /** Data scopes actions may touch (default none). */
  readonly dataAccess?: ReadonlyArray<string>
  /** `sandbox`: actions must run in a sandboxed runtime (default false). */
  readonly sandbox?: boolean
  /** How many further delegations may hang below this mandate (0 = cannot be attenuated). */
  readonly maxDelegationDepth: number
}

/** The task types a model budget names. */
export const TASK_TYPES = ["REASONING", "CODE", "EXTRACTION", "CREATIVE", "CLASSIFICATION", "SUMMARIZATION"] as const
/** A task type a model budget names. */
export type TaskType = (typeof TASK_TYPES)[number]

/** Constraints of a model-budget mandate (JSON names in snake_case, as the spec has them). */
export interface ModelBudgetConstraints {
  /** Most LLM tokens to spend. */
  readonly token_budget: number
  /** Most USD to spend (decimal, at most six decimals). */
  readonly cost_budget_usd: number
  /** Minimum acceptable quality, 0..1. */
  readonly quality_threshold: number
  readonly task_type: TaskType
  /** Expected number of model calls. */
  readonly expected_steps: number
}

/** The constraints carried by a mandate of kind K. */
export type ConstraintsFor<K extends MandateKind> = {
  readonly intent: SpendingConstraints
  readonly cart: SpendingConstraints
  readonly payment: PaymentConstraints
  readonly task: TaskConstraints
  readonly "model-budget": ModelBudgetConstraints
}[K]

/** Constraints of any kind. */
export type AnyConstraints = ConstraintsFor<MandateKind>

/** Largest count accepted in a limit (keeps every counter a safe integer in JS and a 64-bit SQL integer). */
export const MAX_COUNT = Number.MAX_SAFE_INTEGER

/**
 * Most entries in any one constraint list (`allowedMerchants`, `allowed`, `blocked`, `humanGates`, `dataAccess`) and
 * in `actionLimits`. Narrowing compares lists pairwise, so the bound keeps a chain's checks to a few thousand
 * comparisons whatever a token holds (docs/protocol.md §9.3).
 */
export const MAX_LIST_ENTRIES = 64

// ---------------------------------------------------------------------------------------------------------------
// Validation

type Check = string | undefined

// A plain name is shown as it is; anything else quoted, so a member with spaces or control characters stays readable.
const shownName = (k: string): string => (/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(k) ? k : JSON.stringify(k))

const onlyKeys = (o: Record<string, unknown>, allowed: ReadonlyArray<string>, where: string): Check => {
  for (const k in o) if (!allowed.includes(k)) return `${where}: unknown member ${shownName(k)}; allowed: ${allowed.join(", ")}`
  return undefined
}

const isCount = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0

const checkName = (u: unknown): boolean => typeof u === "string" && u.length > 0 && u.length <= 256

const checkNameList = (u: unknown, where: string): Check => {
  if (!Array.isArray(u)) return `${where} must be an array of names`
  if (u.length > MAX_LIST_ENTRIES) return `${where} has ${u.length} entries, more than ${MAX_LIST_ENTRIES}`
  for (const x of u) if (!checkName(x)) return `${where} must hold non-empty strings of at most 256 characters`
  return undefined
}

const checkUsd = (u: unknown, where: string): Check => {
  if (typeof u === "string") {
    // Issuers write a decimal string as its number (`withCanonicalUsd`); only a token can still hold one.
    const r = parseUsd(u)
    return Either.isLeft(r) ? `${where}: ${r.left.message}` : `${where} must be a JSON number in a token, not a string`
  }
  if (typeof u !== "number") return `${where} must be a USD amount: a number or a decimal string such as "5.00"`
  const r = parseUsd(u)
  return Either.isLeft(r) ? `${where}: ${r.left.message}` : undefined
}

const SPENDING_KEYS = ["spendLimitUsd", "allowedMerchants"]
const PAYMENT_KEYS = ["amountUsd", "merchant"]
const TASK_KEYS = ["allowed", "blocked", "reversibleOnly", "humanGates", "actionLimits", "computeLimit", "dataAccess", "sandbox", "maxDelegationDepth"]
const COMPUTE_KEYS = ["llmTokens", "webRequests"]
const MODEL_KEYS = ["token_budget", "cost_budget_usd", "quality_threshold", "task_type", "expected_steps"]

/** The constraint members each kind takes, in the order docs/protocol.md §9.3 lists them. */
export const CONSTRAINT_MEMBERS: { readonly [K in MandateKind]: ReadonlyArray<string> } = {
  intent: SPENDING_KEYS,
  cart: SPENDING_KEYS,
  payment: PAYMENT_KEYS,
  task: TASK_KEYS,
  "model-budget": MODEL_KEYS
}

/** The members of each kind that hold a USD amount (docs/protocol.md §9.2). */
const USD_MEMBERS: { readonly [K in MandateKind]: ReadonlyArray<string> } = {
  intent: ["spendLimitUsd"],
  cart: ["spendLimitUsd"],
  payment: ["amountUsd"],
  task: [],
  "model-budget": ["cost_budget_usd"]
}

/**
 * The constraints an issuer signs: each USD member given as a number or as the decimal string Money reads (`"5.00"`)
 * is written as the JSON number of its canonical form, so every token carries one spelling of an amount. A member that
 * is not a USD amount is left as it is, for `constraintsProblem` to name.
 */
export const withCanonicalUsd = (kind: MandateKind, cns: unknown): unknown => {
  if (!isRecord(cns)) return cns
  let out: Record<string, unknown> | undefined
  for (const k of USD_MEMBERS[kind]) {
    const v = cns[k]
    if (typeof v !== "number" && typeof v !== "string") continue
    const micros = parseUsd(v)
    if (Either.isLeft(micros)) continue
    // fromEntries defines members, so an own `__proto__` stays a member (refused as unknown) instead of a prototype.
    out ??= Object.fromEntries(Object.entries(cns))
    out[k] = formatUsd(micros.right)
  }
  return out ?? cns
}

/** Why `cns` is not valid for `kind`, or undefined when it is. */
export const constraintsProblem = (kind: MandateKind, cns: unknown): Check => {
  if (!isRecord(cns)) return "constraints must be an object"
  switch (kind) {
    case "intent":
    case "cart": {
      return onlyKeys(cns, SPENDING_KEYS, "constraints") ??
        checkUsd(cns.spendLimitUsd, "spendLimitUsd") ??
        (cns.allowedMerchants === undefined ? undefined : checkNameList(cns.allowedMerchants, "allowedMerchants"))
    }
    case "payment": {
      return onlyKeys(cns, PAYMENT_KEYS, "constraints") ??
        checkUsd(cns.amountUsd, "amountUsd") ??
        (checkName(cns.merchant) ? undefined : "merchant must be a non-empty string")
    }
    case "task": {
      const problem = onlyKeys(cns, TASK_KEYS, "constraints") ??
        checkNameList(cns.allowed, "allowed") ??
        (cns.blocked === undefined ? undefined : checkNameList(cns.blocked, "blocked")) ??
        (cns.humanGates === undefined ? undefined : checkNameList(cns.humanGates, "humanGates")) ??
        (cns.dataAccess === undefined ? undefined : checkNameList(cns.dataAccess, "dataAccess")) ??
        (cns.reversibleOnly === undefined || typeof cns.reversibleOnly === "boolean" ? undefined : "reversibleOnly must be a boolean") ??
        (cns.sandbox === undefined || typeof cns.sandbox === "boolean" ? undefined : "sandbox must be a boolean") ??
        (isCount(cns.maxDelegationDepth) ? undefined : "maxDelegationDepth must be a non-negative integer")
      if (problem !== undefined) return problem
      if (cns.actionLimits !== undefined) {
        if (!isRecord(cns.actionLimits)) return "actionLimits must be an object"
        let entries = 0
        for (const k in cns.actionLimits) {
          if (++entries > MAX_LIST_ENTRIES) return `actionLimits has more than ${MAX_LIST_ENTRIES} entries`
          // A member named __proto__ would, copied by assignment, replace a prototype instead.
          if (!checkName(k) || k === "__proto__") return "actionLimits keys must be capability names"
          if (!isCount(cns.actionLimits[k])) return `actionLimits.${k} must be a non-negative integer`
        }
      }
      if (cns.computeLimit !== undefined) {
        if (!isRecord(cns.computeLimit)) return "computeLimit must be an object"
        const p = onlyKeys(cns.computeLimit, COMPUTE_KEYS, "computeLimit")
        if (p !== undefined) return p
        for (const k of COMPUTE_KEYS) {
          const v = cns.computeLimit[k]
          if (v !== undefined && !isCount(v)) return `computeLimit.${k} must be a non-negative integer`
        }
      }
      return undefined
    }
    case "model-budget": {
      return onlyKeys(cns, MODEL_KEYS, "constraints") ??
        (isCount(cns.token_budget) ? undefined : "token_budget must be a non-negative integer") ??
        checkUsd(cns.cost_budget_usd, "cost_budget_usd") ??
        (typeof cns.quality_threshold === "number" && cns.quality_threshold >= 0 && cns.quality_threshold <= 1
          ? undefined
          : "quality_threshold must be a number in 0..1") ??
        (typeof cns.task_type === "string" && (TASK_TYPES as ReadonlyArray<string>).includes(cns.task_type)
          ? undefined
          : `task_type must be one of ${TASK_TYPES.join(", ")}`) ??
        (isCount(cns.expected_steps) ? undefined : "expected_steps must be a non-negative integer")
    }
  }
}

/** Micros of a USD number already validated by `constraintsProblem`. */
export const usdMicros = (usd: number): Micros => Either.getOrThrow(parseUsd(usd))

// ---------------------------------------------------------------------------------------------------------------
// Narrowing

/** Which kinds may be attenuated into which: intent → cart | payment, cart → payment, task → task, model-budget → model-budget. */
export const CHILD_KINDS: { readonly [K in MandateKind]: ReadonlyArray<MandateKind> } = {
  intent: ["cart", "payment"],
  cart: ["payment"],
  payment: [],
  task: ["task"],
  "model-budget": ["model-budget"]
}

/** A narrowing failure: the child claims more than its parent, or the parent allows no further delegation. */
export interface NarrowingViolation {
  readonly reason: "ATTENUATION_WIDENED" | "DEPTH_EXCEEDED" | "CHAIN_BROKEN"
  readonly message: string
}

const widened = (message: string): NarrowingViolation => ({ reason: "ATTENUATION_WIDENED", message })

const subset = (child: ReadonlyArray<string>, parent: ReadonlyArray<string>): string | undefined => {
  for (const x of child) if (!parent.includes(x)) return x
  return undefined
}

const merchantsProblem = (parent: SpendingConstraints, merchants: ReadonlyArray<string> | undefined): NarrowingViolation | undefined => {
  if (parent.allowedMerchants === undefined) return undefined
  if (merchants === undefined) return widened("allowedMerchants: the parent restricts merchants, the child does not")
  const extra = subset(merchants, parent.allowedMerchants)
  return extra === undefined ? undefined : widened(`merchant ${JSON.stringify(extra)} is not allowed by the parent`)
}

/**
 * Checks that `child` (of `childKind`) is within `parent` (of `parentKind`); both already validated.
 * Returns the violation, or undefined when the child is at most as wide as the parent.
 */
export const narrowingViolation = (
  parentKind: MandateKind,
  parent: AnyConstraints,
  childKind: MandateKind,
  child: AnyConstraints
): NarrowingViolation | undefined => {
  if (!CHILD_KINDS[parentKind].includes(childKind)) {
    return { reason: "CHAIN_BROKEN", message: `a ${parentKind} mandate cannot be attenuated into a ${childKind} mandate` }
  }
  switch (childKind) {
    case "cart": {
      const p = parent as SpendingConstraints
      const c = child as SpendingConstraints
      if (usdMicros(c.spendLimitUsd) > usdMicros(p.spendLimitUsd)) {
        return widened(`spendLimitUsd ${c.spendLimitUsd} exceeds the parent's ${p.spendLimitUsd}`)
      }
      return merchantsProblem(p, c.allowedMerchants)
    }
    case "payment": {
      const p = parent as SpendingConstraints
      const c = child as PaymentConstraints
      if (usdMicros(c.amountUsd) > usdMicros(p.spendLimitUsd)) {
        return widened(`amountUsd ${c.amountUsd} exceeds the parent's spendLimitUsd ${p.spendLimitUsd}`)
      }
      return merchantsProblem(p, [c.merchant])
    }
    case "task":
      return taskNarrowing(parent as TaskConstraints, child as TaskConstraints)
    case "model-budget":
      return modelBudgetNarrowing(parent as ModelBudgetConstraints, child as ModelBudgetConstraints)
  }
  // An intent child never gets here: no kind lists it in CHILD_KINDS, so it was refused as CHAIN_BROKEN above.
  return undefined
}

const taskNarrowing = (p: TaskConstraints, c: TaskConstraints): NarrowingViolation | undefined => {
  if (p.maxDelegationDepth < 1) {
    return { reason: "DEPTH_EXCEEDED", message: "the parent allows no further delegation (maxDelegationDepth 0)" }
  }
  if (c.maxDelegationDepth > p.maxDelegationDepth - 1) {
    return widened(`maxDelegationDepth ${c.maxDelegationDepth} must be below the parent's ${p.maxDelegationDepth}`)
  }
  let x = subset(c.allowed, p.allowed)
  if (x !== undefined) return widened(`allowed: ${JSON.stringify(x)} is not allowed by the parent`)
  x = subset(p.blocked ?? [], c.blocked ?? [])
  if (x !== undefined) return widened(`blocked: the child unblocks ${JSON.stringify(x)}`)
  x = subset(p.humanGates ?? [], c.humanGates ?? [])
  if (x !== undefined) return widened(`humanGates: the child drops the gate on ${JSON.stringify(x)}`)
  if (p.reversibleOnly === true && c.reversibleOnly !== true) return widened("reversibleOnly: set on the parent, cleared on the child")
  if (p.sandbox === true && c.sandbox !== true) return widened("sandbox: set on the parent, cleared on the child")
  x = subset(c.dataAccess ?? [], p.dataAccess ?? [])
  if (x !== undefined) return widened(`dataAccess: scope ${JSON.stringify(x)} is not granted by the parent`)
  const pl = p.actionLimits ?? {}
  const cl = c.actionLimits ?? {}
  for (const cap of Object.keys(pl)) {
    // Own properties only: a capability named "constructor" must not read Object.prototype.
    const cv = Object.hasOwn(cl, cap) ? cl[cap] : undefined
    if (cv === undefined || cv > pl[cap]!) return widened(`actionLimits.${cap}: ${cv ?? "unlimited"} exceeds the parent's ${pl[cap]}`)
  }
  const pc = p.computeLimit ?? {}
  const cc = c.computeLimit ?? {}
  for (const k of ["llmTokens", "webRequests"] as const) {
    const pv = pc[k]
    const cv = cc[k]
    if (pv !== undefined && (cv === undefined || cv > pv)) return widened(`computeLimit.${k}: ${cv ?? "unlimited"} exceeds the parent's ${pv}`)
  }
  return undefined
}

const modelBudgetNarrowing = (p: ModelBudgetConstraints, c: ModelBudgetConstraints): NarrowingViolation | undefined => {
  if (c.token_budget > p.token_budget) return widened(`token_budget ${c.token_budget} exceeds the parent's ${p.token_budget}`)
  if (usdMicros(c.cost_budget_usd) > usdMicros(p.cost_budget_usd)) {
    return widened(`cost_budget_usd ${c.cost_budget_usd} exceeds the parent's ${p.cost_budget_usd}`)
  }
  if (c.quality_threshold < p.quality_threshold) {
    return widened(`quality_threshold ${c.quality_threshold} is below the parent's ${p.quality_threshold}`)
  }
  if (c.task_type !== p.task_type) return widened(`task_type ${c.task_type} differs from the parent's ${p.task_type}`)
  if (c.expected_steps > p.expected_steps) return widened(`expected_steps ${c.expected_steps} exceeds the parent's ${p.expected_steps}`)
  return undefined
}

/** The task constraints with every optional member at its default, as written into an issued token. */
export const normalizeTask = (c: TaskConstraints): TaskConstraints => ({
  allowed: [...c.allowed],
  blocked: [...(c.blocked ?? [])],
  reversibleOnly: c.reversibleOnly ?? false,
  humanGates: [...(c.humanGates ?? [])],
  actionLimits: { ...(c.actionLimits ?? {}) },
  computeLimit: {
    ...(c.computeLimit?.llmTokens === undefined ? {} : { llmTokens: c.computeLimit.llmTokens }),
    ...(c.computeLimit?.webRequests === undefined ? {} : { webRequests: c.computeLimit.webRequests })
  },
  dataAccess: [...(c.dataAccess ?? [])],
  sandbox: c.sandbox ?? false,
  maxDelegationDepth: c.maxDelegationDepth
})
