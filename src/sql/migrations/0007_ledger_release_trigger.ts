import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Releasing an allocation returns its unused part to the pool in the same statement (no transaction to hold). */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`CREATE TRIGGER mesh_allocations_return AFTER UPDATE OF released_at ON mesh_allocations
    WHEN OLD.released_at IS NULL AND NEW.released_at IS NOT NULL
    BEGIN UPDATE mesh_pools SET allocated_micros = allocated_micros - (NEW.amount_micros - NEW.used_micros) WHERE id = NEW.pool_id; END`.pipe(Effect.asVoid)
)
