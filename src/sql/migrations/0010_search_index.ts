/**
 * The registry's search index. Search reads bounded fields of each entry, never manifest bodies or tool lists
 * themselves, so the cost of one query does not grow with what someone registered (docs/hub.md, "Search").
 *
 * `mesh_search_docs` holds one row per entry: its name (for an agent, the DID and the manifest's `name`), the
 * manifest's `description`, its tags (the skill type, the manifest's `capabilities` — strings or objects' `name` —
 * and `tags`) and its MCP tool names, each cut to the sizes below. The table is plain SQL, kept in step with
 * `mesh_entries` by triggers, so every write path (insert, update, delete) updates it in the same statement and no
 * store code can forget. `mesh_search` is an SQLite FTS5 index over it with the `trigram` tokenizer, which keeps the
 * old substring matching (case-insensitive) for terms of three characters or more. Everything FTS5-specific is in
 * this file and in `RegistryStore`'s search query; a Postgres counterpart indexes the same docs table (pg_trgm).
 *
 * The sizes are part of the schema: changing them takes a new migration that rebuilds the docs.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Longest name (and manifest name) kept, in characters. */
const NAME = 256
/** Longest description kept. */
const DESCRIPTION = 1024
/** Longest single tag, capability or tool name kept. */
const ITEM = 128
/** Longest tag or tool column kept (all items, space-separated). */
const LIST = 2048

// The docs row of entry `e` (a table alias, or NEW in a trigger) with its manifest `m` (LEFT JOINed, may be NULL).
// The manifest is read once here, at write time; the JSON functions only ever see a pinned (capped) manifest.
const textAt = (path: string) => `CASE WHEN json_type(m.body, '${path}') = 'text' THEN json_extract(m.body, '${path}') END`
// `type` and `value` are json_each's columns: a string item is its own name, an object item names itself in `name`.
const itemName = `CASE type WHEN 'text' THEN value WHEN 'object' THEN (CASE WHEN json_type(value, '$.name') = 'text' THEN json_extract(value, '$.name') END) END`
const listOf = (path: string) => `(SELECT group_concat(substr(${itemName}, 1, ${ITEM}), ' ') FROM json_each(m.body, '${path}'))`
const docOf = (e: string) => `
  ${e}.did,
  substr(${e}.name, 1, ${NAME}) || coalesce(' ' || substr(${textAt("$.name")}, 1, ${NAME}), ''),
  coalesce(substr(${textAt("$.description")}, 1, ${DESCRIPTION}), ''),
  substr(trim(coalesce(${e}.skill_type, '') || ' ' || coalesce(${listOf("$.capabilities")}, '') || ' ' || coalesce(${listOf("$.tags")}, '')), 1, ${LIST}),
  coalesce(substr((SELECT group_concat(substr(${itemName}, 1, ${ITEM}), ' ') FROM json_each(coalesce(${e}.tools, '[]'))), 1, ${LIST}), '')`

/** Search docs, their FTS5 index, the triggers keeping both in step with `mesh_entries`, and the backfill. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE mesh_search_docs (
      id INTEGER PRIMARY KEY,
      did TEXT NOT NULL UNIQUE,
      name TEXT NOT NULL,
      description TEXT NOT NULL,
      tags TEXT NOT NULL,
      tools TEXT NOT NULL
    )`,
    sql.unsafe(`CREATE VIRTUAL TABLE mesh_search USING fts5(
      name, description, tags, tools, content = 'mesh_search_docs', content_rowid = 'id', tokenize = 'trigram'
    )`),
    sql`CREATE TRIGGER mesh_search_docs_ai AFTER INSERT ON mesh_search_docs BEGIN
      INSERT INTO mesh_search (rowid, name, description, tags, tools) VALUES (NEW.id, NEW.name, NEW.description, NEW.tags, NEW.tools);
    END`,
    sql`CREATE TRIGGER mesh_search_docs_ad AFTER DELETE ON mesh_search_docs BEGIN
      INSERT INTO mesh_search (mesh_search, rowid, name, description, tags, tools) VALUES ('delete', OLD.id, OLD.name, OLD.description, OLD.tags, OLD.tools);
    END`,
    sql.unsafe(`CREATE TRIGGER mesh_entries_search_ai AFTER INSERT ON mesh_entries BEGIN
      INSERT INTO mesh_search_docs (did, name, description, tags, tools)
        SELECT ${docOf("NEW")} FROM (SELECT 1) LEFT JOIN mesh_manifests m ON m.cid = NEW.manifest_cid;
    END`),
    // Updates set every patched column, changed or not (an endpoint-only PATCH rewrites manifest_cid): re-index only
    // when an indexed source really changed.
    sql.unsafe(`CREATE TRIGGER mesh_entries_search_au AFTER UPDATE OF name, manifest_cid, skill_type, tools ON mesh_entries
      WHEN OLD.name IS NOT NEW.name OR OLD.manifest_cid IS NOT NEW.manifest_cid OR OLD.skill_type IS NOT NEW.skill_type OR OLD.tools IS NOT NEW.tools
    BEGIN
      DELETE FROM mesh_search_docs WHERE did = OLD.did;
      INSERT INTO mesh_search_docs (did, name, description, tags, tools)
        SELECT ${docOf("NEW")} FROM (SELECT 1) LEFT JOIN mesh_manifests m ON m.cid = NEW.manifest_cid;
    END`),
    sql`CREATE TRIGGER mesh_entries_search_ad AFTER DELETE ON mesh_entries BEGIN
      DELETE FROM mesh_search_docs WHERE did = OLD.did;
    END`,
    sql.unsafe(`INSERT INTO mesh_search_docs (did, name, description, tags, tools)
      SELECT ${docOf("e")} FROM mesh_entries e LEFT JOIN mesh_manifests m ON m.cid = e.manifest_cid ORDER BY e.created_at, e.did`)
  ], { discard: true })
)
