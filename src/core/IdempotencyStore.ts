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
 * Every store is bounded per scope (one caller of one server): a claim of a new key is refused while the scope holds
 * `quota.entries` live entries or `quota.bytes` bytes of stored replies (`IdempotencyQuotaExceeded`, retry when its
 * earliest entry expires), so one caller cannot fill the store for the others; a key already held is still answered.
 * The memory store is bounded in all too, by entries and by bytes.
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
  /** The scope's bounds: live entries and bytes of stored replies; none when absent. */
  readonly quota?: IdempotencyQuota | undefined
}

/** What one scope (one caller of one server) may hold at once. */
export interface IdempotencyQuota {
  readonly entries: number
  readonly bytes: number
}

/** Default bounds of one caller: 1,000 live keys and 8 MiB of stored replies (docs/agent.md §3). */
export const DEFAULT_QUOTA: IdempotencyQuota = { entries: 1_000, bytes: 8 * 1024 * 1024 }

/** The scope holds its quota of live entries or reply bytes; its earliest entry expires in `retryAfterMs`. */
export class IdempotencyQuotaExceeded extends Data.TaggedError("IdempotencyQuotaExceeded")<{
  readonly message: string
  readonly retryAfterMs: number
}> {}

/** The size a stored reply counts for: its body's UTF-8 bytes. */
export const replyBytes = (reply: StoredReply): number => new TextEncoder().encode(reply.body).length

/** The refusal of a scope at `quota`, given when its earliest live entry expires. */
export const quotaExceeded = (quota: IdempotencyQuota, earliestExpiry: number, now: number): IdempotencyQuotaExceeded =>
  new IdempotencyQuotaExceeded({
    message: `this caller holds its quota of ${quota.entries} idempotency keys or ${quota.bytes} bytes of stored replies; retry when earlier ones expire`,
    retryAfterMs: Math.max(0, earliestExpiry - now)
  })

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
  readonly claim: (request: ClaimRequest) => Effect.Effect<Claim, IdempotencyStoreUnavailable | IdempotencyQuotaExceeded>
  /** Stores the reply of a claimed entry (only while `holder` holds it). */
  readonly complete: (scope: string, key: string, holder: string, reply: StoredReply) => Effect.Effect<void, IdempotencyStoreUnavailable>
  /** Lets a claimed entry go, so the next request with the key does the work (only while `holder` holds it). */
  readonly release: (scope: string, key: string, holder: string) => Effect.Effect<void, IdempotencyStoreUnavailable>
}

/** The `IdempotencyStore` service. */
export class IdempotencyStore extends Context.Tag("agent-mesh/IdempotencyStore")<IdempotencyStore, IdempotencyStoreApi>() {}

/** Default capacity of the memory store. */
export const DEFAULT_MEMORY_CAPACITY = 10_000

/** Default bytes of stored replies the memory store holds in all. */
export const DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024

/** Bounds of the memory store in all. */
export interface MemoryOptions {
  /** Live entries; default 10,000. */
  readonly capacity?: number
  /** Bytes of stored replies; default 64 MiB. */
  readonly maxBytes?: number
}

interface Entry {
  readonly scope: string
  fingerprint: string
  holder: string
  reply: StoredReply | undefined
  bytes: number
  expiresAt: number
}

interface ScopeUse {
  entries: number
  bytes: number
}

/**
 * A bounded memory store: past `capacity` live entries or `maxBytes` of replies in all it refuses new keys rather
 * than forget an answer (`IdempotencyStoreUnavailable`), and each scope within its claim's `quota`.
 */
export const makeMemory = (options: MemoryOptions = {}): IdempotencyStoreApi => {
  const capacity = options.capacity ?? DEFAULT_MEMORY_CAPACITY
  const maxBytes = options.maxBytes ?? DEFAULT_MEMORY_BYTES
  const entries = new Map<string, Entry>()
  const scopes = new Map<string, ScopeUse>()
  let bytes = 0
  const id = (scope: string, key: string) => JSON.stringify([scope, key])
  const drop = (k: string, e: Entry) => {
    entries.delete(k)
    bytes -= e.bytes
    const use = scopes.get(e.scope)!
    use.entries--
    use.bytes -= e.bytes
    if (use.entries === 0) scopes.delete(e.scope)
  }
  const purge = (now: number) => {
    for (const [k, e] of entries) if (e.expiresAt <= now) drop(k, e)
  }
  const earliest = (scope: string) => {
    let at = Infinity
    for (const e of entries.values()) if (e.scope === scope && e.expiresAt < at) at = e.expiresAt
    return at
  }
  return {
    claim: (r) =>
      Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Claim, IdempotencyStoreUnavailable | IdempotencyQuotaExceeded> => {
        const k = id(r.scope, r.key)
        const e = entries.get(k)
        const takeOver = e !== undefined && e.reply === undefined && e.holder !== r.holder && e.fingerprint === r.fingerprint
        if (e !== undefined && e.expiresAt > now && !takeOver) {
          return Effect.succeed<Claim>(
            e.reply === undefined ? { _tag: "Pending", fingerprint: e.fingerprint, holder: e.holder } : { _tag: "Completed", fingerprint: e.fingerprint, reply: e.reply }
          )
        }
        if (e !== undefined) drop(k, e)
        const use = () => scopes.get(r.scope) ?? { entries: 0, bytes: 0 }
        if (r.quota !== undefined && (use().entries >= r.quota.entries || use().bytes >= r.quota.bytes)) purge(now)
        if (r.quota !== undefined && (use().entries >= r.quota.entries || use().bytes >= r.quota.bytes)) {
          return Effect.fail(quotaExceeded(r.quota, earliest(r.scope), now))
        }
        if (entries.size >= capacity || bytes >= maxBytes) purge(now)
        if (entries.size >= capacity || bytes >= maxBytes) {
          return Effect.fail(new IdempotencyStoreUnavailable({ message: `the idempotency store holds ${capacity} live keys or ${maxBytes} bytes of replies` }))
        }
        entries.set(k, { scope: r.scope, fingerprint: r.fingerprint, holder: r.holder, reply: undefined, bytes: 0, expiresAt: r.expiresAt })
        const u = scopes.get(r.scope)
        if (u === undefined) scopes.set(r.scope, { entries: 1, bytes: 0 })
        else u.entries++
        return Effect.succeed<Claim>({ _tag: "Claimed" })
      }),
    complete: (scope, key, holder, reply) =>
      Effect.sync(() => {
        const e = entries.get(id(scope, key))
        if (e !== undefined && e.holder === holder && e.reply === undefined) {
          e.reply = reply
          e.bytes = replyBytes(reply)
          bytes += e.bytes
          scopes.get(scope)!.bytes += e.bytes
        }
      }),
    release: (scope, key, holder) =>
      Effect.sync(() => {
        const k = id(scope, key)
        const e = entries.get(k)
        if (e !== undefined && e.holder === holder && e.reply === undefined) drop(k, e)
      })
  }
}

/** A fresh bounded memory store. */
export const layerMemory = (options: MemoryOptions = {}): Layer.Layer<IdempotencyStore> =>
  Layer.sync(IdempotencyStore, () => makeMemory(options))
