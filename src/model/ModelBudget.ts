/**
 * A budget of tokens and micro-USD that model calls draw on, atomically: before a call the caller reserves an upper
 * bound of what it can cost (the prompt's bound plus the most answer tokens it asks for, priced); after the call it
 * settles with what the provider reported and the rest is released. Every reservation is one synchronous check-and-hold, so any
 * number of concurrent calls on one budget never hold or spend more than its limits together: when the bound does
 * not fit, the call is refused with `BUDGET_EXHAUSTED` before anything is sent.
 *
 * A step's budget is a child budget carved out of its parent by one reservation; closing the child settles the
 * parent with what the child spent (and what it still holds), so unused step budget flows back.
 *
 * The prompt bound is the prompt's UTF-8 length plus a per-message allowance: every tokenizer in use (byte-level
 * BPE) spends at least one byte per token, so this never under-counts, whatever the language or the model.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as MutableRef from "effect/MutableRef"
import * as Schema from "effect/Schema"
import type { ChatMessage } from "../core/ModelProvider.js"

/** Tokens and micro-USD together. */
export interface Amount {
  readonly tokens: number
  readonly micros: number
}

/**
 * Nothing fits in the budget that is left (the spec's `BUDGET_EXHAUSTED`, as for a ledger pool): no call was made.
 * Release step budgets or open a session with a larger mandate.
 */
export class ModelBudgetExhausted extends Schema.TaggedError<ModelBudgetExhausted>()("ModelBudgetExhausted", {
  code: Schema.Literal("BUDGET_EXHAUSTED"),
  message: Schema.String
}) {}

/** Where a budget stands: its limits, what is spent (settled) and what open reservations hold. */
export interface BudgetState {
  readonly limit: Amount
  readonly spent: Amount
  readonly held: Amount
}

/** What is left to reserve. */
export const available = (s: BudgetState): Amount => ({
  tokens: s.limit.tokens - s.spent.tokens - s.held.tokens,
  micros: s.limit.micros - s.spent.micros - s.held.micros
})

/** A reservation: what it holds; settle or release it exactly once (later calls do nothing). */
export interface Reservation {
  readonly amount: Amount
  /** Charges `used` and releases the rest of the hold. */
  readonly settle: (used: Amount) => Effect.Effect<void>
  /** Releases the whole hold, charging nothing. */
  readonly release: Effect.Effect<void>
  /** `settle`, run synchronously by a caller already inside an effect. */
  readonly unsafeSettle: (used: Amount) => void
}

/** A budget. */
export interface ModelBudget {
  readonly state: Effect.Effect<BudgetState>
  /**
   * Atomically reads what is left and reserves what `plan` asks for (it must ask for no more than it was offered),
   * or nothing when `plan` returns undefined. `plan` runs inside the update, so it must be pure and quick.
   */
  readonly tryReserve: <A>(plan: (left: Amount) => readonly [Amount, A] | undefined) => Effect.Effect<Option.Option<readonly [Reservation, A]>>
  /** Reserves `amount` or fails with BUDGET_EXHAUSTED. */
  readonly reserve: (amount: Amount, what: string) => Effect.Effect<Reservation, ModelBudgetExhausted>
  /** `tryReserve`, run synchronously by a caller already inside an effect; undefined when nothing was reserved. */
  readonly unsafeTryReserve: <A>(plan: (left: Amount) => readonly [Amount, A] | undefined) => readonly [Reservation, A] | undefined
  /** The state, read synchronously by a caller already inside an effect. */
  readonly unsafeState: () => BudgetState
}

const zero: Amount = { tokens: 0, micros: 0 }
const add = (a: Amount, b: Amount): Amount => ({ tokens: a.tokens + b.tokens, micros: a.micros + b.micros })
const sub = (a: Amount, b: Amount): Amount => ({ tokens: a.tokens - b.tokens, micros: a.micros - b.micros })

/** True when `a` fits within `b` on both counts. */
export const fits = (a: Amount, b: Amount): boolean => a.tokens <= b.tokens && a.micros <= b.micros

/**
 * A fresh budget with these limits.
 *
 * The state is one `MutableRef` changed only by synchronous code, which is what `Ref.modify` is underneath: a
 * JavaScript thread runs a synchronous check-and-hold to its end before any other fiber runs, so it is atomic. The
 * `unsafe` forms let the router check and hold inside a step of its own instead of paying an effect per operation
 * on every call (docs/models.md: overhead).
 */
export const make = (limit: Amount): Effect.Effect<ModelBudget> =>
  Effect.sync(() => {
    const cell = MutableRef.make<BudgetState>({ limit, spent: zero, held: zero })
    const reservation = (amount: Amount): Reservation => {
      let open = true
      const unsafeSettle = (used: Amount) => {
        if (!open) return
        open = false
        const s = MutableRef.get(cell)
        MutableRef.set(cell, { limit: s.limit, spent: add(s.spent, used), held: sub(s.held, amount) })
      }
      return { amount, unsafeSettle, settle: (used) => Effect.sync(() => unsafeSettle(used)), release: Effect.sync(() => unsafeSettle(zero)) }
    }
    const unsafeTryReserve = <A>(plan: (left: Amount) => readonly [Amount, A] | undefined): readonly [Reservation, A] | undefined => {
      const s = MutableRef.get(cell)
      const left = available(s)
      const chosen = plan(left)
      if (chosen === undefined || chosen[0].tokens < 0 || chosen[0].micros < 0 || !fits(chosen[0], left)) return undefined
      MutableRef.set(cell, { limit: s.limit, spent: s.spent, held: add(s.held, chosen[0]) })
      return [reservation(chosen[0]), chosen[1]]
    }
    const tryReserve = <A>(plan: (left: Amount) => readonly [Amount, A] | undefined) =>
      Effect.sync(() => Option.fromNullable(unsafeTryReserve(plan)))
    return {
      state: Effect.sync(() => MutableRef.get(cell)),
      unsafeState: () => MutableRef.get(cell),
      tryReserve,
      unsafeTryReserve,
      reserve: (amount, what) =>
        Effect.suspend(() => {
          const r = unsafeTryReserve((left) => (fits(amount, left) ? [amount, undefined] : undefined))
          if (r !== undefined) return Effect.succeed(r[0])
          const left = available(MutableRef.get(cell))
          return Effect.fail(
            new ModelBudgetExhausted({
              code: "BUDGET_EXHAUSTED",
              message: `${what} needs ${amount.tokens} tokens and ${amount.micros} micro-USD; ${left.tokens} tokens and ${left.micros} micro-USD are left`
            })
          )
        })
    }
  })

/** Tokens allowed for each message's framing (role, separators) in the prompt bound. */
export const MESSAGE_OVERHEAD_TOKENS = 8

/** UTF-8 length of a string without encoding it (a surrogate pair is 4 bytes, counted 2 + 2). */
const utf8Length = (text: string): number => {
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdfff ? 2 : 3
  }
  return n
}

/** An upper bound of the prompt tokens of a conversation (UTF-8 bytes + framing): no tokenizer spends fewer bytes a token than one. */
export const promptTokenBound = (messages: ReadonlyArray<ChatMessage>): number => {
  let n = 3
  for (const m of messages) n += utf8Length(m.content) + MESSAGE_OVERHEAD_TOKENS
  return n
}
