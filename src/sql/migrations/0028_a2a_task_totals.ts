import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The A2A task store's bounds (`maxA2aTasks`, `maxA2aTaskBytes`, `maxA2aTaskBytesPerCaller`) checked against running
 * totals instead of a count and sum over every kept task on each insert, which cost time in proportion to the tasks
 * kept (up to 10 000 by default) on every request. `mesh_a2a_task_totals` holds one row, the store's task count and
 * bytes; `mesh_a2a_task_holders` one row per holder with tasks kept, its count and bytes (a holder's row goes with its
 * last task, so anonymous callers' addresses do not pile up). Triggers keep both in the same transaction as every
 * insert, delete and resize of a task, whichever statement makes it, so they stay exact; they also delete a task's
 * events with it. Room is made from the oldest ended tasks a page at a time: the indexes below hold them in that order
 * (ended time, then id), in all and per holder, replacing 0023's (ended, ended_at) and (holder).
 */

const SQLITE_TRIGGERS = [
  `CREATE TRIGGER mesh_a2a_tasks_kept AFTER INSERT ON mesh_a2a_tasks BEGIN
    UPDATE mesh_a2a_task_totals SET tasks = tasks + 1, bytes = bytes + NEW.bytes WHERE id = 1;
    INSERT INTO mesh_a2a_task_holders (holder, tasks, bytes) VALUES (NEW.holder, 1, NEW.bytes)
      ON CONFLICT (holder) DO UPDATE SET tasks = tasks + 1, bytes = bytes + excluded.bytes;
  END`,
  `CREATE TRIGGER mesh_a2a_tasks_let_go AFTER DELETE ON mesh_a2a_tasks BEGIN
    UPDATE mesh_a2a_task_totals SET tasks = tasks - 1, bytes = bytes - OLD.bytes WHERE id = 1;
    UPDATE mesh_a2a_task_holders SET tasks = tasks - 1, bytes = bytes - OLD.bytes WHERE holder = OLD.holder;
    DELETE FROM mesh_a2a_task_holders WHERE holder = OLD.holder AND tasks = 0;
    DELETE FROM mesh_a2a_task_events WHERE task_id = OLD.task_id;
  END`,
  `CREATE TRIGGER mesh_a2a_tasks_resized AFTER UPDATE OF holder, bytes ON mesh_a2a_tasks
    WHEN OLD.bytes <> NEW.bytes OR OLD.holder <> NEW.holder BEGIN
    UPDATE mesh_a2a_task_totals SET bytes = bytes - OLD.bytes + NEW.bytes WHERE id = 1;
    UPDATE mesh_a2a_task_holders SET tasks = tasks - 1, bytes = bytes - OLD.bytes WHERE holder = OLD.holder;
    INSERT INTO mesh_a2a_task_holders (holder, tasks, bytes) VALUES (NEW.holder, 1, NEW.bytes)
      ON CONFLICT (holder) DO UPDATE SET tasks = tasks + 1, bytes = bytes + excluded.bytes;
    DELETE FROM mesh_a2a_task_holders WHERE holder = OLD.holder AND tasks = 0;
  END`
]

// One function for the three events; the holder's row is decremented before the new one is counted and deleted
// last, so a resize within one holder keeps its row.
const POSTGRES_FUNCTION = `CREATE FUNCTION mesh_a2a_task_totals_sync() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      UPDATE mesh_a2a_task_totals SET tasks = tasks + 1, bytes = bytes + NEW.bytes WHERE id = 1;
    ELSIF TG_OP = 'DELETE' THEN
      UPDATE mesh_a2a_task_totals SET tasks = tasks - 1, bytes = bytes - OLD.bytes WHERE id = 1;
      DELETE FROM mesh_a2a_task_events WHERE task_id = OLD.task_id;
    ELSE
      UPDATE mesh_a2a_task_totals SET bytes = bytes - OLD.bytes + NEW.bytes WHERE id = 1;
    END IF;
    IF TG_OP <> 'INSERT' THEN
      UPDATE mesh_a2a_task_holders SET tasks = tasks - 1, bytes = bytes - OLD.bytes WHERE holder = OLD.holder;
    END IF;
    IF TG_OP <> 'DELETE' THEN
      INSERT INTO mesh_a2a_task_holders (holder, tasks, bytes) VALUES (NEW.holder, 1, NEW.bytes)
        ON CONFLICT (holder) DO UPDATE SET tasks = mesh_a2a_task_holders.tasks + 1, bytes = mesh_a2a_task_holders.bytes + excluded.bytes;
    END IF;
    IF TG_OP <> 'INSERT' THEN
      DELETE FROM mesh_a2a_task_holders WHERE holder = OLD.holder AND tasks = 0;
    END IF;
    RETURN NULL;
  END
  $fn$`

export default Effect.flatMap(SqlClient.SqlClient, (sql) => {
  const big = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  const triggers = sql.onDialectOrElse({
    pg: () => [
      sql.unsafe(POSTGRES_FUNCTION),
      sql`CREATE TRIGGER mesh_a2a_tasks_totals AFTER INSERT OR DELETE ON mesh_a2a_tasks FOR EACH ROW EXECUTE FUNCTION mesh_a2a_task_totals_sync()`,
      sql`CREATE TRIGGER mesh_a2a_tasks_totals_au AFTER UPDATE OF holder, bytes ON mesh_a2a_tasks FOR EACH ROW
        WHEN (OLD.bytes <> NEW.bytes OR OLD.holder <> NEW.holder) EXECUTE FUNCTION mesh_a2a_task_totals_sync()`
    ],
    orElse: () => SQLITE_TRIGGERS.map((t) => sql.unsafe(t))
  })
  return Effect.all([
    sql`CREATE TABLE mesh_a2a_task_totals (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      tasks ${big} NOT NULL,
      bytes ${big} NOT NULL
    )`,
    sql`CREATE TABLE mesh_a2a_task_holders (
      holder TEXT PRIMARY KEY,
      tasks ${big} NOT NULL,
      bytes ${big} NOT NULL
    )`,
    sql`INSERT INTO mesh_a2a_task_totals (id, tasks, bytes) SELECT 1, count(*), coalesce(sum(bytes), 0) FROM mesh_a2a_tasks`,
    sql`INSERT INTO mesh_a2a_task_holders (holder, tasks, bytes) SELECT holder, count(*), sum(bytes) FROM mesh_a2a_tasks GROUP BY holder`,
    ...triggers,
    sql`DROP INDEX mesh_a2a_tasks_ended_at`,
    sql`DROP INDEX mesh_a2a_tasks_holder`,
    sql`CREATE INDEX mesh_a2a_tasks_ended ON mesh_a2a_tasks (ended, ended_at, task_id)`,
    sql`CREATE INDEX mesh_a2a_tasks_holder_ended ON mesh_a2a_tasks (holder, ended, ended_at, task_id)`
  ], { discard: true })
})
