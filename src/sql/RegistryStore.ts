/**
 * The hub's storage: API keys, pinned manifests, registry entries (agents, MCP servers, skills), revoked mandates
 * and platform challenges, on a migrated `SqlClient` (`Database`). Rows only; rules live in `Registry`.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { HotReads, PgHotStatements } from "./Database.js"
import { classify, type PersistenceError } from "./SqlFailure.js"

/** The kinds of registry entry. */
export const EntryKind = Schema.Literal("agent", "mcp", "skill", "a2a")
/** The kinds of registry entry. */
export type EntryKind = typeof EntryKind.Type

/** One registry entry as stored. */
export const EntryRow = Schema.Struct({
  did: Schema.String,
  did_hash: Schema.String,
  kind: EntryKind,
  name: Schema.String,
  endpoint_url: Schema.NullOr(Schema.String),
  public_key_b64: Schema.NullOr(Schema.String),
  key_version: Schema.Number,
  manifest_cid: Schema.NullOr(Schema.String),
  skill_type: Schema.NullOr(Schema.String),
  tools: Schema.NullOr(Schema.String),
  owner_key_id: Schema.String,
  created_at: Schema.Number,
  updated_at: Schema.Number,
  /** When the agent was last heard from (registration, update, heartbeat); migration 0017. Absent on MCP servers and skills. */
  last_seen_at: Schema.optional(Schema.NullOr(Schema.Number))
})
/** One registry entry as stored. */
export type EntryRow = typeof EntryRow.Type

/** One API key as stored (only the hash of the secret). */
export const ApiKeyRow = Schema.Struct({
  id: Schema.String,
  key_hash: Schema.String,
  owner: Schema.String,
  kind: Schema.Literal("admin", "user", "agent"),
  label: Schema.NullOr(Schema.String),
  created_at: Schema.Number,
  revoked_at: Schema.NullOr(Schema.Number)
})
/** One API key as stored. */
export type ApiKeyRow = typeof ApiKeyRow.Type

/** A platform challenge as stored. */
export const ChallengeRow = Schema.Struct({
  id: Schema.String,
  did: Schema.String,
  public_key_b64: Schema.String,
  challenge: Schema.String,
  expires_at: Schema.Number,
  used_at: Schema.NullOr(Schema.Number)
})
/** A platform challenge as stored. */
export type ChallengeRow = typeof ChallengeRow.Type

/** What is left of a deleted agent: its last key and key version, so the DID never restarts at version 1. */
export const TombstoneRow = Schema.Struct({
  did: Schema.String,
  did_hash: Schema.String,
  public_key_b64: Schema.String,
  key_version: Schema.Number,
  deleted_at: Schema.Number
})
/** What is left of a deleted agent. */
export type TombstoneRow = typeof TombstoneRow.Type

type Fx<A> = Effect.Effect<A, PersistenceError>

/**
 * A liveness filter: `live` keeps agents last seen at or after `since` (epoch ms); not `live`, the others (never seen
 * included). Only agents carry liveness, so a filtered search returns agents only.
 */
export interface SeenFilter {
  readonly live: boolean
  readonly since: number
}

/** One write-quota budget: its id and what one window of it allows. */
export interface WriteBudget {
  readonly id: string
  readonly entries: number
  readonly bytes: number
}

/** A budget's current window as stored: when it started and what was charged in it. */
export interface WriteWindow {
  readonly window_start: number
  readonly entries: number
  readonly bytes: number
}

/**
 * The operations of the registry store. Each fails with `PersistenceError` only; a taken DID or key hash is its
 * `UniqueViolation`, which `Registry` turns into `DID_TAKEN`.
 */
export interface RegistryStoreApi {
  readonly insertApiKey: (row: ApiKeyRow) => Fx<void>
  readonly apiKeyByHash: (hash: string) => Fx<Option.Option<ApiKeyRow>>
  readonly apiKeyById: (id: string) => Fx<Option.Option<ApiKeyRow>>
  readonly countApiKeys: (kind: ApiKeyRow["kind"]) => Fx<number>
  /** Marks a key revoked; false when there was no such live key. */
  readonly revokeApiKey: (id: string, at: number) => Fx<boolean>
  readonly pinManifest: (cid: string, body: string, at: number) => Fx<void>
  readonly manifest: (cid: string) => Fx<Option.Option<string>>
  readonly insertEntry: (row: EntryRow) => Fx<void>
  readonly entryByHash: (didHash: string) => Fx<Option.Option<EntryRow>>
  readonly entryByDid: (did: string) => Fx<Option.Option<EntryRow>>
  /** Entries of a kind in didHash order after `cursor`, at most `limit`, optionally only the live (or stale) ones. */
  readonly listEntries: (kind: EntryKind, limit: number, cursor: string | undefined, seen?: SeenFilter) => Fx<ReadonlyArray<EntryRow>>
  /** Records that the entry was heard from at `at`; false when there is no such entry. */
  readonly touchEntry: (did: string, at: number) => Fx<boolean>
  readonly updateEntry: (did: string, patch: Partial<Pick<EntryRow, "endpoint_url" | "manifest_cid" | "public_key_b64" | "key_version" | "updated_at" | "last_seen_at">>) => Fx<void>
  /**
   * Sets a new key and increments the key version in one statement, only while the version is still `from` (a
   * rotation signed for one version cannot land on another); 0 when it was not.
   */
  readonly rotateKey: (did: string, publicKeyB64: string, from: number, at: number) => Fx<number>
  readonly deleteEntry: (did: string) => Fx<void>
  /** Deletes an agent and keeps its tombstone (last key and key version), in one transaction. */
  readonly deleteAgent: (row: EntryRow, at: number) => Fx<void>
  readonly tombstone: (did: string) => Fx<Option.Option<TombstoneRow>>
  /** Records a one-time setting; false when it was already recorded. */
  readonly claimSetting: (name: string, value: string) => Fx<boolean>
  /**
   * Entries whose search doc (bounded name, description, tags and tool names; migration 0010, on Postgres 0025)
   * contains every term, case-insensitive, at most `limit`, in index order. Terms are text, never query syntax.
   */
  readonly search: (terms: ReadonlyArray<string>, limit: number, seen?: SeenFilter) => Fx<ReadonlyArray<EntryRow>>
  /** Records a mandate revocation; false when it was already revoked. */
  readonly revokeMandate: (jti: string, grantor: string, at: number) => Fx<boolean>
  readonly isMandateRevoked: (jti: string, grantor: string) => Fx<boolean>
  readonly insertChallenge: (row: ChallengeRow) => Fx<void>
  /** Marks an unused, unexpired challenge used and returns it; none when it is unknown, used or expired. */
  readonly consumeChallenge: (id: string, now: number) => Fx<Option.Option<ChallengeRow>>
  /** Deletes at most `batch` challenges that are expired or used at `now`; returns how many. */
  readonly purgeChallenges: (now: number, batch: number) => Fx<number>
  readonly countChallenges: Fx<number>
  /** True when the database answers. */
  readonly ping: Effect.Effect<boolean>
  /**
   * Charges `entries` and `bytes` to every budget's window (one older than `windowMs` at `now` starts again at
   * `now`) only when each stays within its budget, all or none, in one transaction of one conditional upsert per
   * budget (taken in id order), so writes through several hubs at once never pass a budget together. None when
   * charged; else the budget that refused, with its window as it stands (none when this charge alone is too large).
   */
  readonly chargeWrites: (
    budgets: ReadonlyArray<WriteBudget>,
    entries: number,
    bytes: number,
    now: number,
    windowMs: number
  ) => Fx<Option.Option<{ readonly id: string; readonly window: Option.Option<WriteWindow> }>>
  /** Deletes the windows that started before `before` (they are over, so they say nothing). */
  readonly purgeWriteWindows: (before: number) => Fx<void>
  /** Records a write proof as used until `expiresAt`; false when it is recorded already (one INSERT, so once). */
  readonly claimProof: (proofValue: string, expiresAt: number) => Fx<boolean>
  /** Forgets claimed proofs whose write did not happen, so it may be retried as signed. */
  readonly releaseProofs: (proofValues: ReadonlyArray<string>) => Fx<void>
  /** Deletes the proofs recorded until `now` or earlier. */
  readonly purgeProofs: (now: number) => Fx<void>
  /** Stores (or replaces) the card of an A2A agent, as fetched at `at`. */
  readonly putA2aCard: (did: string, card: string, at: number) => Fx<void>
  /** The stored card of an A2A agent and when it was fetched. */
  readonly a2aCard: (did: string) => Fx<Option.Option<{ readonly card: string; readonly fetched_at: number }>>
}

/** The `RegistryStore` service. */
export class RegistryStore extends Context.Tag("agent-mesh/RegistryStore")<RegistryStore, RegistryStoreApi>() {}

/** Longest piece of a term matched as one FTS5 phrase, in characters; see `ftsQuery`. */
export const SEARCH_PIECE_LENGTH = 12
const PIECE_STEP = SEARCH_PIECE_LENGTH - 2

/**
 * An FTS5 query matching every term as literal text: each piece becomes one quoted string (an inner `"` doubled), so
 * `OR`, `NEAR`, `*`, `-`, `:`, `^` and parentheses are characters to find, not operators. Checking a phrase costs
 * its length times the occurrences of its trigrams in a row, and repetitive rows (`aaaa…`) make that large; so a
 * term longer than `SEARCH_PIECE_LENGTH` is matched as its overlapping pieces of that length (each must occur), and
 * a piece repeated or contained in another is asked once. A row matching a short term contains it; for a long term,
 * each of its pieces.
 */
export const ftsQuery = (terms: ReadonlyArray<string>): string => {
  const pieces = new Set<string>()
  for (const term of terms) {
    const chars = [...term.toLowerCase()]
    for (let start = 0; ; start += PIECE_STEP) {
      const end = Math.min(start + SEARCH_PIECE_LENGTH, chars.length)
      pieces.add(chars.slice(Math.max(0, end - SEARCH_PIECE_LENGTH), end).join(""))
      if (end === chars.length) break
    }
  }
  // A piece inside another piece is implied by it (all must occur), so only the containing one is asked.
  const kept = [...pieces].filter((p) => ![...pieces].some((o) => o !== p && o.includes(p)))
  return kept.map((p) => `"${p.replace(/"/g, '""')}"`).join(" ")
}

/** A term as a LIKE pattern matching it anywhere: `%`, `_` and the escape character `\\` stand for themselves. */
const containing = (term: string) => `%${term.toLowerCase().replace(/[\\%_]/g, "\\$&")}%`

/**
 * The Postgres search: every term a lower-case substring of the entry's search text (migration 0025: the same
 * bounded fields as SQLite's docs), which its pg_trgm GIN index answers; `e` is the entry.
 */
export const pgSearchStatement = (sql: SqlClient.SqlClient, terms: ReadonlyArray<string>, limit: number, seen?: SeenFilter) =>
  sql`
  SELECT e.* FROM mesh_search_text d JOIN mesh_entries e ON e.did = d.did
  WHERE ${sql.and(terms.map((t) => sql`d.doc LIKE ${containing(t)}`))} ${seenClauseOf(sql, seen)}
  ORDER BY e.created_at, e.did LIMIT ${limit}`

/** The liveness condition on alias `e`; none when unfiltered. */
const seenClauseOf = (sql: SqlClient.SqlClient, seen: SeenFilter | undefined) =>
  seen === undefined
    ? sql.literal("")
    : seen.live
      ? sql`AND e.kind = 'agent' AND e.last_seen_at >= ${seen.since}`
      : sql`AND e.kind = 'agent' AND (e.last_seen_at IS NULL OR e.last_seen_at < ${seen.since})`

/** A budget that refused a charge; fails the charge's transaction so nothing of it stays. */
class Refused extends Data.TaggedError("Refused")<{ readonly id: string; readonly window: Option.Option<WriteWindow> }> {}

/** The store on a migrated `SqlClient`. */
export const make: Effect.Effect<RegistryStoreApi, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const hot = yield* Effect.serviceOption(HotReads)
  const pgHot = Option.getOrUndefined(yield* Effect.serviceOption(PgHotStatements))
  /** On Postgres, the first row of a prepared statement on `PgHotStatements` (rows of our own tables, not decoded). */
  const pgOne = <Row>(name: string, text: string) => (...values: ReadonlyArray<string>): Fx<Option.Option<Row>> =>
    Effect.mapBoth(pgHot!.query(name, text, values), { onFailure: classify, onSuccess: (rows) => Option.fromNullable(rows[0] as Row | undefined) })

  const apiKeyByHash = SqlSchema.findOne({ Request: Schema.String, Result: ApiKeyRow, execute: (h) => sql`SELECT * FROM mesh_api_keys WHERE key_hash = ${h}` })
  const apiKeyById = SqlSchema.findOne({ Request: Schema.String, Result: ApiKeyRow, execute: (id) => sql`SELECT * FROM mesh_api_keys WHERE id = ${id}` })
  const entryByHash = SqlSchema.findOne({ Request: Schema.String, Result: EntryRow, execute: (h) => sql`SELECT * FROM mesh_entries WHERE did_hash = ${h}` })
  const entryByDid = SqlSchema.findOne({ Request: Schema.String, Result: EntryRow, execute: (d) => sql`SELECT * FROM mesh_entries WHERE did = ${d}` })
  const tombstone = SqlSchema.findOne({ Request: Schema.String, Result: TombstoneRow, execute: (d) => sql`SELECT * FROM mesh_tombstones WHERE did = ${d}` })
  const challengeById = SqlSchema.findOne({ Request: Schema.String, Result: ChallengeRow, execute: (id) => sql`SELECT * FROM mesh_challenges WHERE id = ${id}` })
  const rows = Schema.decodeUnknown(Schema.Array(EntryRow))
  const seenClause = (seen: SeenFilter | undefined) => seenClauseOf(sql, seen)
  const listEntries = (kind: EntryKind, limit: number, cursor: string, seen: SeenFilter | undefined) =>
    Effect.flatMap(
      sql`SELECT * FROM mesh_entries e WHERE e.kind = ${kind} AND e.did_hash > ${cursor} ${seenClause(seen)} ORDER BY e.did_hash LIMIT ${limit}`,
      rows
    )
  // The one FTS5 query (the index is migration 0010). Walking the index in rowid order lets LIMIT stop the scan at
  // the page's last hit instead of ranking every match.
  const searchSqlite = (match: string, limit: number, seen: SeenFilter | undefined) =>
    Effect.flatMap(
      sql`
      SELECT e.* FROM mesh_search s JOIN mesh_search_docs d ON d.id = s.rowid JOIN mesh_entries e ON e.did = d.did
      WHERE mesh_search MATCH ${match} ${seenClause(seen)} ORDER BY s.rowid LIMIT ${limit}`,
      rows
    )
  const searchPostgres = (terms: ReadonlyArray<string>, limit: number, seen: SeenFilter | undefined) =>
    Effect.flatMap(pgSearchStatement(sql, terms, limit, seen), rows)
  const isPostgres = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  // Every number cast: Postgres would otherwise type a bare parameter in a SELECT list or a comparison as text.
  const int = (n: number) => sql`CAST(${n} AS BIGINT)`
  /** One budget's conditional upsert: a row back when charged, none when the sum would pass the budget. */
  const chargeOne = (b: WriteBudget, entries: number, bytes: number, now: number, windowMs: number) => {
    const over = sql`excluded.window_start - mesh_write_quotas.window_start >= ${int(windowMs)}`
    const sum = (column: "entries" | "bytes") =>
      sql`(CASE WHEN ${over} THEN excluded.${sql.literal(column)} ELSE mesh_write_quotas.${sql.literal(column)} + excluded.${sql.literal(column)} END)`
    return sql<{ window_start: number }>`
      INSERT INTO mesh_write_quotas (id, window_start, entries, bytes)
      SELECT ${b.id}, ${int(now)}, ${int(entries)}, ${int(bytes)} WHERE ${int(entries)} <= ${int(b.entries)} AND ${int(bytes)} <= ${int(b.bytes)}
      ON CONFLICT (id) DO UPDATE SET
        window_start = CASE WHEN ${over} THEN excluded.window_start ELSE mesh_write_quotas.window_start END,
        entries = ${sum("entries")},
        bytes = ${sum("bytes")}
      WHERE ${sum("entries")} <= ${int(b.entries)} AND ${sum("bytes")} <= ${int(b.bytes)}
      RETURNING window_start`
  }
  const windowOf = (id: string) =>
    Effect.map(sql<{ window_start: number; entries: number; bytes: number }>`SELECT window_start, entries, bytes FROM mesh_write_quotas WHERE id = ${id}`, (rows) =>
      Option.map(Option.fromNullable(rows[0]), (r): WriteWindow => ({ window_start: Number(r.window_start), entries: Number(r.entries), bytes: Number(r.bytes) }))
    )
  const chargeWrites = (budgets: ReadonlyArray<WriteBudget>, entries: number, bytes: number, now: number, windowMs: number) =>
    Effect.forEach(
      // One lock order for every charge, so two charges sharing budgets wait for each other instead of deadlocking.
      [...budgets].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
      (b) =>
        Effect.flatMap(chargeOne(b, entries, bytes, now, windowMs), (rows) =>
          rows.length > 0 ? Effect.void : Effect.flatMap(windowOf(b.id), (window) => Effect.fail(new Refused({ id: b.id, window })))
        ),
      { discard: true }
    ).pipe(
      sql.withTransaction,
      Effect.as(Option.none<{ readonly id: string; readonly window: Option.Option<WriteWindow> }>()),
      Effect.catchTag("Refused", (r) => Effect.succeed(Option.some({ id: r.id, window: r.window }))),
      Effect.mapError(classify)
    )

  return {
    insertApiKey: (row) => sql`INSERT INTO mesh_api_keys ${sql.insert(row)}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    apiKeyByHash: pgHot !== undefined
      ? pgOne<ApiKeyRow>("mesh_api_key_by_hash", "SELECT * FROM mesh_api_keys WHERE key_hash = $1")
      : (h) => apiKeyByHash(h).pipe(Effect.mapError(classify)),
    apiKeyById: (id) => apiKeyById(id).pipe(Effect.mapError(classify)),
    countApiKeys: (kind) =>
      sql<{ n: number }>`SELECT count(*) AS n FROM mesh_api_keys WHERE kind = ${kind} AND revoked_at IS NULL`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.mapError(classify)
      ),
    revokeApiKey: (id, at) =>
      sql<{ id: string }>`UPDATE mesh_api_keys SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError(classify)
      ),
    pinManifest: (cid, body, at) =>
      sql`INSERT INTO mesh_manifests (cid, body, created_at) VALUES (${cid}, ${body}, ${at}) ON CONFLICT (cid) DO NOTHING`.pipe(Effect.asVoid, Effect.mapError(classify)),
    manifest: (cid) =>
      SqlSchema.findOne({ Request: Schema.String, Result: Schema.Struct({ body: Schema.String }), execute: (c) => sql`SELECT body FROM mesh_manifests WHERE cid = ${c}` })(cid).pipe(
        Effect.map(Option.map((r) => r.body)),
        Effect.mapError(classify)
      ),
    insertEntry: (row) => sql`INSERT INTO mesh_entries ${sql.insert(row)}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    entryByHash: Option.match(hot, {
      onNone: () =>
        pgHot !== undefined
          ? pgOne<EntryRow>("mesh_entry_by_hash", "SELECT * FROM mesh_entries WHERE did_hash = $1")
          : (h: string) => entryByHash(h).pipe(Effect.mapError(classify)),
      onSome: (reads) => {
        // Rows of our own table, read on every resolve: taken as they are, without a decode.
        const get = reads.prepareGet<EntryRow>("SELECT * FROM mesh_entries WHERE did_hash = ?")
        return (h: string) =>
          Effect.try({ try: () => Option.fromNullable(get(h)), catch: classify })
      }
    }),
    entryByDid: pgHot !== undefined
      ? pgOne<EntryRow>("mesh_entry_by_did", "SELECT * FROM mesh_entries WHERE did = $1")
      : (d) => entryByDid(d).pipe(Effect.mapError(classify)),
    listEntries: (kind, limit, cursor, seen) => listEntries(kind, limit, cursor ?? "", seen).pipe(Effect.mapError(classify)),
    touchEntry: (did, at) =>
      sql<{ did: string }>`UPDATE mesh_entries SET last_seen_at = ${at} WHERE did = ${did} RETURNING did`.pipe(
        Effect.map((r) => r.length > 0),
        Effect.mapError(classify)
      ),
    updateEntry: (did, patch) => sql`UPDATE mesh_entries SET ${sql.update(patch)} WHERE did = ${did}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    rotateKey: (did, publicKeyB64, from, at) =>
      sql<{ key_version: number }>`UPDATE mesh_entries SET public_key_b64 = ${publicKeyB64}, key_version = key_version + 1, updated_at = ${at}
        WHERE did = ${did} AND key_version = ${from} RETURNING key_version`.pipe(
        Effect.map((rows) => Number(rows[0]?.key_version ?? 0)),
        Effect.mapError(classify)
      ),
    deleteEntry: (did) => sql`DELETE FROM mesh_entries WHERE did = ${did}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    deleteAgent: (row, at) =>
      Effect.all([
        sql`INSERT INTO mesh_tombstones (did, did_hash, public_key_b64, key_version, deleted_at)
          VALUES (${row.did}, ${row.did_hash}, ${row.public_key_b64 ?? ""}, ${row.key_version}, ${at})
          ON CONFLICT (did) DO UPDATE SET public_key_b64 = excluded.public_key_b64, key_version = excluded.key_version, deleted_at = excluded.deleted_at`,
        sql`DELETE FROM mesh_entries WHERE did = ${row.did}`
      ], { discard: true }).pipe(sql.withTransaction, Effect.mapError(classify)),
    tombstone: (did) => tombstone(did).pipe(Effect.mapError(classify)),
    claimSetting: (name, value) =>
      sql<{ name: string }>`INSERT INTO mesh_settings (name, value) VALUES (${name}, ${value}) ON CONFLICT (name) DO NOTHING RETURNING name`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError(classify)
      ),
    search: (terms, limit, seen) =>
      terms.length === 0
        ? Effect.succeed([])
        : (isPostgres ? searchPostgres(terms, limit, seen) : searchSqlite(ftsQuery(terms), limit, seen)).pipe(Effect.mapError(classify)),
    revokeMandate: (jti, grantor, at) =>
      sql<{ jti: string }>`INSERT INTO mesh_mandate_revocations (grantor, jti, revoked_at) VALUES (${grantor}, ${jti}, ${at})
        ON CONFLICT (grantor, jti) DO NOTHING RETURNING jti`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError(classify)
      ),
    isMandateRevoked: (jti, grantor) =>
      pgHot !== undefined
        ? Effect.map(pgOne("mesh_revoked", "SELECT 1 AS n FROM mesh_mandate_revocations WHERE grantor = $1 AND jti = $2")(grantor, jti), Option.isSome)
        : sql<{ n: number }>`SELECT 1 AS n FROM mesh_mandate_revocations WHERE grantor = ${grantor} AND jti = ${jti}`.pipe(Effect.map((rows) => rows.length > 0), Effect.mapError(classify)),
    insertChallenge: (row) => sql`INSERT INTO mesh_challenges ${sql.insert(row)}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    consumeChallenge: (id, now) =>
      // One statement marks it used, so two answers racing for one challenge cannot both win.
      sql<{ id: string }>`UPDATE mesh_challenges SET used_at = ${now} WHERE id = ${id} AND used_at IS NULL AND expires_at > ${now} RETURNING id`.pipe(
        Effect.flatMap((rows) => (rows.length === 0 ? Effect.succeedNone : challengeById(id))),
        Effect.mapError(classify)
      ),
    purgeChallenges: (now, batch) =>
      sql<{ id: string }>`DELETE FROM mesh_challenges WHERE id IN (
        SELECT id FROM mesh_challenges WHERE expires_at <= ${now} UNION SELECT id FROM mesh_challenges WHERE used_at IS NOT NULL LIMIT ${batch}
      ) RETURNING id`.pipe(Effect.map((rows) => rows.length), Effect.mapError(classify)),
    countChallenges: sql<{ n: number }>`SELECT count(*) AS n FROM mesh_challenges`.pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)), Effect.mapError(classify)),
    ping: sql`SELECT 1`.pipe(Effect.as(true), Effect.catchAll(() => Effect.succeed(false))),
    chargeWrites,
    purgeWriteWindows: (before) => sql`DELETE FROM mesh_write_quotas WHERE window_start < ${int(before)}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    claimProof: (proofValue, expiresAt) =>
      sql<{ proof_value: string }>`INSERT INTO mesh_used_proofs (proof_value, expires_at) VALUES (${proofValue}, ${int(expiresAt)})
        ON CONFLICT (proof_value) DO NOTHING RETURNING proof_value`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.mapError(classify)
      ),
    releaseProofs: (proofValues) =>
      proofValues.length === 0
        ? Effect.void
        : sql`DELETE FROM mesh_used_proofs WHERE proof_value IN ${sql.in(proofValues)}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    purgeProofs: (now) => sql`DELETE FROM mesh_used_proofs WHERE expires_at <= ${int(now)}`.pipe(Effect.asVoid, Effect.mapError(classify)),
    putA2aCard: (did, card, at) =>
      sql`INSERT INTO mesh_a2a_cards (did, card, fetched_at) VALUES (${did}, ${card}, ${at})
        ON CONFLICT (did) DO UPDATE SET card = excluded.card, fetched_at = excluded.fetched_at`.pipe(Effect.asVoid, Effect.mapError(classify)),
    a2aCard: (did) =>
      SqlSchema.findOne({
        Request: Schema.String,
        Result: Schema.Struct({ card: Schema.String, fetched_at: Schema.Number }),
        execute: (d) => sql`SELECT card, fetched_at FROM mesh_a2a_cards WHERE did = ${d}`
      })(did).pipe(Effect.mapError(classify))
  }
})

/** `RegistryStore` on SQL; provide a migrated `SqlClient` (`Database.layerSqlite`, `:memory:` in tests). */
export const layer: Layer.Layer<RegistryStore, never, SqlClient.SqlClient> = Layer.effect(RegistryStore, make)
