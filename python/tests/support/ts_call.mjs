// Calls an agent from TypeScript (dist/): node ts_call.mjs <dist> <request JSON>.
/* global process, console, Buffer */
// request: { hubUrl, target, message, sessionId?, signAs?: { did, privateKey }, stream?: boolean, discover?: boolean }
// Prints one JSON line: { result } or { events } or { error: { code, status } }.
import { pathToFileURL } from "node:url"

const [dist, raw] = process.argv.slice(2)
const req = JSON.parse(raw)
const { createAgentClient } = await import(pathToFileURL(`${dist}/promise/AgentPromise.js`).href)
const client = createAgentClient({ hubUrl: req.hubUrl })
const options = {
  ...(req.sessionId === undefined ? {} : { sessionId: req.sessionId }),
  ...(req.signAs === undefined ? {} : { signAs: req.signAs })
}
try {
  if (req.discover) {
    // The discovery document is checked with TypeScript's verifyMessage under the key the caller expects.
    const { verifyMessage } = await import(pathToFileURL(`${dist}/promise/Promise.js`).href)
    const document = await client.discover(req.target)
    const verified = await verifyMessage(document, Buffer.from(req.publicKeyB64, "base64"), { verificationMethod: `${document.did}#key-1` })
    console.log(JSON.stringify({ document, verified }))
  } else if (req.stream) {
    const events = []
    for await (const event of client.stream(req.target, req.message, options)) events.push(event)
    console.log(JSON.stringify({ events }))
  } else {
    console.log(JSON.stringify({ result: await client.call(req.target, req.message, options) }))
  }
} catch (e) {
  console.log(JSON.stringify({ error: { code: e.code ?? String(e), status: e.status ?? null, message: e.message } }))
}
process.exit(0)
