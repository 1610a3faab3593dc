import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A sender's nonce quota read by key, not counted per record: `mesh_nonce_senders` holds how many rows each sender
 * has in `mesh_nonces` (live or expired, not yet purged), kept by triggers on every insert and delete, so recording a
 * nonce reads one row however many its sender holds (counting the sender's live rows cost a step per row: a
 * millisecond at the default quota). The index on (sender, expires_at) lets a sender refused at its count drop its
 * own expired rows and find its next expiry without visiting the live ones, and the purge reach the expired rows of
 * every sender (through the senders' counts), so the index on expires_at alone goes.
 *
 * On SQLite `mesh_nonces` becomes a WITHOUT ROWID table, its rows kept in primary-key order: with the counts and the
 * one index, a record writes three b-tree pages to the WAL instead of five (a rowid table and its primary-key index,
 * two indexes, the counts).
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql.onDialectOrElse({
      pg: () => sql`DROP INDEX mesh_nonces_expires_at`,
      orElse: () =>
        Effect.all([
          sql`CREATE TABLE mesh_nonces_keyed (
            sender TEXT NOT NULL,
            nonce TEXT NOT NULL,
            expires_at INTEGER NOT NULL,
            PRIMARY KEY (sender, nonce)
          ) WITHOUT ROWID`,
          sql`INSERT INTO mesh_nonces_keyed (sender, nonce, expires_at) SELECT sender, nonce, expires_at FROM mesh_nonces`,
          sql`DROP TABLE mesh_nonces`,
          sql`ALTER TABLE mesh_nonces_keyed RENAME TO mesh_nonces`
        ], { discard: true })
    }),
    sql`CREATE INDEX mesh_nonces_sender_expires ON mesh_nonces (sender, expires_at)`,
    sql.onDialectOrElse({
      pg: () => sql`CREATE TABLE mesh_nonce_senders (sender TEXT PRIMARY KEY, held BIGINT NOT NULL)`,
      orElse: () => sql`CREATE TABLE mesh_nonce_senders (sender TEXT PRIMARY KEY, held INTEGER NOT NULL) WITHOUT ROWID`
    }),
    sql`INSERT INTO mesh_nonce_senders (sender, held) SELECT sender, COUNT(*) FROM mesh_nonces GROUP BY sender`,
    sql.onDialectOrElse({
      pg: () =>
        Effect.all([
          sql.unsafe(`CREATE FUNCTION mesh_nonces_held() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF TG_OP = 'INSERT' THEN
                INSERT INTO mesh_nonce_senders (sender, held) VALUES (NEW.sender, 1)
                ON CONFLICT (sender) DO UPDATE SET held = mesh_nonce_senders.held + 1;
              ELSE
                UPDATE mesh_nonce_senders SET held = held - 1 WHERE sender = OLD.sender;
              END IF;
              RETURN NULL;
            END $$`),
          sql`CREATE TRIGGER mesh_nonces_held AFTER INSERT OR DELETE ON mesh_nonces FOR EACH ROW EXECUTE FUNCTION mesh_nonces_held()`
        ], { discard: true }),
      orElse: () =>
        Effect.all([
          sql`CREATE TRIGGER mesh_nonces_held_insert AFTER INSERT ON mesh_nonces BEGIN
            INSERT INTO mesh_nonce_senders (sender, held) VALUES (NEW.sender, 1) ON CONFLICT (sender) DO UPDATE SET held = held + 1;
          END`,
          sql`CREATE TRIGGER mesh_nonces_held_delete AFTER DELETE ON mesh_nonces BEGIN
            UPDATE mesh_nonce_senders SET held = held - 1 WHERE sender = OLD.sender;
          END`
        ], { discard: true })
    })
  ], { discard: true })
)
