/**
 * Streamed runs and their retention: each run's SSE frames are kept so a client that reconnects with
 * `Last-Event-ID` misses nothing, and the memory that costs is bounded three ways — per run (its latest 4 MiB, or the
 * total if smaller), across runs (`maxRetainedEventBytes`: finished runs are let go first, oldest first, then a live
 * run's oldest events), and in count (`maxLiveRuns` in progress, 1000 kept). A bound that cannot be met refuses the
 * new run with 503 AGENT_BUSY rather than dropping events a live run's followers still need. The counts live in this
 * one service so every path that adds or drops a frame keeps them in step.
 *
 * Replicas on one database share a `RunLog`: every frame is also written there (in order, batched, off the request
 * path), and a reconnect naming a run this process does not hold is answered from the log, following it until the
 * run ends there. A follower of the log stops after `runRetentionMs` without a new event (the replica running it
 * died).
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { AgentBadRequest, AgentForbidden, AgentNotFound, AgentUnavailable } from "./AgentError.js"
import { RunLog, type RunLogApi, type RunLogWrite } from "../core/RunLog.js"
import * as Sse from "../core/Sse.js"
import { Entropy } from "../core/Entropy.js"

/** The event types of a streamed run. */
export type RunEventType = "chunk" | "approval_required" | "done" | "error"

/** The last event of a streamed run. */
export interface RunEnd {
  readonly type: Exclude<RunEventType, "chunk">
  readonly data: unknown
}

/** Default bytes of SSE frames all streamed runs together keep for reconnects. */
export const DEFAULT_MAX_RETAINED_EVENT_BYTES = 64 * 1024 * 1024
const DEFAULT_RETENTION_MS = 5 * 60_000
const MAX_RETAINED_RUNS = 1000
const DEFAULT_MAX_LIVE_RUNS = 256
/** How often finished streamed runs past their retention are let go (or every `runRetentionMs`, if shorter). */
const PRUNE_INTERVAL_MS = 60_000
/** Bytes of SSE frames one streamed run keeps for reconnects; older events are let go. */
const MAX_RUN_RETAINED_BYTES = 4 * 1024 * 1024
const utf8Encoder = new TextEncoder()

/** The retention settings (the fields of the same name in `AgentServerOptions`). */
export interface Options {
  readonly runRetentionMs?: number
  readonly maxLiveRuns?: number
  readonly maxRetainedEventBytes?: number
}

/** Streamed runs: start one, reconnect to one, count them. */
export interface RunStreamsApi {
  /**
   * Starts `work` in the background as a run of `principal` and answers with its event stream. `work` gets a
   * function that sends a chunk; what it returns is the last event, and `stopped` makes the last event if it is
   * interrupted (the server stops). The run outlives the request that started it.
   */
  readonly start: (
    principal: string,
    work: (chunk: (text: string) => void) => Effect.Effect<RunEnd>,
    stopped: () => RunEnd
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, AgentUnavailable>
  /** The run named by a `Last-Event-ID`, from the event after it; only its principal may follow it. */
  readonly reconnect: (
    lastEventId: string,
    principal: string
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, AgentBadRequest | AgentNotFound | AgentForbidden | AgentUnavailable>
  /** Streamed runs kept for reconnects, and the bytes of their events. */
  readonly stats: () => { readonly streamedRuns: number; readonly retainedEventBytes: number }
  /** Interrupts every run in progress; each sends `stopped` to its followers. */
  readonly stopAll: Effect.Effect<void>
  /** Completes once no streamed run is in progress (a graceful shutdown waits for it). */
  readonly awaitIdle: Effect.Effect<void>
}

/** The streamed runs of one agent server. */
export class RunStreams extends Context.Tag("agent-mesh/agent/RunStreams")<RunStreams, RunStreamsApi>() {}

/** A streamed run, kept so a client that reconnects with `Last-Event-ID` misses nothing. */
interface StreamedRun {
  readonly id: string
  readonly principal: string
  /** The SSE frames still kept (UTF-8), from event number `first` on. */
  readonly events: Array<Uint8Array>
  first: number
  /** The events sent so far (kept or not). */
  sent: number
  /** Bytes held in `events`. */
  bytes: number
  readonly listeners: Set<() => void>
  done: boolean
  finishedAt: number
}

const sseText = (id: string, type: RunEventType, data: unknown): string => Sse.encodeEvent({ id, event: type, data: JSON.stringify(data) })

const busy = (message: string) => new AgentUnavailable({ code: "AGENT_BUSY", message, retryAfterSeconds: 1 })

/** The SSE bytes of a run from event `from` on, following it live until it ends. */
const follow = (run: StreamedRun, from: number): Stream.Stream<Uint8Array> =>
  Stream.async<Uint8Array>((emit) => {
    let next = from
    const pump = (): boolean => {
      // A follower that fell behind what is kept ends here; reconnecting tells it those events are gone.
      if (next < run.first) {
        void emit.end()
        return true
      }
      while (next < run.sent) void emit.single(run.events[next++ - run.first]!)
      if (run.done) void emit.end()
      return run.done
    }
    if (pump()) return
    const listener = () => {
      if (pump()) run.listeners.delete(listener)
    }
    run.listeners.add(listener)
    return Effect.sync(() => void run.listeners.delete(listener))
  })

const sseResponse = (run: StreamedRun, from: number) =>
  HttpServerResponse.stream(follow(run, from), { contentType: Sse.CONTENT_TYPE, headers: Sse.RESPONSE_HEADERS })

/** The run and event numbers of an event id this server wrote (`<run uuid>:<n>`). */
const eventId = (id: string): { readonly run: string; readonly event: number } | undefined => {
  const m = /^([0-9a-f-]{36}):(\d{1,9})$/.exec(id)
  return m === null ? undefined : { run: m[1]!, event: Number(m[2]) }
}

/** Frames read from the log per query while following it. */
const LOG_PAGE = 256
/** How often a follower of the log looks for new events. */
const LOG_POLL_MS = 200

/** The SSE bytes of a run in the log from event `from` on, polling until the run ends there (or goes quiet). */
const followLog = (log: RunLogApi, runId: string, from: number, quietMs: number): Stream.Stream<Uint8Array> =>
  Stream.unfoldChunkEffect({ next: from, quiet: 0, end: false }, (s) =>
    s.end
      ? Effect.succeed(Option.none())
      : log.read(runId, s.next, LOG_PAGE).pipe(
        Effect.flatMap((r) => {
          if (r === undefined) return Effect.succeed(Option.none())
          const next = s.next + r.frames.length
          const end = r.done && next >= r.sent
          if (r.frames.length > 0 || end) {
            return Effect.succeed(Option.some([Chunk.fromIterable(r.frames.map((f) => utf8Encoder.encode(f))), { next, quiet: 0, end }] as const))
          }
          if (s.quiet >= quietMs) return Effect.succeed(Option.none())
          return Effect.as(Effect.sleep(Duration.millis(LOG_POLL_MS)), Option.some([Chunk.empty<Uint8Array>(), { ...s, quiet: s.quiet + LOG_POLL_MS }] as const))
        }),
        // A log that stops answering ends the stream; the client reconnects and is told then.
        Effect.catchAll(() => Effect.succeed(Option.none()))
      ))

/** The run named by `lastEventId`, answered from the shared log because this process does not hold it. */
const reconnectToLog = (log: RunLogApi, runId: string, event: number, principal: string, quietMs: number): ReturnType<RunStreamsApi["reconnect"]> =>
  Effect.gen(function* () {
    // A run that has just started on another replica may not be in the log yet: asked again briefly before refusing.
    const found = yield* log.read(runId, 0, 0).pipe(
      Effect.filterOrFail((r) => r !== undefined, () => "absent" as const),
      Effect.retry({ while: (e) => e === "absent", schedule: Schedule.spaced(Duration.millis(LOG_POLL_MS)), times: 5 }),
      Effect.catchAll((e) =>
        e === "absent" ? Effect.succeed(undefined) : Effect.fail(new AgentUnavailable({ code: "STORE_UNAVAILABLE", message: e.message, retryAfterSeconds: 1 }))
      )
    )
    if (found === undefined) return yield* Effect.fail(new AgentNotFound({ code: "RUN_NOT_FOUND", message: "that run is unknown or no longer kept" }))
    if (found.principal !== principal) {
      return yield* Effect.fail(new AgentForbidden({ code: "NOT_RUN_OWNER", message: "that run was started by another caller" }))
    }
    // Events still on their way to the log from the replica running the run are waited for, not refused.
    if (found.done && event + 1 > found.sent) {
      return yield* Effect.fail(new AgentBadRequest({ code: "INVALID_REQUEST", message: "Last-Event-ID names an event this run has not sent" }))
    }
    return HttpServerResponse.stream(followLog(log, runId, event + 1, quietMs), { contentType: Sse.CONTENT_TYPE, headers: Sse.RESPONSE_HEADERS })
  })

/** The run named by `lastEventId` among `runs` (else in the shared log, if any), answered from the event after it. */
const reconnectTo = (
  runs: ReadonlyMap<string, StreamedRun>,
  lastEventId: string,
  principal: string,
  log: { readonly api: RunLogApi; readonly quietMs: number } | undefined
): ReturnType<RunStreamsApi["reconnect"]> =>
  Effect.gen(function* () {
    const bad = (message: string) => Effect.fail(new AgentBadRequest({ code: "INVALID_REQUEST", message }))
    const gone = (message: string) => Effect.fail(new AgentNotFound({ code: "RUN_NOT_FOUND", message }))
    const named = eventId(lastEventId)
    if (named === undefined) return yield* bad("Last-Event-ID is not an event id of this server")
    const run = runs.get(named.run)
    if (run === undefined && log !== undefined) return yield* reconnectToLog(log.api, named.run, named.event, principal, log.quietMs)
    if (run === undefined) return yield* gone("that run is unknown or no longer kept")
    if (run.principal !== principal) {
      return yield* Effect.fail(new AgentForbidden({ code: "NOT_RUN_OWNER", message: "that run was started by another caller" }))
    }
    const from = named.event + 1
    if (from > run.sent) return yield* bad("Last-Event-ID names an event this run has not sent")
    if (from < run.first) return yield* gone(`events before ${run.first} of that run are no longer kept`)
    return sseResponse(run, from)
  })

/** The kept runs and their byte count: every change to either goes through here. */
const retention = (maxRetained: number, record: (w: RunLogWrite) => void) => {
  const runs = new Map<string, StreamedRun>()
  const maxPerRun = Math.min(MAX_RUN_RETAINED_BYTES, maxRetained)
  /** Bytes held in the events of every kept run. */
  let retained = 0

  /** Lets a run's events go; a follower still reading it ends, and a reconnect finds it gone. */
  const drop = (run: StreamedRun) => {
    runs.delete(run.id)
    retained -= run.bytes
    run.bytes = 0
    run.events.length = 0
    run.first = run.sent
    for (const l of run.listeners) l()
  }

  /** Lets finished runs go, those that finished first first, until at most `limit` bytes are kept. */
  const evictFinished = (limit: number) => {
    if (retained <= limit) return
    const finished = [...runs.values()].filter((r) => r.done).sort((a, b) => a.finishedAt - b.finishedAt)
    for (const run of finished) {
      if (retained <= limit) return
      drop(run)
    }
  }

  const shift = (run: StreamedRun) => {
    const n = run.events.shift()!.length
    run.bytes -= n
    retained -= n
    run.first++
  }

  const push = (run: StreamedRun, type: RunEventType, data: unknown) => {
    const seq = run.sent++
    const text = sseText(`${run.id}:${seq}`, type, data)
    record({ _tag: "Event", runId: run.id, seq, frame: text })
    const frame = utf8Encoder.encode(text)
    run.events.push(frame)
    run.bytes += frame.length
    retained += frame.length
    // A long run keeps only its latest events for reconnects: memory stays bounded per run and across runs.
    while (run.bytes > maxPerRun && run.events.length > 1) shift(run)
    evictFinished(maxRetained)
    while (retained > maxRetained && run.events.length > 1) shift(run)
    for (const l of run.listeners) l()
  }

  const finish = (run: StreamedRun, end: RunEnd, now: number) => {
    push(run, end.type, end.data)
    record({ _tag: "Finish", runId: run.id, sent: run.sent, at: now })
    run.done = true
    run.finishedAt = now
    for (const l of run.listeners) l()
  }

  return { runs, drop, evictFinished, push, finish, retained: () => retained }
}

/** The streamed runs with these settings; finished runs are let go on a schedule while the layer lives. */
export const make = (options: Options): Effect.Effect<RunStreamsApi, never, Scope.Scope> =>
  Effect.gen(function* () {
    const retentionMs = options.runRetentionMs ?? DEFAULT_RETENTION_MS
    const maxLiveRuns = options.maxLiveRuns ?? DEFAULT_MAX_LIVE_RUNS
    const maxRetained = options.maxRetainedEventBytes ?? DEFAULT_MAX_RETAINED_EVENT_BYTES
    const entropy = yield* Entropy
    const log = Option.getOrUndefined(yield* Effect.serviceOption(RunLog))
    // Writes to the shared log leave the request path: queued in order, written in batches by one fiber.
    const writes = yield* Queue.unbounded<RunLogWrite>()
    if (log !== undefined) {
      yield* Queue.takeBetween(writes, 1, 512).pipe(
        Effect.flatMap((batch) => log.write(Chunk.toReadonlyArray(batch)).pipe(Effect.retry(Schedule.exponential(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(5)))))),
        Effect.catchAll((e) => Effect.logWarning(`streamed-run log write failed: ${e.message}`)),
        Effect.forever,
        Effect.forkScoped
      )
    }
    const record = log === undefined ? () => {} : (w: RunLogWrite) => void Queue.unsafeOffer(writes, w)
    const kept = retention(maxRetained, record)
    const { runs } = kept
    const live = yield* FiberSet.make<void>()

    const prune = (now: number) => {
      for (const run of runs.values()) {
        if (run.done && (now - run.finishedAt > retentionMs || runs.size > MAX_RETAINED_RUNS)) kept.drop(run)
      }
    }

    // Finished runs are let go on a schedule too, not only when a new run starts: an idle server frees them as well.
    yield* Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) =>
        Effect.zipRight(
          Effect.sync(() => prune(now)),
          log === undefined ? Effect.void : Effect.catchAll(log.purge(now - retentionMs), (e) => Effect.logWarning(`streamed-run log purge failed: ${e.message}`))
        )),
      Effect.repeat(Schedule.spaced(Duration.millis(Math.min(retentionMs, PRUNE_INTERVAL_MS)))),
      Effect.forkScoped
    )

    /** Room for one more run, or why there is none. */
    const admit = Effect.gen(function* () {
      prune(yield* Clock.currentTimeMillis)
      let inProgress = 0
      for (const r of runs.values()) if (!r.done) inProgress++
      if (inProgress >= maxLiveRuns) return yield* Effect.fail(busy(`${inProgress} streamed runs are in progress; retry shortly`))
      // Finished runs give way; live runs alone at the cap make the server busy.
      kept.evictFinished(maxRetained - 1)
      if (kept.retained() >= maxRetained) {
        return yield* Effect.fail(busy(`streamed runs in progress hold ${kept.retained()} bytes of events; retry shortly`))
      }
    })

    const start: RunStreamsApi["start"] = (principal, work, stopped) =>
      Effect.gen(function* () {
        yield* admit
        const run: StreamedRun = {
          id: entropy.uuid(),
          principal,
          events: [],
          first: 0,
          sent: 0,
          bytes: 0,
          listeners: new Set(),
          done: false,
          finishedAt: 0
        }
        runs.set(run.id, run)
        record({ _tag: "Open", runId: run.id, principal, at: yield* Clock.currentTimeMillis })
        const finish = (end: RunEnd) => Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => kept.finish(run, end, t)))
        yield* work((text) => kept.push(run, "chunk", { text })).pipe(
          Effect.flatMap(finish),
          Effect.onInterrupt(() => finish(stopped())),
          FiberSet.run(live)
        )
        return sseResponse(run, 0)
      })

    const shared = log === undefined ? undefined : { api: log, quietMs: retentionMs }
    const reconnect: RunStreamsApi["reconnect"] = (lastEventId, principal) => reconnectTo(runs, lastEventId, principal, shared)

    const stats = () => ({ streamedRuns: runs.size, retainedEventBytes: kept.retained() })
    return { start, reconnect, stats, stopAll: FiberSet.clear(live), awaitIdle: FiberSet.awaitEmpty(live) }
  })

/** `RunStreams` with these settings. */
export const layer = (options: Options): Layer.Layer<RunStreams> => Layer.scoped(RunStreams, make(options))
