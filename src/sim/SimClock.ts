/**
 * The clock of a simulation: Effect's `Clock` with a time that moves only when the driver says so. A sleep is a
 * wake-up registered at `now + duration`; `advance` moves the time to the earliest wake-up and wakes every sleeper
 * due then, in the order they went to sleep. Nothing here waits on real time, so how fast the machine is cannot
 * change which fiber wakes when (unlike `TestClock.adjust`, which lets woken fibers run on a real timer).
 *
 * Floor: sim (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/** A simulated clock: a `Clock` for the fibers and a lever for the driver. */
export interface SimClock extends Clock.Clock {
  /** Wake-ups waiting (sleeps of an infinite duration not counted: no move of the clock ends them). */
  readonly sleepers: () => number
  /** The earliest wake-up, if any. */
  readonly nextWakeUp: () => number | undefined
  /** Moves the time to the earliest wake-up and wakes every sleeper due then; false when nothing waits on the clock. */
  readonly advance: () => boolean
}

interface Sleeper {
  readonly at: number
  readonly seq: number
  readonly wake: () => void
}

/** A clock at `start` (ms since the epoch; default 0) with no sleepers. */
export const make = (start = 0): SimClock => {
  let now = start
  let seq = 0
  // Sorted by (at, seq): the earliest first, and among equals the first to sleep.
  const sleeping: Array<Sleeper> = []

  const insert = (s: Sleeper) => {
    let lo = 0
    let hi = sleeping.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      const m = sleeping[mid]!
      if (m.at < s.at || (m.at === s.at && m.seq < s.seq)) lo = mid + 1
      else hi = mid
    }
    sleeping.splice(lo, 0, s)
  }

  const sleep = (duration: Duration.Duration): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      const millis = Duration.toMillis(duration)
      if (!(millis > 0)) return resume(Effect.void)
      // An infinite sleep never ends; it is no wake-up to move the clock to.
      if (!Number.isFinite(millis)) return
      const s: Sleeper = { at: now + millis, seq: seq++, wake: () => resume(Effect.void) }
      insert(s)
      return Effect.sync(() => {
        const i = sleeping.indexOf(s)
        if (i !== -1) sleeping.splice(i, 1)
      })
    })

  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => now,
    currentTimeMillis: Effect.sync(() => now),
    unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep,
    sleepers: () => sleeping.length,
    nextWakeUp: () => sleeping[0]?.at,
    advance: () => {
      const first = sleeping[0]
      if (first === undefined) return false
      now = Math.max(now, first.at)
      let due = 0
      while (due < sleeping.length && sleeping[due]!.at <= now) due++
      for (const s of sleeping.splice(0, due)) s.wake()
      return true
    }
  }
}
