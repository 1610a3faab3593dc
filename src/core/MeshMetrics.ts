/**
 * The process-wide metrics of agent-mesh, in Effect's metric registry, which `/metrics` renders beside each
 * server's request counters (docs/operations.md, "Metrics"): ledger allocations, replays refused, agent runs in
 * flight. Each is updated only where its event happens, never per request.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Metric from "effect/Metric"
import type * as MetricLabel from "effect/MetricLabel"

const allocations = Metric.counter("mesh_ledger_allocations_total", {
  description: "Ledger allocation requests by outcome: allocated (a child mandate's share reserved), replayed (an idempotent repeat), refused."
})

/** Allocations the ledger made. */
export const allocationsMade = Metric.tagged(allocations, "outcome", "allocated")
/** Allocation requests the ledger answered from an earlier allocation with the same idempotency key. */
export const allocationsReplayed = Metric.tagged(allocations, "outcome", "replayed")
/** Allocation requests the ledger refused (budget exhausted, not the grantee, mandate refused, …). */
export const allocationsRefused = Metric.tagged(allocations, "outcome", "refused")

const replays = Metric.counter("mesh_replays_refused_total", {
  description: "Signed requests and envelopes refused because their nonce was used before, by kind."
})

/** mesh-sig requests refused REPLAYED. */
export const replaysRefusedHttp = Metric.tagged(replays, "kind", "http")
/** Envelopes refused REPLAYED. */
export const replaysRefusedEnvelope = Metric.tagged(replays, "kind", "envelope")

/** Agent runs (a handler or the chat agent working on a request), whatever the response is waiting for. */
export const runsInFlight = Metric.gauge("mesh_agent_runs_in_flight", { description: "Agent runs whose handler is working now." })

const NO_TAGS: ReadonlyArray<MetricLabel.MetricLabel> = []

// Updated in place from code that already runs at a run's start and end: as Effects, the two updates and the
// finalizer they need would cost about a microsecond per run.
/** Counts a run in `runsInFlight`; call `runEnded` once for each. */
export const runStarted = (): void => runsInFlight.unsafeModify(1, NO_TAGS)
/** Counts a run out of `runsInFlight`. */
export const runEnded = (): void => runsInFlight.unsafeModify(-1, NO_TAGS)
