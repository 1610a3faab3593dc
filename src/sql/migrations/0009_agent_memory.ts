import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Conversation turns of agent servers with persistent memory, per (agent DID, caller, session id), in order. */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`CREATE TABLE mesh_agent_messages (
    agent TEXT NOT NULL,
    owner TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (agent, owner, session_id, seq)
  )`
)
