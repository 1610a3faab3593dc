/**
 * Replay protection: remember each (sender, nonce) until its envelope can no longer validate, and refuse a repeat.
 * The tag and the memory layer live here so the core can name the service; the SQL layer is `NonceStoreSql`.
 *
 * Every store holds at most `perSenderQuota` live nonces per sender, so one sender (however validly it signs) cannot
 * crowd the others out of a bounded store: past its quota it is refused with `NonceQuotaExceeded`, and only it is.
 * Callers record a nonce only once the sender is authentic and authorized (docs/protocol.md §10.3).
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The (sender, nonce) pair was seen before and has not expired. */
export class NonceReplayed extends Data.TaggedError("NonceReplayed")<{ readonly sender: string; readonly nonce: string }> {}

/** The bounded store is full of live nonces; it refuses rather than forget one. */
export class NonceStoreFull extends Data.TaggedError("NonceStoreFull")<{ readonly capacity: number }> {}

/** This sender already holds its quota of live nonces; the others are not affected. Its next one expires in `retryAfterMs`. */
export class NonceQuotaExceeded extends Data.TaggedError("NonceQuotaExceeded")<{
  readonly sender: string
  readonly quota: number
  readonly retryAfterMs: number
}> {}

/** The store's backing database failed; the envelope is refused (fail closed). */
export class NonceStoreUnavailable extends Data.TaggedError("NonceStoreUnavailable")<{ readonly message: string }> {}

/** What `record` may fail with. */
export type NonceRecordError = NonceReplayed | NonceStoreFull | NonceQuotaExceeded | NonceStoreUnavailable

/** The protocol's code for each refusal of `record` (docs/protocol.md §10.3). */
export type NonceRefusalCode = "REPLAYED" | "NONCE_STORE_FULL" | "NONCE_QUOTA_EXCEEDED" | "NONCE_STORE_UNAVAILABLE"

/** A refused record as envelopes and signed requests alike report it: the protocol's code and one wording. */
export const nonceRefusal = (e: NonceRecordError): { readonly code: NonceRefusalCode; readonly message: string } => {
  switch (e._tag) {
    case "NonceReplayed":
      return { code: "REPLAYED", message: `nonce ${e.nonce} from ${e.sender} was already used` }
    case "NonceStoreFull":
      return { code: "NONCE_STORE_FULL", message: `nonce store holds ${e.capacity} live nonces` }
    case "NonceQuotaExceeded":
      return { code: "NONCE_QUOTA_EXCEEDED", message: `${e.sender} holds its quota of ${e.quota} live nonces; retry when earlier ones expire` }
    case "NonceStoreUnavailable":
      return { code: "NONCE_STORE_UNAVAILABLE", message: e.message }
  }
}

/** The operations of a nonce store. */
export interface NonceStoreApi {
  /**
   * Atomically records (sender, nonce) until `retainUntilMs` (epoch ms), failing with `NonceReplayed` when the pair
   * is already held and with `NonceQuotaExceeded` when the sender holds its quota of live nonces. Exactly one of any
   * number of concurrent calls with the same pair succeeds.
   */
  readonly record: (sender: string, nonce: string, retainUntilMs: number) => Effect.Effect<void, NonceRecordError>
  /**
   * `record` at `nowMs` (epoch ms) the caller read from its clock, where the store can judge without one (the memory
   * store): a server that already read the time records with no clock effect of its own. Like `record`, it records
   * when the effect runs.
   */
  readonly recordAt?: (sender: string, nonce: string, retainUntilMs: number, nowMs: number) => Effect.Effect<void, NonceRecordError>
}

/**
 * Records (sender, nonce) judged at `nowMs`, a time the caller already read from its clock: through `recordAt` where
 * the store has it, else through `record`, which reads the store's own clock.
 */
export const recordAtTime = (
  store: NonceStoreApi,
  sender: string,
  nonce: string,
  retainUntilMs: number,
  nowMs: number
): Effect.Effect<void, NonceRecordError> =>
  store.recordAt === undefined ? store.record(sender, nonce, retainUntilMs) : store.recordAt(sender, nonce, retainUntilMs, nowMs)

/** The `NonceStore` service. */
export class NonceStore extends Context.Tag("agent-mesh/NonceStore")<NonceStore, NonceStoreApi>() {}

/** Default capacity of the memory store. */
export const DEFAULT_MEMORY_CAPACITY = 100_000

/** Default live nonces per sender: 1/16 of the memory store's default capacity (6 250). */
export const DEFAULT_PER_SENDER_QUOTA = DEFAULT_MEMORY_CAPACITY / 16

/** Memory store settings. */
export interface MemoryOptions {
  /** Live nonces held at most; default 100 000. */
  readonly capacity?: number
  /** Live nonces one sender may hold; default 1/16 of `capacity` (at least 1). */
  readonly perSenderQuota?: number
}

/** The quota a store of `capacity` applies when none is given. */
export const defaultQuota = (capacity: number): number => Math.max(1, Math.floor(capacity / 16))

/** The memory store, which can also say how many entries (live or not yet swept) it holds. */
export interface MemoryNonceStore extends NonceStoreApi {
  readonly size: () => number
}

interface SenderEntries {
  readonly nonces: Map<string, number>
  earliest: number
}

/** Expired entries are swept every this many records (when some have expired), so memory follows the live window. */
const SWEEP_EVERY = 4096

/**
 * An in-memory store holding at most `capacity` live nonces, at most `perSenderQuota` per sender. Expired entries
 * are swept when the store (or a sender's share) fills, and every few thousand records, and only when the earliest
 * expiry has passed, so a full store of live nonces refuses in O(1).
 */
export const makeMemory = (options: MemoryOptions = {}): MemoryNonceStore => {
  const capacity = options.capacity ?? DEFAULT_MEMORY_CAPACITY
  const quota = options.perSenderQuota ?? defaultQuota(capacity)
  const senders = new Map<string, SenderEntries>()
  let size = 0
  let earliest = Number.POSITIVE_INFINITY
  let sinceSweep = 0

  const sweepSender = (s: SenderEntries, now: number) => {
    s.earliest = Number.POSITIVE_INFINITY
    for (const [n, until] of s.nonces) {
      if (until <= now) {
        s.nonces.delete(n)
        size--
      } else if (until < s.earliest) s.earliest = until
    }
  }

  const sweep = (now: number) => {
    earliest = Number.POSITIVE_INFINITY
    for (const [sender, s] of senders) {
      if (s.earliest <= now) sweepSender(s, now)
      if (s.nonces.size === 0) senders.delete(sender)
      else if (s.earliest < earliest) earliest = s.earliest
    }
  }

  const recordAt = (sender: string, nonce: string, retainUntilMs: number, now: number): Effect.Effect<void, NonceReplayed | NonceStoreFull | NonceQuotaExceeded> => {
    if (++sinceSweep >= SWEEP_EVERY) {
      sinceSweep = 0
      if (earliest <= now) sweep(now)
    }
    let s = senders.get(sender)
    const held = s?.nonces.get(nonce)
    if (held !== undefined && held > now) return Effect.fail(new NonceReplayed({ sender, nonce }))
    if (held === undefined) {
      if (s !== undefined && s.nonces.size >= quota) {
        if (s.earliest <= now) sweepSender(s, now)
        if (s.nonces.size >= quota) return Effect.fail(new NonceQuotaExceeded({ sender, quota, retryAfterMs: Math.max(0, s.earliest - now) }))
      }
      if (size >= capacity) {
        if (earliest <= now) sweep(now)
        if (size >= capacity) return Effect.fail(new NonceStoreFull({ capacity }))
        s = senders.get(sender)
      }
      if (s === undefined) {
        s = { nonces: new Map(), earliest: Number.POSITIVE_INFINITY }
        senders.set(sender, s)
      }
      size++
    }
    s!.nonces.set(nonce, retainUntilMs)
    if (retainUntilMs < s!.earliest) s!.earliest = retainUntilMs
    if (retainUntilMs < earliest) earliest = retainUntilMs
    return Effect.void
  }

  return {
    size: () => size,
    // Suspended: an effect records when it runs, not when it is made (validation makes it before the signature check).
    recordAt: (sender, nonce, retainUntilMs, nowMs) => Effect.suspend(() => recordAt(sender, nonce, retainUntilMs, nowMs)),
    // The clock is read in the same step as the map: no effect of its own to run per record.
    record: (sender, nonce, retainUntilMs) => Effect.clockWith((clock) => recordAt(sender, nonce, retainUntilMs, clock.unsafeCurrentTimeMillis()))
  }
}

/** The memory layer (bounded; the test layer too). */
export const layerMemory = (options: MemoryOptions = {}): Layer.Layer<NonceStore> => Layer.sync(NonceStore, () => makeMemory(options))
