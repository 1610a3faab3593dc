/**
 * A small benchmark harness: each figure is measured in this run beside its baseline and printed as a ratio.
 * Medians of several timed rounds, after a warm-up, so one noisy round does not decide a figure.
 *
 * Results: every `report` writes the run's record of its suite to `bench/results/runs/<suite>-<start time>.json`
 * (committed: nproc, the load average when the run started and when the file was written, the Node version, how
 * processes were pinned, each figure with its baseline, and for the HTTP suites req/s, p50/p99 and CPU µs per
 * request of every server) and the same to `bench/results/<suite>.json`, the latest run of the suite (not committed).
 * A file from a loaded machine says so in its load average; only quiet runs are figures to quote.
 */
import * as fs from "node:fs"
import * as os from "node:os"
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

// This process's run: when it started (the performance clock's origin), the load it started under, its repetition.
const startedAt = new Date(performance.timeOrigin).toISOString()
const loadAverageAtStart = os.loadavg()
let repetition = 0
const notes: Record<string, unknown> = {}

/** Numbers the repetitions of one `npm run bench -- --repeat N` (each writes files of its own). */
export const setRepetition = (n: number): void => {
  repetition = n
}

/** Adds a fact about this run (pinning, load detail) to every results file written from now on. */
export const note = (key: string, value: unknown): void => {
  notes[key] = value
}

// Read at load: once the load generator is pinned to one CPU (load.ts), availableParallelism answers 1.
const nproc = os.availableParallelism()

/** The machine and run a result was measured on. */
export const machine = () => ({
  startedAt,
  node: process.version,
  platform: `${process.platform} ${os.release()} ${process.arch}`,
  nproc,
  cpu: os.cpus()[0]?.model ?? "unknown",
  loadAverageAtStart,
  loadAverageNow: os.loadavg()
})

const resultsDir = () => path.join(process.cwd(), "bench", "results")
const runFile = (suite: string) =>
  path.join(resultsDir(), "runs", `${suite}-${startedAt.replace(/[:.]/g, "-")}${repetition > 0 ? `-r${repetition}` : ""}.json`)

/** Merges `patch` into the suite's record of this run and into its latest-run file. */
export const saveResult = (suite: string, patch: Record<string, unknown>): void => {
  for (const file of [runFile(suite), path.join(resultsDir(), `${suite}.json`)]) {
    const previous = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>) : {}
    // What an earlier run left in the latest-run file is dropped; what this run wrote is kept (report, then latency).
    const ours = previous["startedAt"] === startedAt && previous["repetition"] === repetition ? previous : {}
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, JSON.stringify({ ...ours, suite, ...machine(), repetition, notes, ...patch }, null, 2))
  }
}

/** Every row reported in this process, for the spread between repetitions (`run.ts --repeat`). */
export const reported: Array<{ readonly suite: string; readonly repetition: number; readonly figure: string; readonly baseline: string; readonly opsPerSecond: number; readonly baselineOpsPerSecond: number }> = []

/** Prints rows as a table and writes them to this run's results (see the module header). */
export const report = (suite: string, rows: ReadonlyArray<Row>): void => {
  console.log(`\n## ${suite}`)
  for (const { figure, baseline, target } of rows) {
    const ratio = figure.opsPerSecond / baseline.opsPerSecond
    // Shown to 3 decimals (a target of 1/3 is "≥ 0.333"); met is decided on the target itself.
    const shown = Number(target?.toFixed(3))
    const verdict = target === undefined ? "" : ratio >= target ? `  (target ≥ ${shown}: met)` : `  (target ≥ ${shown}: MISSED)`
    console.log(
      `${figure.name.padEnd(44)} ${fmt(figure.opsPerSecond).padStart(12)}/s  vs ${baseline.name.padEnd(40)} ${fmt(baseline.opsPerSecond).padStart(12)}/s  ratio ${ratio.toFixed(3)}${verdict}`
    )
  }
  for (const { figure, baseline } of rows) {
    reported.push({ suite, repetition, figure: figure.name, baseline: baseline.name, opsPerSecond: figure.opsPerSecond, baselineOpsPerSecond: baseline.opsPerSecond })
  }
  const out = rows.map(({ figure, baseline, target }) => ({
    figure: figure.name,
    opsPerSecond: figure.opsPerSecond,
    baseline: baseline.name,
    baselineOpsPerSecond: baseline.opsPerSecond,
    ratio: figure.opsPerSecond / baseline.opsPerSecond,
    ...(target === undefined ? {} : { target, met: figure.opsPerSecond / baseline.opsPerSecond >= target })
  }))
  saveResult(suite, { rows: out })
}
