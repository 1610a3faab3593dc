/**
 * Per-key token buckets on Effect's Clock (so tests drive them with TestClock): `capacity` requests at once, refilled
 * at `perMinute` a minute. Bounded: when `maxKeys` buckets exist, the least recently used is forgotten (a forgotten
 * bucket comes back full, which only ever errs toward letting a request through).
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"

/** The key has no token left; `retryAfterSeconds` is when the next one arrives. */
export class RateLimitExceeded extends Data.TaggedError("RateLimitExceeded")<{ readonly retryAfterSeconds: number }> {}

/** Rate limiter settings. */
export interface RateLimitOptions {
  /** Requests allowed in a burst. */
  readonly capacity: number
  /** Tokens added per minute. */
  readonly perMinute: number
  /** Buckets kept at most (default 10 000). */
  readonly maxKeys?: number
}

/** A rate limiter. */
export interface RateLimiter {
  /** Takes one token for `key`, or fails with when to retry. */
  readonly take: (key: string) => Effect.Effect<void, RateLimitExceeded>
}

/** A new limiter with its own buckets. */
export const make = (options: RateLimitOptions): RateLimiter => {
  const maxKeys = options.maxKeys ?? 10_000
  const perMs = options.perMinute / 60_000
  const buckets = new Map<string, { tokens: number; at: number }>()
  return {
    take: (key) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        let b = buckets.get(key)
        if (b === undefined) {
          if (buckets.size >= maxKeys) {
            const oldest = buckets.keys().next()
            if (!oldest.done) buckets.delete(oldest.value)
          }
          b = { tokens: options.capacity, at: now }
        } else {
          buckets.delete(key) // re-inserted below: Map order is recency order
          b.tokens = Math.min(options.capacity, b.tokens + (now - b.at) * perMs)
          b.at = now
        }
        buckets.set(key, b)
        if (b.tokens >= 1) {
          b.tokens -= 1
          return Effect.void
        }
        const retryAfterSeconds = perMs > 0 ? Math.max(1, Math.ceil((1 - b.tokens) / perMs / 1000)) : 60
        return Effect.fail(new RateLimitExceeded({ retryAfterSeconds }))
      })
  }
}
