/**
 * One way to run a user's callback as an Effect, whatever it returns: a plain value, a Promise (any thenable) or an
 * Effect. A throw and a rejection become failures, never defects, so the caller decides what they mean (a resolver
 * maps them to "unavailable"). A plain value stays synchronous: no promise hop on a hot path.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"

/** Whether `u` is a thenable (a Promise or anything that behaves like one). */
export const isPromiseLike = (u: unknown): u is PromiseLike<unknown> =>
  typeof u === "object" && u !== null && "then" in u && typeof (u as { then: unknown }).then === "function"

/** A callback's result in any of its forms (value, Promise, Effect), as an Effect; throws and rejections fail. */
export const lift = <A>(thunk: () => A | PromiseLike<A> | Effect.Effect<A, unknown>): Effect.Effect<A, unknown> =>
  Effect.suspend(() => {
    let out: A | PromiseLike<A> | Effect.Effect<A, unknown>
    try {
      out = thunk()
    } catch (e) {
      return Effect.fail(e)
    }
    if (Effect.isEffect(out)) return out as Effect.Effect<A, unknown>
    if (isPromiseLike(out)) {
      const promise = out
      return Effect.tryPromise({ try: () => Promise.resolve(promise), catch: (e) => e })
    }
    return Effect.succeed(out as A)
  })
