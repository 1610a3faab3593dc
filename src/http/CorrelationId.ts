/**
 * The correlation id every response carries: taken from the request's `X-Correlation-Id` when it looks sane,
 * otherwise a fresh UUID from the platform CSPRNG.
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as Context from "effect/Context"

/** The header, lower case as node:http exposes request headers. */
export const HEADER = "x-correlation-id"

// Caller-supplied ids are echoed into headers and logs: bound their length and alphabet so they cannot smuggle
// header injection or log noise.
const SAFE = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/** The correlation id of the request being served, available to handlers. */
export class CorrelationId extends Context.Tag("agent-mesh/http/CorrelationId")<CorrelationId, string>() {}

/** The request's id if it is acceptable, else a new random UUID. */
export const fromHeader = (value: string | ReadonlyArray<string> | undefined): string =>
  typeof value === "string" && SAFE.test(value) ? value : globalThis.crypto.randomUUID()
