/**
 * The agent the example Worker (and the Vercel Edge function beside it) serves: it spells a message back one word at
 * a time, streamed over SSE when asked, behind mesh-sig. Its settings come from the runtime's environment:
 *
 * - `AGENT_DID`, `AGENT_PRIVATE_KEY` (a secret: `privateKeyPkcs8B64` of a `mesh keygen` identity file, or the base64
 *   of the 32-byte Ed25519 seed): who the agent is;
 * - `PUBLIC_URL`: the URL callers reach it at, which they sign;
 * - `HUB_URL` (the hub resolving caller keys over HTTP), or `CALLER_KEYS` (JSON `{ "<did>": "<publicKeyB64>" }`).
 *
 * Stores are in isolate memory (docs/runtimes.md, "Durable state"): nonces, paused tasks and stored replies live as
 * long as the isolate, so replay protection holds per isolate, not across a Worker's isolates.
 */
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as AgentWeb from "../../src/agent/AgentWeb.js"
import type { Handler } from "../../src/agent/Handler.js"
import { Keys } from "../../src/core/Keys.js"

/** The settings the agent reads from its environment. */
export interface AgentEnv {
  readonly AGENT_DID: string
  readonly AGENT_PRIVATE_KEY: string
  readonly PUBLIC_URL: string
  readonly HUB_URL?: string
  readonly CALLER_KEYS?: string
}

/** The handler: each word upper-cased, one chunk per word. */
export const spelling: Handler = async function* ({ message }) {
  for (const word of message.split(/\s+/)) yield `${word.toUpperCase()} `
}

/** The agent as a fetch handler, over `Keys.noble` (no node:crypto needed) and memory stores. */
export const app = (env: AgentEnv) => {
  const callerKeys: Readonly<Record<string, string>> = env.CALLER_KEYS === undefined ? {} : JSON.parse(env.CALLER_KEYS)
  return AgentWeb.toWebHandler(
    {
      name: "spelling",
      handler: spelling,
      did: env.AGENT_DID,
      privateKey: env.AGENT_PRIVATE_KEY,
      publicUrl: env.PUBLIC_URL,
      auth: "mesh-sig",
      ...(env.HUB_URL === undefined ? { resolveCallerKey: (did: string) => callerKeys[did] ?? null } : { hubUrl: env.HUB_URL })
    },
    // Workers collect console output as structured logs: one JSON object a line.
    { keys: Layer.merge(Keys.noble, Logger.json) }
  )
}
