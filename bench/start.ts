/**
 * Start-up of the `mesh` command beside `node -e 0` (process start to exit), all as child processes, interleaved,
 * median of 7, each with its peak resident memory:
 *
 * - `mesh --version` to exit: targets ≤ 2× the wall time of `node -e 0` and ≤ 60 MiB peak;
 * - `mesh hub` from process start to its first listen: target ≤ 4× `node -e 0`.
 *
 * Figures are starts per second, so each ratio is t(node -e 0) / t(mesh …): the targets are ratios ≥ 0.5 and ≥ 0.25.
 * Needs the built binary (`npm run build`, done by `npm ci`).
 *
 * Also the cost of importing the package root (`import("agent-mesh")`, the core alone) beside importing one core
 * module (`agent-mesh/Envelope`), each in a fresh process: the root should cost about what one module costs.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { median, report } from "./harness.js"

const bin = path.resolve("dist/bin/mesh.js")

// A process run for its memory reports its own peak resident set size on exit (KiB on Linux) through this preload,
// the baseline too; runs timed for wall time go without it.
const PEAK = "data:text/javascript,process.on('exit',()=>process.stderr.write('\\npeak-rss '+process.resourceUsage().maxRSS+'\\n'))"
const peakOf = (stderr: string): number => Number(/peak-rss (\d+)/.exec(stderr)?.[1] ?? NaN) / 1024

interface Run {
  readonly ms: number
  /** Peak resident memory, MiB. */
  readonly peakMiB: number
}

/** `node <args>`, under `taskset -c <cpu>` when a CPU is given (taskset execs node: the pid and its threads are node's). */
const nodeCommand = (args: ReadonlyArray<string>, cpu: number | undefined): [string, Array<string>] =>
  cpu === undefined ? [process.execPath, [...args]] : ["taskset", ["-c", String(cpu), process.execPath, ...args]]

/** Wall time from spawn to exit of `node <args>`; with `peak`, also its peak memory (the preload costs time). */
export const timeToExit = (args: ReadonlyArray<string>, options: { readonly peak?: boolean; readonly cpu?: number | undefined } = {}): Promise<Run> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const [command, argv] = nodeCommand([...(options.peak === true ? ["--import", PEAK] : []), ...args], options.cpu)
    const p = spawn(command, argv, { stdio: ["ignore", "ignore", "pipe"] })
    let err = ""
    p.stderr.on("data", (d: Buffer) => (err += d.toString()))
    p.on("exit", () => resolve({ ms: performance.now() - t0, peakMiB: peakOf(err) }))
    p.on("error", reject)
  })

/** Wall time (ms) from spawn of `node <args>` in `cwd` to its printing `listening on`; then it is killed (SIGKILL). */
export const timeToListen = (args: ReadonlyArray<string>, options: { readonly cwd?: string; readonly cpu?: number | undefined } = {}): Promise<number> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const [command, argv] = nodeCommand(args, options.cpu)
    const p = spawn(command, argv, { stdio: ["ignore", "pipe", "ignore"], ...(options.cwd === undefined ? {} : { cwd: options.cwd }) })
    const timer = setTimeout(() => {
      p.kill("SIGKILL")
      reject(new Error(`${args.join(" ")} did not listen within 20 s`))
    }, 20_000)
    let out = ""
    p.stdout.on("data", (d: Buffer) => {
      out += d.toString()
      if (out.includes("listening on")) {
        const t = performance.now() - t0
        clearTimeout(timer)
        p.kill("SIGKILL")
        resolve(t)
      }
    })
    p.on("error", reject)
  })

const timeHub = (db: string): Promise<number> => timeToListen([bin, "hub", "--db", db, "--port", "0", "--log-level", "error"])

const timeImport = (specifier: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--input-type=module", "-e", `const t0 = performance.now(); await import(${JSON.stringify(specifier)}); console.log(performance.now() - t0)`], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    p.stdout.on("data", (d: Buffer) => (out += d.toString()))
    p.on("exit", (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`import ${specifier} failed`))))
    p.on("error", reject)
  })

/** Runs the suite. */
export const run = async (): Promise<void> => {
  if (!fs.existsSync(bin)) throw new Error("dist/bin/mesh.js is missing: run `npm run build`")
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bench-start-"))
  const db = path.join(dir, "hub.db")
  try {
    await timeHub(db) // first start creates the database and the admin credential; measure warm restarts
    const node: Array<Run> = []
    const version: Array<Run> = []
    const hub: Array<number> = []
    const nodePeaks: Array<number> = []
    const versionPeaks: Array<number> = []
    for (let i = 0; i < 7; i++) {
      node.push(await timeToExit(["-e", "0"]))
      version.push(await timeToExit([bin, "--version"]))
      hub.push(await timeHub(db))
      nodePeaks.push((await timeToExit(["-e", "0"], { peak: true })).peakMiB)
      versionPeaks.push((await timeToExit([bin, "--version"], { peak: true })).peakMiB)
    }
    const n = median(node.map((r) => r.ms))
    const v = median(version.map((r) => r.ms))
    const h = median(hub)
    const nodePeak = median(nodePeaks)
    const versionPeak = median(versionPeaks)
    const verdict = (ok: boolean) => (ok ? "ok" : "OVER")
    console.log(`\nnode -e 0: ${n.toFixed(0)} ms, ${nodePeak.toFixed(1)} MiB peak`)
    console.log(`mesh --version: ${v.toFixed(0)} ms (${(v / n).toFixed(2)}× node -e 0, target ≤ 2×: ${verdict(v / n <= 2)}), ${versionPeak.toFixed(1)} MiB peak (target ≤ 60 MiB: ${verdict(versionPeak <= 60)})`)
    console.log(`mesh hub to first listen: ${h.toFixed(0)} ms (${(h / n).toFixed(2)}× node -e 0, target ≤ 4×: ${verdict(h / n <= 4)})`)
    const rootImport: Array<number> = []
    const moduleImport: Array<number> = []
    for (let i = 0; i < 7; i++) {
      rootImport.push(await timeImport("agent-mesh"))
      moduleImport.push(await timeImport("agent-mesh/Envelope"))
    }
    const r = median(rootImport)
    const m = median(moduleImport)
    console.log(`import("agent-mesh"): ${r.toFixed(0)} ms, import("agent-mesh/Envelope"): ${m.toFixed(0)} ms (${(r / m).toFixed(2)}×)`)
    report("start", [
      { figure: { name: "mesh --version to exit (runs/s)", opsPerSecond: 1000 / v }, baseline: { name: "node -e 0 (runs/s)", opsPerSecond: 1000 / n }, target: 0.5 },
      { figure: { name: "mesh hub start to first listen (starts/s)", opsPerSecond: 1000 / h }, baseline: { name: "node -e 0 (starts/s)", opsPerSecond: 1000 / n }, target: 0.25 },
      { figure: { name: "import agent-mesh (root, imports/s)", opsPerSecond: 1000 / r }, baseline: { name: "import agent-mesh/Envelope (imports/s)", opsPerSecond: 1000 / m } }
    ])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
