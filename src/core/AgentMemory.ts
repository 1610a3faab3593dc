/**
 * What an agent server remembers of a conversation: nothing (the caller sends the history), the session's turns in
 * memory (bounded), or every turn in SQL (survives a restart, `AgentMemorySql`). Keyed by (agent DID, caller, session
 * id): several agents can share one database, and a caller naming another caller's session id gets a session of its
 * own, not the other's turns.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { ChatMessage } from "./ModelProvider.js"

/** The memory modes of an agent server. */
export type MemoryMode = "none" | "session" | "persistent"

/** The store behind persistent memory failed. */
export class MemoryUnavailable extends Schema.TaggedError<MemoryUnavailable>()("MemoryUnavailable", {
  code: Schema.Literal("STORE_UNAVAILABLE"),
  message: Schema.String
}) {}

/** The operations of a conversation memory. */
export interface AgentMemoryApi {
  readonly mode: MemoryMode
  /** The session's latest turns, oldest first (at most the store's bound); `owner` is the caller's principal. */
  readonly load: (agent: string, owner: string, sessionId: string) => Effect.Effect<ReadonlyArray<ChatMessage>, MemoryUnavailable>
  /** Appends turns to the session. */
  readonly append: (agent: string, owner: string, sessionId: string, turns: ReadonlyArray<ChatMessage>) => Effect.Effect<void, MemoryUnavailable>
}

/** The `AgentMemory` service. */
export class AgentMemory extends Context.Tag("agent-mesh/AgentMemory")<AgentMemory, AgentMemoryApi>() {}

/** Turns kept per session unless told otherwise. */
export const DEFAULT_MAX_TURNS = 100
/** Sessions kept in memory unless told otherwise; the least recently used is forgotten first. */
export const DEFAULT_MAX_SESSIONS = 1000

/** No memory: every run sees only the history its caller sent. */
export const none: AgentMemoryApi = { mode: "none", load: () => Effect.succeed([]), append: () => Effect.void }

/** Per-session turns in memory, bounded in sessions (least recently used forgotten) and in turns per session. */
export const makeSession = (options: { readonly maxSessions?: number; readonly maxTurns?: number } = {}): AgentMemoryApi => {
  const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS
  const maxTurns = options.maxTurns ?? DEFAULT_MAX_TURNS
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  const sessions = new Map<string, Array<ChatMessage>>()
  const keyOf = (agent: string, owner: string, sessionId: string) => `${agent}\u0000${owner}\u0000${sessionId}`
  return {
    mode: "session",
    load: (agent, owner, sessionId) =>
      Effect.sync(() => {
        const key = keyOf(agent, owner, sessionId)
        const turns = sessions.get(key)
        if (turns === undefined) return []
        sessions.delete(key)
        sessions.set(key, turns)
        return turns.slice()
      }),
    append: (agent, owner, sessionId, added) =>
      Effect.sync(() => {
        const key = keyOf(agent, owner, sessionId)
        const turns = sessions.get(key) ?? []
        sessions.delete(key)
        turns.push(...added)
        if (turns.length > maxTurns) turns.splice(0, turns.length - maxTurns)
        sessions.set(key, turns)
        if (sessions.size > maxSessions) sessions.delete(sessions.keys().next().value as string)
      })
  }
}

/** No memory. */
export const layerNone: Layer.Layer<AgentMemory> = Layer.succeed(AgentMemory, none)

/** Session memory (also the test layer). */
export const layerSession = (options: { readonly maxSessions?: number; readonly maxTurns?: number } = {}): Layer.Layer<AgentMemory> =>
  Layer.sync(AgentMemory, () => makeSession(options))
