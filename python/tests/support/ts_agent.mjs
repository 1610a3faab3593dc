// A TypeScript agent server over dist/ for the cross-language tests: node ts_agent.mjs <dist> <options JSON>.
/* global process, console, setTimeout */
// The handler streams "<word> " chunks of "ts says: <message>", one every `delayMs`, and reports the caller's DID.
import { pathToFileURL } from "node:url"

const [dist, raw] = process.argv.slice(2)
const options = JSON.parse(raw)
const { serve } = await import(pathToFileURL(`${dist}/promise/AgentPromise.js`).href)
const delayMs = options.delayMs ?? 0
// With `whole`, the handler returns its reply as one string instead of streaming it.
const whole = options.whole === true
delete options.delayMs
delete options.whole

async function* streamed({ message, sessionId, history, caller }) {
  const words = `ts says: ${message} [caller ${caller.did ?? caller.principal}] [session ${sessionId}] [history ${history.length}]`.split(" ")
  for (const word of words) {
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs))
    yield `${word} `
  }
}

const handler = whole ? ({ message, sessionId }) => `ts says: ${message} [session ${sessionId}]` : streamed
const agent = await serve({ ...options, handler, database: ":memory:" })
console.log(`READY ${agent.url}`)
const stop = async () => {
  await agent.close()
  process.exit(0)
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
