/**
 * `npm run bench`: every suite, each figure beside its baseline measured in the same run. Results in
 * bench/results/ (harness.ts says what each file holds). `npm run bench -- keys envelope` runs only the named
 * suites; `--repeat N` runs them N times in a row and prints, per figure, how far the runs differ (the spread of
 * the ratio to its baseline, max − min over the median), so every quoted figure has at least two runs behind it.
 */
import { median, reported, saveResult, setRepetition } from "./harness.js"

const suites: Record<string, () => Promise<{ run: () => Promise<void> }>> = {
  keys: () => import("./keys.js"),
  envelope: () => import("./envelope.js"),
  httpsig: () => import("./httpsig.js"),
  json: () => import("./json.js"),
  mandate: () => import("./mandate.js"),
  http: () => import("./http.js"),
  agent: () => import("./agent.js"),
  inprocess: () => import("./inprocess.js"),
  ledger: () => import("./ledger.js"),
  start: () => import("./start.js"),
  saga: () => import("./saga.js"),
  "saga-cluster": () => import("./sagaCluster.js"),
  router: () => import("./router.js"),
  a2a: () => import("./a2a.js"),
  postgres: () => import("./postgres.js"),
  tracing: () => import("./tracing.js"),
  runtimes: () => import("./runtimes.js"),
  shipped: () => import("./shipped.js"),
  // Not in the default run: it needs wrk, and checks the load generator rather than measuring the project.
  wrk: () => import("./wrk.js")
}
const optIn = new Set(["wrk"])

const args = process.argv.slice(2)
const repeatAt = args.indexOf("--repeat")
const repeat = repeatAt < 0 ? 1 : Math.max(1, Number(args[repeatAt + 1] ?? 1))
const wanted = repeatAt < 0 ? args : args.filter((_, i) => i !== repeatAt && i !== repeatAt + 1)

for (let r = 1; r <= repeat; r++) {
  if (repeat > 1) {
    setRepetition(r)
    console.log(`\n# run ${r} of ${repeat}`)
  }
  for (const [name, load] of Object.entries(suites)) {
    if (wanted.length > 0 ? !wanted.includes(name) : optIn.has(name)) continue
    await (await load()).run()
  }
}

if (repeat > 1) {
  // The same (suite, figure, baseline) across repetitions: its ratios, and how far apart they are.
  const groups = new Map<string, Array<number>>()
  for (const row of reported) {
    const key = `${row.suite}\u0000${row.figure}\u0000${row.baseline}`
    groups.set(key, [...(groups.get(key) ?? []), row.opsPerSecond / row.baselineOpsPerSecond])
  }
  console.log(`\n## spread over ${repeat} runs (ratio to baseline: each run, and (max − min) / median)`)
  const spread = [...groups].map(([key, ratios]) => {
    const [suite, figure, baseline] = key.split("\u0000") as [string, string, string]
    const m = median(ratios)
    const relative = (Math.max(...ratios) - Math.min(...ratios)) / m
    console.log(`${`${suite}: ${figure} / ${baseline}`.padEnd(100)} ${ratios.map((x) => x.toFixed(3)).join("  ")}  spread ${(100 * relative).toFixed(1)}%`)
    return { suite, figure, baseline, ratios, spread: relative }
  })
  setRepetition(0)
  saveResult("spread", { repeat, suites: wanted, spread })
}
