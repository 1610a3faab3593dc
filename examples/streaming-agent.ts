/**
 * A streaming agent: the handler is an async generator, the reply streams as Server-Sent Events, and the client
 * (`createAgentClient().stream`) reads chunk events until `done`, reconnecting with Last-Event-ID if the
 * connection drops.
 *
 *   npx tsx examples/streaming-agent.ts
 */
import { pathToFileURL } from "node:url"
import { createAgentClient, serve } from "../src/promise/AgentPromise.js"
import type { AgentServerOptions } from "../src/agent/AgentServer.js"

/** The agent: it spells the message back one word at a time. */
const spelling: AgentServerOptions = {
  name: "spelling",
  handler: async function* ({ message }) {
    for (const word of message.split(/\s+/)) yield `${word.toUpperCase()} `
  }
}
export default spelling

/** Starts the agent, streams one reply and returns the chunks and the final message. */
export const main = async () => {
  const agent = await serve({ ...spelling, database: ":memory:" })
  try {
    const chunks: Array<string> = []
    let final = ""
    for await (const event of createAgentClient().stream(agent.url, "signed envelopes everywhere")) {
      if (event.type === "chunk") {
        chunks.push(event.text)
        console.log(`chunk: ${event.text}`)
      } else if (event.type === "done") final = event.message
    }
    console.log(`done: ${final}`)
    return { chunks, final }
  } finally {
    await agent.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
