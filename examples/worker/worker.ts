/**
 * A Cloudflare Worker serving the spelling agent (agent.ts) with mesh-sig. Deploy with wrangler (wrangler.toml
 * beside it; docs/runtimes.md, "Deploying the example Worker"); the test suite runs it under workerd itself
 * (test/runtimes/Workerd.test.ts).
 */
import { type AgentEnv, app } from "./agent.js"

let served: ReturnType<typeof app> | undefined

export default {
  /** Builds the agent on the isolate's first request, from that request's bindings, and serves every request. */
  fetch(request: Request, env: AgentEnv): Promise<Response> {
    served ??= app(env)
    return served.handler(request)
  }
}
