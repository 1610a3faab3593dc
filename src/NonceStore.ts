/**
 * Replay protection: remember each (sender, nonce) until its envelope can no longer validate, and refuse a repeat.
 * The tag and the memory layer live here so the core can name the service; the SQL layer is `NonceStoreSql`.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The (sender, nonce) pair was seen before and has not expired. */
export class NonceReplayed extends Data.TaggedError("NonceReplayed")<{ readonly sender: string; readonly nonce: string }> {}

/** The bounded store is full of live nonces; it refuses rather than forget one. */
export class NonceStoreFull extends Data.TaggedError("NonceStoreFull")<{ readonly capacity: number }> {}

/** The store's backing database failed; the envelope is refused (fail closed). */
export class NonceStoreUnavailable extends Data.TaggedError("NonceStoreUnavailable")<{ readonly message: string }> {}

/** The operations of a nonce store. */
export interface NonceStoreApi {
  /**
   * Atomically records (sender, nonce) until `retainUntilMs` (epoch ms), failing with `NonceReplayed` when the pair
   * is already held. Exactly one of any number of concurrent calls with the same pair succeeds.
   */
  readonly record: (
    sender: string,
    nonce: string,
    retainUntilMs: number
  ) => Effect.Effect<void, NonceReplayed | NonceStoreFull | NonceStoreUnavailable>
}

/** The `NonceStore` service. */
export class NonceStore extends Context.Tag("agent-mesh/NonceStore")<NonceStore, NonceStoreApi>() {}

/** Default capacity of the memory store. */
export const DEFAULT_MEMORY_CAPACITY = 100_000

/**
 * An in-memory store holding at most `capacity` live nonces. Expired entries are swept when the store fills, and
 * only when the earliest expiry has passed, so a full store of live nonces refuses in O(1).
 */
export const makeMemory = (options: { readonly capacity?: number } = {}): NonceStoreApi => {
  const capacity = options.capacity ?? DEFAULT_MEMORY_CAPACITY
  const entries = new Map<string, number>()
  let earliest = Number.POSITIVE_INFINITY

  const sweep = (now: number) => {
    earliest = Number.POSITIVE_INFINITY
    for (const [k, until] of entries) {
      if (until <= now) entries.delete(k)
      else if (until < earliest) earliest = until
    }
  }

  return {
    record: (sender, nonce, retainUntilMs) =>
      Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<void, NonceReplayed | NonceStoreFull> => {
        // The sender is a DID, which cannot contain a NUL, so the joined key is unambiguous.
        const key = `${sender}\u0000${nonce}`
        const held = entries.get(key)
        if (held !== undefined && held > now) return Effect.fail(new NonceReplayed({ sender, nonce }))
        if (held === undefined && entries.size >= capacity) {
          if (earliest <= now) sweep(now)
          if (entries.size >= capacity) return Effect.fail(new NonceStoreFull({ capacity }))
        }
        entries.set(key, retainUntilMs)
        if (retainUntilMs < earliest) earliest = retainUntilMs
        return Effect.void
      })
  }
}

/** The memory layer (bounded; the test layer too). */
export const layerMemory = (options: { readonly capacity?: number } = {}): Layer.Layer<NonceStore> =>
  Layer.sync(NonceStore, () => makeMemory(options))
