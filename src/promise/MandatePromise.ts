/**
 * The Promise facade of mandates, for callers without Effect: the same operations, run on a shared runtime with
 * the node:crypto `Keys` layer. Failures reject with the typed error itself (`err.code`, `err.reason`), never a
 * wrapper; verification resolves to the spec's `[valid, mandate, reason]` tuple instead of rejecting.
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ModelBudgetConstraints, SpendingConstraints, TaskConstraints } from "../core/Constraints.js"
import { KeyResolver, type KeyResolverApi, makeStatic, type ResolvedKey } from "../core/KeyResolver.js"
import * as M from "../core/Mandate.js"
import { fromBase64 } from "../core/internal/bytes.js"
import { disposeKeysRuntime, runWithKeys } from "../node/internal/promiseRuntime.js"
import { type Authorization, SpendingGuard, type SpendRequest } from "../core/SpendingGuard.js"
import { type TaskAction, TaskGuard } from "../core/TaskGuard.js"
import * as TaskStore from "../core/TaskStore.js"

const run = runWithKeys

/**
 * Grantor keys as the facade takes them: one public key (raw bytes or publicKeyB64) for a single mandate, a map
 * DID → `{ publicKey, keyVersion }` (key as bytes or base64; version default 1), or a `KeyResolverApi`.
 */
export type KeysInput =
  | Uint8Array
  | string
  | KeyResolverApi
  | Readonly<Record<string, { readonly publicKey: Uint8Array | string; readonly keyVersion?: number }>>

const toKeySource = (keys: KeysInput): M.KeySource => {
  if (keys instanceof Uint8Array) return keys
  if (typeof keys === "string") return fromBase64(keys)
  if ("resolve" in keys && typeof keys.resolve === "function") return keys as KeyResolverApi
  const map: Record<string, ResolvedKey> = {}
  for (const [did, k] of Object.entries(keys as Readonly<Record<string, { readonly publicKey: Uint8Array | string; readonly keyVersion?: number }>>)) {
    map[did] = { publicKey: typeof k.publicKey === "string" ? fromBase64(k.publicKey) : k.publicKey, keyVersion: k.keyVersion ?? 1 }
  }
  return makeStatic(map)
}

const toResolver = (keys: KeysInput): KeyResolverApi => {
  const source = toKeySource(keys)
  if (source instanceof Uint8Array) throw new TypeError("a guard needs a key map or a KeyResolver, not a single key")
  return source
}

/** Issues an intent mandate (see `Mandate.issueIntentMandate`). */
export const issueIntentMandate = (options: M.IssueOptions & { readonly constraints: M.WithUsdInput<SpendingConstraints, "spendLimitUsd"> }): Promise<M.Mandate<"intent">> =>
  run(M.issueIntentMandate(options))

/** Attenuates an intent into a cart mandate. */
export const attenuateToCart = (options: M.AttenuateOptions & { readonly narrowed: M.WithUsdInput<SpendingConstraints, "spendLimitUsd"> }): Promise<M.Mandate<"cart">> =>
  run(M.attenuateToCart(options))

/** Attenuates an intent or cart into a payment mandate. */
export const attenuateToPayment = (
  options: M.AttenuateOptions & { readonly amountUsd: M.UsdInput; readonly merchant: string }
): Promise<M.Mandate<"payment">> => run(M.attenuateToPayment(options))

/** Issues a task mandate. */
export const issueTaskMandate = (options: M.IssueOptions & { readonly constraints: TaskConstraints }): Promise<M.Mandate<"task">> =>
  run(M.issueTaskMandate(options))

/** Attenuates a task mandate. */
export const attenuateTaskMandate = (options: M.AttenuateOptions & { readonly constraints: TaskConstraints }): Promise<M.Mandate<"task">> =>
  run(M.attenuateTaskMandate(options))

/** Issues a model-budget mandate. */
export const issueModelBudgetMandate = (
  options: M.IssueOptions & { readonly constraints: M.WithUsdInput<ModelBudgetConstraints, "cost_budget_usd"> }
): Promise<M.Mandate<"model-budget">> => run(M.issueModelBudgetMandate(options))

/** Attenuates a model-budget mandate. */
export const attenuateModelBudgetMandate = (
  options: M.AttenuateOptions & { readonly constraints: M.WithUsdInput<ModelBudgetConstraints, "cost_budget_usd"> }
): Promise<M.Mandate<"model-budget">> => run(M.attenuateModelBudgetMandate(options))

/** The spec's verification result: `[true, mandate, null]` or `[false, null, reason]`. */
export type VerifyResult = readonly [true, M.Mandate, null] | readonly [false, null, M.MandateInvalidReason]

/** Verifies a mandate and its chain; resolves to `[valid, mandate, reason]`, never rejects for an invalid mandate. */
export const verifyMandate = (token: string, keys: KeysInput, options: M.VerifyOptions = {}): Promise<VerifyResult> =>
  run(
    Effect.match(M.verifyMandate(token, toKeySource(keys), options), {
      onFailure: (e): VerifyResult => [false, null, e.reason],
      onSuccess: (m): VerifyResult => [true, m, null]
    })
  )

/** Verifies a task mandate for the grantee expected to present it: `{ valid, reason }` (reason null when valid). */
export const verifyTaskMandate = async (
  token: string,
  options: { readonly expectedGrantee: string; readonly keys: KeysInput }
): Promise<{ readonly valid: boolean; readonly reason: M.MandateInvalidReason | null }> => {
  const [valid, , reason] = await verifyMandate(token, options.keys, { expectedGrantee: options.expectedGrantee, kinds: ["task"] })
  return { valid, reason }
}

/** A spending guard on the given keys and a memory counter store (counters live as long as the guard). */
export const createSpendingGuard = (options: { readonly keys: KeysInput }) => {
  const resolver = toResolver(options.keys)
  const guard = run(
    Effect.provide(
      SpendingGuard,
      SpendingGuard.layer.pipe(Layer.provide(Layer.merge(Layer.succeed(KeyResolver, resolver), TaskStore.layerMemory)))
    )
  )
  return {
    /** Authorizes a payment; rejects with `SpendingConstraintViolation` (match on `code`). */
    authorize: (token: string, request: SpendRequest): Promise<Authorization> => guard.then((g) => run(g.authorize(token, request)))
  }
}

/** A task guard on the given keys and a memory counter store (counters live as long as the guard). */
export const createTaskGuard = (options: { readonly keys: KeysInput }) => {
  const resolver = toResolver(options.keys)
  const guard = run(
    Effect.provide(
      TaskGuard,
      TaskGuard.layer.pipe(Layer.provide(Layer.merge(Layer.succeed(KeyResolver, resolver), TaskStore.layerMemory)))
    )
  )
  return {
    /** Checks and charges an action; rejects with `TaskConstraintViolation` (match on `code`). */
    check: (token: string, action: TaskAction): Promise<M.Mandate<"task">> => guard.then((g) => run(g.check(token, action)))
  }
}

/** Releases the facade's runtime (tests, graceful shutdown). */
export const dispose = (): Promise<void> => disposeKeysRuntime()
