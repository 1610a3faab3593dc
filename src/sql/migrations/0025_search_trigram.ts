import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Registry search on Postgres by index (docs/scaling.md §5), the counterpart of SQLite's FTS5 trigram index
 * (migration 0010, which SQLite keeps; this does nothing there). `mesh_search_text` holds one row per entry: the same
 * bounded fields as 0010's docs (name and manifest name, description, tags, tool names, each cut to 0010's sizes),
 * joined by U+0001 and lower-cased, so a term matches as a lower-case substring exactly as the query over the
 * entries did before. A GIN index with pg_trgm's `gin_trgm_ops` answers `doc LIKE '%term%'` from the term's
 * trigrams (and rechecks each candidate), so a search no longer reads every entry. A trigger keeps the row in step
 * with `mesh_entries` on every write path; heartbeats touch no indexed column and rewrite nothing. Manifests are
 * content-addressed and never change, so an entry's row changes only with the entry.
 *
 * pg_trgm ships with Postgres (Debian's postgresql-contrib); it is a trusted extension, so the database's owner may
 * create it.
 */

// Migration 0010's sizes.
const NAME = 256
const DESCRIPTION = 1024
const ITEM = 128
const LIST = 2048

/** A JSON string field of `json` as text, NULL when it is anything else. */
const text = (json: string, field: string) => `(CASE WHEN jsonb_typeof(${json} -> '${field}') = 'string' THEN ${json} ->> '${field}' END)`

/** The names of a JSON array's items (strings, or objects' `name`), each cut, space-separated. */
const list = (array: string) => `(SELECT string_agg(substr(CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}'
  WHEN 'object' THEN (CASE WHEN jsonb_typeof(v -> 'name') = 'string' THEN v ->> 'name' END) END, 1, ${ITEM}), ' ')
  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(${array}) = 'array' THEN ${array} ELSE '[]'::jsonb END) v)`

/** The search text of entry `e` (an alias, or NEW) with its manifest's body as jsonb `j` (NULL without one). */
const docOf = (e: string, j: string) => `lower(concat_ws(chr(1),
  substr(${e}.name, 1, ${NAME}) || coalesce(' ' || substr(${text(j, "name")}, 1, ${NAME}), ''),
  substr(${text(j, "description")}, 1, ${DESCRIPTION}),
  substr(trim(coalesce(${e}.skill_type, '') || ' ' || coalesce(${list(`${j} -> 'capabilities'`)}, '') || ' ' || coalesce(${list(`${j} -> 'tags'`)}, '')), 1, ${LIST}),
  substr(${list(`CASE WHEN ${e}.tools IS NULL THEN NULL ELSE ${e}.tools::jsonb END`)}, 1, ${LIST})
))`

const manifestOf = (e: string) => `(SELECT (SELECT m.body::jsonb FROM mesh_manifests m WHERE m.cid = ${e}.manifest_cid) AS j) mj`

/** The search text table, its trigram index, the trigger keeping it in step, and the backfill (Postgres only). */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    orElse: () => Effect.void,
    pg: () =>
      Effect.all([
        sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`,
        sql`CREATE TABLE mesh_search_text (
          did TEXT PRIMARY KEY,
          doc TEXT NOT NULL
        )`,
        sql`CREATE INDEX mesh_search_text_trgm ON mesh_search_text USING gin (doc gin_trgm_ops)`,
        sql.unsafe(`CREATE FUNCTION mesh_search_text_sync() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
          IF TG_OP = 'DELETE' THEN
            DELETE FROM mesh_search_text WHERE did = OLD.did;
          ELSE
            INSERT INTO mesh_search_text (did, doc) SELECT NEW.did, ${docOf("NEW", "mj.j")} FROM ${manifestOf("NEW")}
              ON CONFLICT (did) DO UPDATE SET doc = excluded.doc;
          END IF;
          RETURN NULL;
        END
        $fn$`),
        sql`CREATE TRIGGER mesh_entries_search_text AFTER INSERT OR DELETE ON mesh_entries FOR EACH ROW EXECUTE FUNCTION mesh_search_text_sync()`,
        // Updates set every patched column, changed or not (an endpoint-only PATCH rewrites manifest_cid): re-index
        // only when an indexed source really changed.
        sql`CREATE TRIGGER mesh_entries_search_text_au AFTER UPDATE OF name, manifest_cid, skill_type, tools ON mesh_entries FOR EACH ROW
          WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.manifest_cid IS DISTINCT FROM NEW.manifest_cid
            OR OLD.skill_type IS DISTINCT FROM NEW.skill_type OR OLD.tools IS DISTINCT FROM NEW.tools)
          EXECUTE FUNCTION mesh_search_text_sync()`,
        sql.unsafe(`INSERT INTO mesh_search_text (did, doc) SELECT e.did, ${docOf("e", "mj.j")} FROM mesh_entries e CROSS JOIN LATERAL ${manifestOf("e")}`)
      ], { discard: true })
  }))
