/**
 * The database (SQLite or Postgres, chosen by URL) with its migrations, and the SQL layers of the stores.
 * Floor: sql (docs/architecture.md §3).
 */
export * as AgentMemorySql from "./AgentMemorySql.js"
export * as Database from "./Database.js"
export * as IdempotencyStoreSql from "./IdempotencyStoreSql.js"
export * as NonceStoreSql from "./NonceStoreSql.js"
export * as RegistryStore from "./RegistryStore.js"
export * as RunLogSql from "./RunLogSql.js"
export * as SqlFailure from "./SqlFailure.js"
export * as TaskStoreSql from "./TaskStoreSql.js"
