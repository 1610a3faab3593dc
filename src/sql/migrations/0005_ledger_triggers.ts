import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Allocation as one statement: inserting an allocation takes its amount from the pool, and is refused inside the
 * same statement when the pool cannot cover it. One statement is atomic on its own, so no transaction is needed.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TRIGGER mesh_allocations_cover BEFORE INSERT ON mesh_allocations
      WHEN (SELECT allocated_micros + NEW.amount_micros > limit_micros FROM mesh_pools WHERE id = NEW.pool_id)
      BEGIN SELECT RAISE(ABORT, 'BUDGET_EXHAUSTED'); END`,
    sql`CREATE TRIGGER mesh_allocations_take AFTER INSERT ON mesh_allocations
      BEGIN UPDATE mesh_pools SET allocated_micros = allocated_micros + NEW.amount_micros WHERE id = NEW.pool_id; END`
  ], { discard: true })
)
