/**
 * Event-loop lag as the serving path sheds on it (docs/protocol.md, "HTTP serving rules"): how late, right now, a
 * timer that should tick every `intervalMs` is. Handlers that finish synchronously never pile up "in flight", so an
 * overloaded server is seen only in its loop: one turn handling a thousand queued requests makes every request and
 * every new connection wait for the whole turn.
 *
 * The figure is read live (`now − last tick − interval`), not from the last tick alone: it grows during a long turn,
 * so the requests late in that turn are shed and the turn ends, and it falls to zero at the next tick once the load
 * is gone. It is capped by a moving average of the recent ticks' lateness, so one late tick (a GC pause, the process
 * descheduled for a moment, one burst of work) sheds nothing: only lag that lasts over several ticks does. This measures the process, not the program's notion of time, so it reads the monotonic clock directly
 * rather than Effect's `Clock` (a `TestClock` would make every loop look idle); tests inject their own lag source.
 *
 * Floor: http (docs/architecture.md §3).
 */

/** How often the sampler ticks; the lag it reports is exact to about this much. */
const SAMPLE_INTERVAL_MS = 20

/** A running lag sampler. */
export interface Sampler {
  /** Milliseconds the loop is late right now (0 when on time). */
  readonly lag: () => number
  readonly stop: () => void
}

/** Starts a sampler on an unreferenced timer (it never keeps the process alive). */
export const start = (intervalMs: number = SAMPLE_INTERVAL_MS): Sampler => {
  let last = performance.now()
  let average = 0
  const timer = setInterval(() => {
    const now = performance.now()
    // Halves the weight of older ticks each tick: two late ticks in a row already count.
    average = (average + Math.max(0, now - last - intervalMs)) / 2
    last = now
  }, intervalMs)
  timer.unref()
  return {
    lag: () => Math.min(average, Math.max(0, performance.now() - last - intervalMs)),
    stop: () => clearInterval(timer)
  }
}
