/**
 * A small benchmark harness: each figure is measured in this run beside its baseline and printed as a ratio.
 * Medians of several timed rounds, after a warm-up, so one noisy round does not decide a figure.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** One measured operation: ops/s as the median of rounds. */
export interface Measurement {
  readonly name: string
  readonly opsPerSecond: number
}

/** One line of a report: a figure, its baseline, the ratio and the target ratio (if any). */
export interface Row {
  readonly figure: Measurement
  readonly baseline: Measurement
  readonly target?: number
}

const now = () => performance.now()

/** Ops/s of a synchronous operation: median over `rounds` rounds of about `roundMs` each. */
export const measureSync = (name: string, op: () => unknown, options: { rounds?: number; roundMs?: number } = {}): Measurement => {
  const rounds = options.rounds ?? 7
  const roundMs = options.roundMs ?? 300
  // Warm up and calibrate how many calls fill one round.
  let batch = 1
  for (;;) {
    const t0 = now()
    for (let i = 0; i < batch; i++) op()
    const dt = now() - t0
    if (dt > roundMs / 10) {
      batch = Math.max(1, Math.round((batch * roundMs) / dt))
      break
    }
    batch *= 2
  }
  const rates: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const t0 = now()
    for (let i = 0; i < batch; i++) op()
    rates.push((batch * 1000) / (now() - t0))
  }
  return { name, opsPerSecond: median(rates) }
}

/**
 * Ops/s of several synchronous operations measured in interleaved rounds (a, b, c, a, b, c, …), so a noisy stretch
 * of a shared machine hits every figure alike and the ratios between them hold. Median per operation. With
 * `clock: "cpu"` a round is timed by this process's CPU time instead of the wall clock (ops per CPU-second).
 */
export const measureInterleaved = (
  ops: ReadonlyArray<{ readonly name: string; readonly op: () => unknown; readonly perCall?: number }>,
  options: { rounds?: number; roundMs?: number; clock?: "wall" | "cpu" } = {}
): Array<Measurement> => {
  const rounds = options.rounds ?? 11
  const roundMs = options.roundMs ?? 150
  // CPU time of this process (µs → ms): on a shared machine, time spent descheduled is not charged to the operation.
  const cpuMs = () => {
    const { user, system } = process.cpuUsage()
    return (user + system) / 1000
  }
  const clock = options.clock === "cpu" ? cpuMs : now
  const batches = ops.map(({ op }) => {
    let batch = 1
    for (;;) {
      const t0 = now()
      for (let i = 0; i < batch; i++) op()
      const dt = now() - t0
      if (dt > roundMs / 10) return Math.max(1, Math.round((batch * roundMs) / dt))
      batch *= 2
    }
  })
  const rates: Array<Array<number>> = ops.map(() => [])
  for (let r = 0; r < rounds; r++) {
    ops.forEach(({ op }, i) => {
      const batch = batches[i]!
      const t0 = clock()
      for (let k = 0; k < batch; k++) op()
      rates[i]!.push((batch * 1000) / (clock() - t0))
    })
  }
  return ops.map(({ name, perCall }, i) => ({ name, opsPerSecond: median(rates[i]!) * (perCall ?? 1) }))
}

/** Ops/s of an asynchronous operation run `batch` times per round, sequentially. */
export const measureAsync = async (
  name: string,
  op: () => Promise<unknown>,
  options: { rounds?: number; batch?: number } = {}
): Promise<Measurement> => {
  const rounds = options.rounds ?? 7
  const batch = options.batch ?? 500
  for (let i = 0; i < Math.min(batch, 200); i++) await op()
  const rates: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const t0 = now()
    for (let i = 0; i < batch; i++) await op()
    rates.push((batch * 1000) / (now() - t0))
  }
  return { name, opsPerSecond: median(rates) }
}

/** The median of a non-empty list. */
export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

const fmt = (n: number) => (n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2))

/** Prints rows as a table and appends them to bench/results/<suite>.json. */
export const report = (suite: string, rows: ReadonlyArray<Row>): void => {
  console.log(`\n## ${suite}`)
  for (const { figure, baseline, target } of rows) {
    const ratio = figure.opsPerSecond / baseline.opsPerSecond
    const verdict = target === undefined ? "" : ratio >= target ? `  (target ≥ ${target}: met)` : `  (target ≥ ${target}: MISSED)`
    console.log(
      `${figure.name.padEnd(44)} ${fmt(figure.opsPerSecond).padStart(12)}/s  vs ${baseline.name.padEnd(40)} ${fmt(baseline.opsPerSecond).padStart(12)}/s  ratio ${ratio.toFixed(3)}${verdict}`
    )
  }
  const dir = path.join(process.cwd(), "bench", "results")
  fs.mkdirSync(dir, { recursive: true })
  const out = rows.map(({ figure, baseline, target }) => ({
    figure: figure.name,
    opsPerSecond: figure.opsPerSecond,
    baseline: baseline.name,
    baselineOpsPerSecond: baseline.opsPerSecond,
    ratio: figure.opsPerSecond / baseline.opsPerSecond,
    ...(target === undefined ? {} : { target, met: figure.opsPerSecond / baseline.opsPerSecond >= target })
  }))
  fs.writeFileSync(path.join(dir, `${suite}.json`), JSON.stringify({ suite, node: process.version, rows: out }, null, 2))
}
