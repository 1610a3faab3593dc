/**
 * The SQL layer of `IdempotencyStore`: stored replies survive a restart of the server, so a retry after it is still
 * answered from the store. A claim is one conditional upsert, so the database picks the one holder; expired rows
 * are taken over in the same statement and purged as the store goes. A new key is refused while its scope holds its
 * quota of live rows or reply bytes (`IdempotencyQuotaExceeded`); a key already held is answered as before.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type Claim, type ClaimRequest, type IdempotencyQuotaExceeded, IdempotencyStore, type IdempotencyStoreApi, IdempotencyStoreUnavailable, quotaExceeded, replyBytes } from "../core/IdempotencyStore.js"
import { summarize } from "./SqlFailure.js"

/** Delete expired rows once every this many claims. */
const PURGE_EVERY = 256

interface Row {
  readonly fingerprint: string
  readonly holder: string
  readonly status: string
  readonly reply_status: number | bigint | null
  readonly reply_body: string | null
}

/** A store on the migrated `SqlClient` (see `Database`). */
export const make: Effect.Effect<IdempotencyStoreApi, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  let sinceP = 0
  const unavailable = (e: unknown) => new IdempotencyStoreUnavailable({ message: summarize(e) })

  const claim = (r: ClaimRequest): Effect.Effect<Claim | undefined, IdempotencyStoreUnavailable | IdempotencyQuotaExceeded> =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (++sinceP >= PURGE_EVERY) {
        sinceP = 0
        yield* sql`DELETE FROM mesh_idempotency WHERE expires_at <= ${now}`.pipe(Effect.mapError(unavailable))
      }
      if (r.quota !== undefined) {
        const use = (yield* sql<{ n: number | bigint | string; b: number | bigint | string | null; first: number | bigint | string | null }>`
          SELECT COUNT(*) AS n, SUM(reply_bytes) AS b, MIN(expires_at) AS first FROM mesh_idempotency
          WHERE scope = ${r.scope} AND expires_at > ${now}`.pipe(Effect.mapError(unavailable)))[0]
        if (use !== undefined && (Number(use.n) >= r.quota.entries || Number(use.b ?? 0) >= r.quota.bytes)) {
          const held = yield* sql`SELECT key FROM mesh_idempotency WHERE scope = ${r.scope} AND key = ${r.key} AND expires_at > ${now}`.pipe(Effect.mapError(unavailable))
          if (held.length === 0) return yield* Effect.fail(quotaExceeded(r.quota, Number(use.first ?? now), now))
        }
      }
      // One statement: insert, or take over an expired row or one left pending by another holder for this very request.
      const claimed = yield* sql<{ key: string }>`
        INSERT INTO mesh_idempotency (scope, key, fingerprint, holder, status, reply_status, reply_body, expires_at)
        VALUES (${r.scope}, ${r.key}, ${r.fingerprint}, ${r.holder}, 'pending', NULL, NULL, ${r.expiresAt})
        ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, holder = excluded.holder, status = 'pending',
          reply_status = NULL, reply_body = NULL, reply_bytes = NULL, expires_at = excluded.expires_at
        WHERE mesh_idempotency.expires_at <= ${now}
          OR (mesh_idempotency.status = 'pending' AND mesh_idempotency.holder <> excluded.holder AND mesh_idempotency.fingerprint = excluded.fingerprint)
        RETURNING key`.pipe(Effect.mapError(unavailable))
      if (claimed.length > 0) return { _tag: "Claimed" } satisfies Claim
      const rows = yield* sql<Row>`SELECT fingerprint, holder, status, reply_status, reply_body FROM mesh_idempotency
        WHERE scope = ${r.scope} AND key = ${r.key}`.pipe(Effect.mapError(unavailable))
      const row = rows[0]
      // Released between the two statements: claim again.
      if (row === undefined) return undefined
      if (row.status === "completed" && row.reply_status !== null && row.reply_body !== null) {
        return { _tag: "Completed", fingerprint: row.fingerprint, reply: { status: Number(row.reply_status), body: row.reply_body } } satisfies Claim
      }
      return { _tag: "Pending", fingerprint: row.fingerprint, holder: row.holder } satisfies Claim
    })

  const claimUntilSettled = (r: ClaimRequest, attempts: number): Effect.Effect<Claim, IdempotencyStoreUnavailable | IdempotencyQuotaExceeded> =>
    Effect.flatMap(claim(r), (c) =>
      c !== undefined
        ? Effect.succeed(c)
        : attempts <= 1
          ? Effect.fail(new IdempotencyStoreUnavailable({ message: `key ${r.key} keeps being claimed and released` }))
          : claimUntilSettled(r, attempts - 1)
    )

  return {
    claim: (r) => claimUntilSettled(r, 3),
    complete: (scope, key, holder, reply) =>
      sql`UPDATE mesh_idempotency SET status = 'completed', reply_status = ${reply.status}, reply_body = ${reply.body}, reply_bytes = ${replyBytes(reply)}
        WHERE scope = ${scope} AND key = ${key} AND holder = ${holder} AND status = 'pending'`.pipe(Effect.asVoid, Effect.mapError(unavailable)),
    release: (scope, key, holder) =>
      sql`DELETE FROM mesh_idempotency WHERE scope = ${scope} AND key = ${key} AND holder = ${holder} AND status = 'pending'`.pipe(
        Effect.asVoid,
        Effect.mapError(unavailable)
      )
  }
})

/** `IdempotencyStore` on SQL; needs a migrated `SqlClient`. */
export const layer: Layer.Layer<IdempotencyStore, never, SqlClient.SqlClient> = Layer.effect(IdempotencyStore, make)
