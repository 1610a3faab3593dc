/**
 * The correlation id every response carries: taken from the request's `X-Correlation-Id` when it looks sane,
 * otherwise a fresh UUID from the platform CSPRNG, or from the `Entropy` a fetch handler was built with.
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import { csprng, type EntropyApi } from "../core/Entropy.js"

/** The header, lower case as node:http exposes request headers. */
export const HEADER = "x-correlation-id"

// Caller-supplied ids are echoed into headers and logs: bound their length and alphabet so they cannot smuggle
// header injection or log noise.
const SAFE = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/** The correlation id of the request being served, available to handlers. */
export class CorrelationId extends Context.Tag("agent-mesh/http/CorrelationId")<CorrelationId, string>() {}

/** The request's id if it is acceptable, else a new random UUID from `entropy` (the platform CSPRNG by default). */
export const fromHeader = (value: string | ReadonlyArray<string> | undefined, entropy: EntropyApi = csprng): string =>
  typeof value === "string" && SAFE.test(value) ? value : entropy.uuid()
