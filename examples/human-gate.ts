/**
 * A task paused at a human gate. A user grants an assistant a task mandate in which `send_email` needs a human's
 * approval; the assistant's handler asks the guard before each capability, the run pauses with
 * `approval_required`, the user signs an approval of that task and capability, and `/v1/resume` finishes it.
 *
 *   npx tsx examples/human-gate.ts
 *   npx mesh agent examples/human-gate.ts --identity assistant.identity.json --auth mesh-sig --hub …   the assistant alone;
 *     `mesh call` prints the pause and the `mesh approve` command that resumes it
 */
import { pathToFileURL } from "node:url"
import type { AgentServerOptions } from "../src/agent/AgentServer.js"
import { createAgentClient, serve, signApproval } from "../src/promise/AgentPromise.js"
import { issueTaskMandate } from "../src/promise/MandatePromise.js"
import { generateDid } from "../src/promise/Promise.js"

/** The assistant as `mesh agent` serves it: each message is an email to send, gated by the mandate's humanGates. */
const assistant: AgentServerOptions = {
  name: "assistant",
  handler: async ({ message, guard }) => {
    await guard("send_email", { description: `email bob: ${message}` })
    return `sent "${message}" to bob`
  }
}
export default assistant

/** Runs the whole exchange and returns what each step answered. */
export const main = async () => {
  const user = await generateDid("user", undefined, "example")
  const assistant = await generateDid("assistant", undefined, "example")
  const outbox: Array<string> = []
  const agent = await serve({
    name: "assistant",
    did: assistant.did,
    privateKey: assistant.privateKey,
    database: ":memory:",
    // Grantors' keys; in a mesh this is the hub (hubUrl).
    resolveCallerKey: (did) => (did === user.did ? user.publicKey : null),
    handler: async ({ message, guard }) => {
      await guard("read_calendar", { reversible: true })
      await guard("send_email", { description: `email bob: ${message}` })
      outbox.push(message)
      return `sent "${message}" to bob`
    }
  })
  try {
    const mandate = await issueTaskMandate({
      grantorDid: user.did,
      granteeDid: assistant.did,
      privateKey: user.privateKey,
      constraints: { allowed: ["read_calendar", "send_email"], humanGates: ["send_email"], maxDelegationDepth: 0 }
    })
    const client = createAgentClient()
    const first = await client.call(agent.url, "lunch at noon?", { mandate: mandate.token })
    if (!("approvalRequired" in first)) throw new Error("expected the run to pause at the gate")
    const asked = first.approvalRequired
    console.log(`paused: task ${asked.taskId} asks ${asked.grantor} to approve ${asked.capability} (${asked.asked.description})`)
    console.log(`outbox before approval: ${outbox.length} emails`)

    const approval = await signApproval({ taskId: asked.taskId, capability: asked.capability }, user.did, user.privateKey)
    const done = await client.resume(agent.url, asked.taskId, approval)
    console.log(`resumed: ${"message" in done ? done.message : "paused again"}`)

    const again = await client.resume(agent.url, asked.taskId, approval).catch((e: { code: string }) => e.code)
    console.log(`the same approval again: ${String(again)}`)
    return { asked, done, again, outbox }
  } finally {
    await agent.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
