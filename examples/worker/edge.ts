/**
 * The spelling agent (agent.ts) as a Vercel Edge Function: the same fetch handler, its settings from `process.env`.
 * The test suite runs it in the edge-runtime package's Edge VM (test/runtimes/EdgeRuntime.test.ts).
 */
import { type AgentEnv, app } from "./agent.js"

declare const process: { readonly env: Record<string, string | undefined> }

/** Vercel: run this function on the Edge runtime. */
export const config = { runtime: "edge" }

let served: ReturnType<typeof app> | undefined

/** The Edge Function. */
export default function handler(request: Request): Promise<Response> {
  served ??= app(process.env as unknown as AgentEnv)
  return served.handler(request)
}
