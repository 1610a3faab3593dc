/**
 * `npm run simulate`: runs the example mesh (docs/simulation.md) under seeded fault schedules.
 *
 *   --seed N          replay the schedule of seed N exactly: its events, each action's outcome, the violation, the digest
 *   --schedule JSON   replay a schedule given as JSON (what a shrunk failure prints)
 *   --runs N          explore seeds --from S (default 1) to S+N-1; each failure is printed with its seed and shrunk
 *   --planted         plant a bug: the shop agent ignores its nonce store and forgets its stored replies
 *   --skips-gates     plant a bug: the shop agent runs its gated capabilities without asking the task guard
 *   --trace           with --seed or --schedule, print every request the network carried
 *   --max-events N    events per generated schedule at most (default 8)
 *   --requests N      generated network faults land on requests below N (default 40)
 *   --stop-at N       stop exploring after N failures (default 1; 0: never)
 *
 * Exits 1 when a run broke an invariant.
 */
import * as Effect from "effect/Effect"
import * as Sim from "../src/sim/Simulation.js"

const args = process.argv.slice(2)
const option = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`)
  return i === -1 ? undefined : args[i + 1]
}
const flag = (name: string): boolean => args.includes(`--${name}`)
const int = (name: string, fallback: number): number => {
  const v = option(name)
  if (v === undefined) return fallback
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} takes a whole number, got ${v}`)
  return n
}

const flaws: ReadonlyArray<Sim.Flaw> = [
  ...(flag("planted") ? (["ignores-nonces", "forgets-replies"] as const) : []),
  ...(flag("skips-gates") ? (["skips-gates"] as const) : [])
]
const spec = flaws.length === 0 ? Sim.exampleMesh : Sim.withFlaws(Sim.exampleMesh, "shop", flaws)
const planted = `${flag("planted") ? " --planted" : ""}${flag("skips-gates") ? " --skips-gates" : ""}`
const bounds: Sim.ScheduleBounds = { maxEvents: int("max-events", 8), requests: int("requests", 40) }
const run = (schedule: Sim.Schedule) => Effect.runPromise(Sim.run(spec, schedule))

const printReport = (report: Sim.Report, trace: boolean) => {
  for (const a of report.actions) console.log(`  action ${a}`)
  for (const c of report.crashes) console.log(`  crash: ${c}`)
  if (trace) for (const l of report.network) console.log(`  t=${l.at} #${l.seq} ${l.method} ${l.origin}${l.path} ${l.faults.join(",")} -> ${l.outcome}`)
  console.log(report.violation === undefined ? "  every invariant held" : `  VIOLATION ${report.violation.invariant} after action ${report.violation.action}: ${report.violation.message}`)
  console.log(`  digest ${report.digest}`)
}

const indent = (text: string) => text.split("\n").map((l) => `    ${l}`).join("\n")

const replay = async (schedule: Sim.Schedule, label: string) => {
  console.log(`${label}\n  schedule:\n${indent(Sim.describeSchedule(schedule))}`)
  const report = await run(schedule)
  printReport(report, flag("trace"))
  process.exitCode = report.violation === undefined ? 0 : 1
}

const explore = async () => {
  const runs = int("runs", 100)
  const from = int("from", 1)
  const stopAt = int("stop-at", 1)
  const started = performance.now()
  const cpu = process.cpuUsage()
  let failures = 0
  let done = 0
  for (let seed = from; seed < from + runs; seed++) {
    const schedule = Sim.scheduleOf(seed, spec, bounds)
    const report = await run(schedule)
    done = seed - from + 1
    if (done % 10 === 0 || done === runs) {
      const seconds = (performance.now() - started) / 1000
      console.log(`${done}/${runs} runs, ${failures} failing, ${(done / seconds).toFixed(2)} runs/s`)
    }
    if (report.violation === undefined) continue
    failures++
    console.log(`seed ${seed} FAILS: ${report.violation.invariant} after action ${report.violation.action}: ${report.violation.message}`)
    const shrunk = await Effect.runPromise(Sim.shrink(spec, schedule, report))
    console.log(`  shortest schedule that still fails (${shrunk.schedule.length} of ${schedule.length} events, ${shrunk.runs} runs to shrink):`)
    console.log(indent(Sim.describeSchedule(shrunk.schedule)))
    console.log(`  replay: npm run simulate -- --seed ${seed}${planted}`)
    console.log(`  replay the shrunk one: npm run simulate -- --schedule '${JSON.stringify(shrunk.schedule)}'${planted}`)
    if (stopAt > 0 && failures >= stopAt) break
  }
  const seconds = (performance.now() - started) / 1000
  // CPU time as well as wall time: on a machine other work shares, the first says what a run costs.
  const used = process.cpuUsage(cpu)
  const cpuMs = (used.user + used.system) / 1000 / Math.max(done, 1)
  console.log(`explored in ${seconds.toFixed(1)} s: ${failures} failing; ${(done / seconds).toFixed(2)} runs/s, ${cpuMs.toFixed(0)} ms of CPU a run`)
  process.exitCode = failures === 0 ? 0 : 1
}

const seed = option("seed")
const given = option("schedule")
if (seed !== undefined) await replay(Sim.scheduleOf(int("seed", 0), spec, bounds), `seed ${seed}`)
else if (given !== undefined) await replay(JSON.parse(given) as Sim.Schedule, "given schedule")
else await explore()
