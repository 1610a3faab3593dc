/**
 * Idempotency keys: what a server answered to a (scope, key) pair, so a retried request gets the stored answer and
 * the work behind it never runs twice. The tag and the memory layer live here; the SQL layer, which keeps answers
 * across restarts, is `IdempotencyStoreSql`.
 *
 * An entry is first `pending` (claimed by a holder, one per running server), then `completed` with the reply, or
 * released when the work failed. A pending entry of another holder was left by a server that stopped in the middle of
 * the work; the next claim with the same fingerprint takes it over (docs/protocol.md §14). Entries live until their
 * `expiresAt`; an expired one counts as absent.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** A stored answer: the HTTP status and the body as sent. */
export interface StoredReply {
  readonly status: number
  readonly body: string
}

/** What a claim asks for. */
export interface ClaimRequest {
  /** Whose key: the server and the authenticated caller; keys of different scopes never meet. */
  readonly scope: string
  readonly key: string
  /** A digest of the request, so the same key with another request is told apart. */
  readonly fingerprint: string
  /** Who claims: one id per running server. */
  readonly holder: string
  /** Epoch ms after which the entry is forgotten. */
  readonly expiresAt: number
}

/** How a claim went: the caller holds the key now, or it is held, or it was answered already. */
export type Claim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Pending"; readonly fingerprint: string; readonly holder: string }
  | { readonly _tag: "Completed"; readonly fingerprint: string; readonly reply: StoredReply }

/** The store cannot answer (its database failed, or the memory store is full of live entries); refuse the request. */
export class IdempotencyStoreUnavailable extends Data.TaggedError("IdempotencyStoreUnavailable")<{ readonly message: string }> {}

/** The operations of an idempotency store. */
export interface IdempotencyStoreApi {
  /**
   * Claims (scope, key) for `holder`, atomically: absent or expired, or pending under another holder with the same
   * fingerprint (taken over), it is `Claimed`; otherwise the entry as it stands.
   */
  readonly claim: (request: ClaimRequest) => Effect.Effect<Claim, IdempotencyStoreUnavailable>
  /** Stores the reply of a claimed entry (only while `holder` holds it). */
  readonly complete: (scope: string, key: string, holder: string, reply: StoredReply) => Effect.Effect<void, IdempotencyStoreUnavailable>
  /** Lets a claimed entry go, so the next request with the key does the work (only while `holder` holds it). */
  readonly release: (scope: string, key: string, holder: string) => Effect.Effect<void, IdempotencyStoreUnavailable>
}

/** The `IdempotencyStore` service. */
export class IdempotencyStore extends Context.Tag("agent-mesh/IdempotencyStore")<IdempotencyStore, IdempotencyStoreApi>() {}

/** Default capacity of the memory store. */
export const DEFAULT_MEMORY_CAPACITY = 10_000

interface Entry {
  fingerprint: string
  holder: string
  reply: StoredReply | undefined
  expiresAt: number
}

/** A bounded memory store: past `capacity` live entries it refuses new keys rather than forget an answer. */
export const makeMemory = (options: { readonly capacity?: number } = {}): IdempotencyStoreApi => {
  const capacity = options.capacity ?? DEFAULT_MEMORY_CAPACITY
  const entries = new Map<string, Entry>()
  const id = (scope: string, key: string) => JSON.stringify([scope, key])
  const purge = (now: number) => {
    for (const [k, e] of entries) if (e.expiresAt <= now) entries.delete(k)
  }
  return {
    claim: (r) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const k = id(r.scope, r.key)
        const e = entries.get(k)
        const takeOver = e !== undefined && e.reply === undefined && e.holder !== r.holder && e.fingerprint === r.fingerprint
        if (e !== undefined && e.expiresAt > now && !takeOver) {
          return Effect.succeed<Claim>(
            e.reply === undefined ? { _tag: "Pending", fingerprint: e.fingerprint, holder: e.holder } : { _tag: "Completed", fingerprint: e.fingerprint, reply: e.reply }
          )
        }
        if (e === undefined && entries.size >= capacity) purge(now)
        if (e === undefined && entries.size >= capacity) {
          return Effect.fail(new IdempotencyStoreUnavailable({ message: `the idempotency store holds ${capacity} live keys` }))
        }
        entries.set(k, { fingerprint: r.fingerprint, holder: r.holder, reply: undefined, expiresAt: r.expiresAt })
        return Effect.succeed<Claim>({ _tag: "Claimed" })
      }),
    complete: (scope, key, holder, reply) =>
      Effect.sync(() => {
        const e = entries.get(id(scope, key))
        if (e !== undefined && e.holder === holder && e.reply === undefined) e.reply = reply
      }),
    release: (scope, key, holder) =>
      Effect.sync(() => {
        const k = id(scope, key)
        const e = entries.get(k)
        if (e !== undefined && e.holder === holder && e.reply === undefined) entries.delete(k)
      })
  }
}

/** A fresh bounded memory store. */
export const layerMemory = (options: { readonly capacity?: number } = {}): Layer.Layer<IdempotencyStore> =>
  Layer.sync(IdempotencyStore, () => makeMemory(options))
