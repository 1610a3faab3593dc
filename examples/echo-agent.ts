/**
 * The smallest agent: an async handler wrapped into an HTTP agent server.
 *
 *   npx tsx examples/echo-agent.ts            start it, call it once, stop
 *   npx mesh agent examples/echo-agent.ts     serve it until Ctrl-C (needs tsx for a .ts module)
 */
import { pathToFileURL } from "node:url"
import { serve } from "../src/promise/AgentPromise.js"
import type { AgentServerOptions } from "../src/agent/AgentServer.js"

/** The agent: what `mesh agent` loads. */
const echo: AgentServerOptions = {
  name: "echo",
  handler: async ({ message, sessionId }) => `echo: ${message} (session ${sessionId})`
}
export default echo

/** Starts the agent on a free port, sends it one message and returns the reply. */
export const main = async () => {
  const agent = await serve({ ...echo, database: ":memory:" })
  try {
    const res = await fetch(`${agent.url}/v1/run`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: "hello", sessionId: "demo" })
    })
    const reply = (await res.json()) as { message: string; sessionId: string }
    console.log(`${agent.did} answered: ${reply.message}`)
    return reply
  } finally {
    await agent.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
