/**
 * Persistent conversation memory on SQL: turns survive a restart of the agent server.
 *
 * Floor: sql (docs/architecture.md §3).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AgentMemory, type AgentMemoryApi, DEFAULT_MAX_TURNS, MemoryUnavailable } from "../core/AgentMemory.js"
import type { ChatMessage } from "../core/ModelProvider.js"
import { summarize } from "./SqlFailure.js"

/** Persistent memory on the migrated `SqlClient`; `load` returns the latest `maxTurns` turns. */
export const make = (options: { readonly maxTurns?: number } = {}): Effect.Effect<AgentMemoryApi, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (sql) => {
    const maxTurns = options.maxTurns ?? DEFAULT_MAX_TURNS
    const unavailable = (e: unknown) => new MemoryUnavailable({ code: "STORE_UNAVAILABLE", message: summarize(e) })
    return {
      mode: "persistent",
      load: (agent, owner, sessionId) =>
        sql<ChatMessage>`SELECT role, content FROM mesh_agent_messages WHERE agent = ${agent} AND owner = ${owner} AND session_id = ${sessionId}
          ORDER BY seq DESC LIMIT ${maxTurns}`.pipe(
          Effect.map((rows) => rows.map((r) => ({ role: r.role, content: r.content })).reverse()),
          Effect.mapError(unavailable)
        ),
      append: (agent, owner, sessionId, turns) =>
        Effect.forEach(
          turns,
          (t) =>
            sql`INSERT INTO mesh_agent_messages (agent, owner, session_id, seq, role, content)
              SELECT ${agent}, ${owner}, ${sessionId}, COALESCE(MAX(seq), 0) + 1, ${t.role}, ${t.content}
              FROM mesh_agent_messages WHERE agent = ${agent} AND owner = ${owner} AND session_id = ${sessionId}`,
          { discard: true }
        ).pipe(sql.withTransaction, Effect.mapError(unavailable))
    }
  })

/** Persistent memory; provide a migrated `SqlClient` (e.g. `Database.layerSqlite`). */
export const layer = (options: { readonly maxTurns?: number } = {}): Layer.Layer<AgentMemory, never, SqlClient.SqlClient> =>
  Layer.effect(AgentMemory, make(options))
