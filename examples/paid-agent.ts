/**
 * An agent paid per call: each run charges 0.25 USD under the payment (or cart) mandate the caller presents, through
 * the spending guard (`input.charge`: the chain verified, this agent as merchant, the amount counted against every
 * link's limit), and the charge is what its commit token reports. README, "Your first hour", runs it:
 *
 *   mesh agent examples/paid-agent.ts --identity shop.identity.json --api-key … --auth mesh-sig --register
 */
import type { AgentServerOptions } from "../src/agent/AgentServer.js"

/** What one call costs, in USD (Money's decimal string). */
export const PRICE_USD = "0.25"

/** The agent: what `mesh agent` loads. One capability, which the commit token of a paid call records. */
const shop: AgentServerOptions = {
  name: "shop",
  capabilities: ["answer"],
  handler: async ({ message, charge }) => {
    // Charged before the work it pays for: a refused charge (no mandate, limit reached) stops the run here.
    const paid = await charge(PRICE_USD)
    return `shop: ${message} (charged ${paid.amountUsd} USD under ${paid.mandateKind} mandate ${paid.mandateJti})`
  }
}
export default shop
