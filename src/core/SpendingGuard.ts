/**
 * Enforces spending mandates (intent → cart → payment) at the point of payment: the chain must verify for the
 * presenter, the merchant must be allowed, and the amount must fit, both on its own and cumulatively against every
 * link's limit (counters in `TaskStore`, in micro-dollars, so no float ever decides a payment).
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { PaymentConstraints, SpendingConstraints } from "./Constraints.js"
import { Keys } from "./Keys.js"
import { KeyResolver } from "./KeyResolver.js"
import { chainOf, type Mandate, MandateInvalidReason, verifyMandate } from "./Mandate.js"
import { type Micros, parseUsd } from "./Money.js"
import { type CounterCharge, counterScope, TaskStore, type TaskStoreUnavailable } from "./TaskStore.js"

/** The codes of a refused payment. INVALID_AMOUNT (not a decimal with at most six places) is ours. */
export const SpendingViolationCode = Schema.Literal("MANDATE_INVALID", "LIMIT_EXCEEDED", "MERCHANT_NOT_ALLOWED", "INVALID_AMOUNT")
/** The codes of a refused payment. */
export type SpendingViolationCode = typeof SpendingViolationCode.Type

/** A payment refused under its mandate; for MANDATE_INVALID, `reason` is the verification reason. */
export class SpendingConstraintViolation extends Schema.TaggedError<SpendingConstraintViolation>()("SpendingConstraintViolation", {
  code: SpendingViolationCode,
  message: Schema.String,
  reason: Schema.optional(MandateInvalidReason)
}) {}

/** A payment to authorize. */
export interface SpendRequest {
  /** USD, a decimal with at most six places: a number or the decimal string Money reads (`"5.00"`). */
  readonly amountUsd: number | string
  readonly merchant: string
  /** The DID presenting the mandate: it must be the grantee. */
  readonly presenter: string
}

/** An authorized payment: the verified mandate and the exact amount charged. */
export interface Authorization {
  readonly mandate: Mandate
  readonly amountMicros: Micros
}

/** The counter every spending link is charged on, in micro-dollars. */
export const SPEND_COUNTER = "spend:usdMicros"

/** The operations of the spending guard. */
export interface SpendingGuardApi {
  /** Verifies the mandate for the presenter and charges the amount; fails with the code of the first rule broken. */
  readonly authorize: (
    token: string,
    request: SpendRequest
  ) => Effect.Effect<Authorization, SpendingConstraintViolation | TaskStoreUnavailable>
}

const violation = (code: SpendingViolationCode, message: string) => new SpendingConstraintViolation({ code, message })

const limitOf = (m: Mandate): Micros =>
  Either.getOrThrow(parseUsd(m.kind === "payment" ? (m.constraints as PaymentConstraints).amountUsd : (m.constraints as SpendingConstraints).spendLimitUsd))

const merchantAllowed = (m: Mandate, merchant: string): boolean =>
  m.kind === "payment"
    ? (m.constraints as PaymentConstraints).merchant === merchant
    : (m.constraints as SpendingConstraints).allowedMerchants?.includes(merchant) ?? true

/** A guard on the given key resolver and task store. */
export const make: Effect.Effect<SpendingGuardApi, never, Keys | KeyResolver | TaskStore> = Effect.gen(function* () {
  const keys = yield* Keys
  const resolver = yield* KeyResolver
  const store = yield* TaskStore
  return {
    authorize: (token, request) =>
      Effect.gen(function* () {
        const mandate = yield* verifyMandate(token, resolver, { expectedGrantee: request.presenter, kinds: ["intent", "cart", "payment"] }).pipe(
          Effect.provideService(Keys, keys),
          Effect.mapError((e) => new SpendingConstraintViolation({ code: "MANDATE_INVALID", message: `${e.reason}: ${e.message}`, reason: e.reason }))
        )
        const amount = parseUsd(request.amountUsd)
        if (Either.isLeft(amount)) return yield* Effect.fail(violation("INVALID_AMOUNT", amount.left.message))
        const chain = chainOf(mandate)
        for (const m of chain) {
          if (!merchantAllowed(m, request.merchant)) {
            return yield* Effect.fail(violation("MERCHANT_NOT_ALLOWED", `merchant ${JSON.stringify(request.merchant)} is not allowed by mandate ${m.jti}`))
          }
        }
        const charges: Array<CounterCharge> = chain.map((m) => ({ scope: counterScope(m), counter: SPEND_COUNTER, amount: amount.right, limit: limitOf(m) }))
        yield* store.charge(charges, chain[0]!.expiresAt * 1000).pipe(
          Effect.catchTag("CounterLimitReached", (e) =>
            Effect.fail(violation("LIMIT_EXCEEDED", `${request.amountUsd} USD would pass the limit of mandate ${e.scope} (${e.limit} micro-USD)`))
          )
        )
        return { mandate, amountMicros: amount.right }
      })
  }
})

/** The spending guard service. */
export class SpendingGuard extends Context.Tag("agent-mesh/SpendingGuard")<SpendingGuard, SpendingGuardApi>() {
  /** The guard on the `KeyResolver` and `TaskStore` in context. */
  static readonly layer: Layer.Layer<SpendingGuard, never, Keys | KeyResolver | TaskStore> = Layer.effect(SpendingGuard, make)
  /** Authorizes a payment with the guard in context. */
  static readonly authorize = (
    token: string,
    request: SpendRequest
  ): Effect.Effect<Authorization, SpendingConstraintViolation | TaskStoreUnavailable, SpendingGuard> =>
    Effect.flatMap(SpendingGuard, (g) => g.authorize(token, request))
}

/** The guard on the `KeyResolver` and `TaskStore` in context. */
export const layer = SpendingGuard.layer
