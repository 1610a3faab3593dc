/**
 * The shared record of streamed runs: each run's owner and SSE frames, written by the replica running it and read by
 * any replica a client reconnects to with `Last-Event-ID` (docs/scaling.md). An agent server on one process keeps
 * its runs in memory only and has no `RunLog`; replicas on one Postgres database share `RunLogSql`.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"

/** The log cannot be read or written (`STORE_UNAVAILABLE`). */
export class RunLogUnavailable extends Data.TaggedError("RunLogUnavailable")<{ readonly code: "STORE_UNAVAILABLE"; readonly message: string }> {}

/** One write to the log, in the order the run made them. */
export type RunLogWrite =
  | { readonly _tag: "Open"; readonly runId: string; readonly principal: string; readonly at: number }
  | { readonly _tag: "Event"; readonly runId: string; readonly seq: number; readonly frame: string }
  | { readonly _tag: "Finish"; readonly runId: string; readonly sent: number; readonly at: number }

/** A run as the log has it: its principal, whether it ended, the events stored (`sent`) and frames from `from` on. */
export interface RunLogRead {
  readonly principal: string
  readonly done: boolean
  /** Events stored so far (numbered from 0). */
  readonly sent: number
  /** The SSE frames from the asked event number on, in order. */
  readonly frames: ReadonlyArray<string>
}

/** The operations of a run log. */
export interface RunLogApi {
  /** Applies writes in order (a batch: one round trip where the store can). */
  readonly write: (writes: ReadonlyArray<RunLogWrite>) => Effect.Effect<void, RunLogUnavailable>
  /** The run and its frames from event `from` on (at most `limit`); undefined when the log has no such run. */
  readonly read: (runId: string, from: number, limit: number) => Effect.Effect<RunLogRead | undefined, RunLogUnavailable>
  /** Forgets runs that finished before `before` (epoch ms); how many. */
  readonly purge: (before: number) => Effect.Effect<number, RunLogUnavailable>
}

/** The `RunLog` service (optional: absent, streamed runs live in this process only). */
export class RunLog extends Context.Tag("agent-mesh/RunLog")<RunLog, RunLogApi>() {}
