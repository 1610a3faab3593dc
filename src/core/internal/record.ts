/**
 * The one "is this a JSON object" predicate: an object that is neither null nor an array. Every hand-written shape
 * check (envelopes, mandate headers and claims, constraints, response bodies) uses this one, so they cannot come to
 * disagree about what counts as an object.
 *
 * Floor: core (docs/architecture.md §3).
 */

/** True for a non-null, non-array object (what JSON calls an object). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
