/**
 * `mesh hub` from process start to its first listen, beside `node -e 0` (process start to exit), both as child
 * processes, interleaved, median of 7. Figures are starts per second, so the ratio is t(node -e 0) / t(mesh hub);
 * the target "start ≤ 5× node -e 0" is a ratio ≥ 0.2. Needs the built binary (`npm run build`, done by `npm ci`).
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

const timeNode = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const p = spawn(process.execPath, ["-e", "0"], { stdio: "ignore" })
    p.on("exit", () => resolve(performance.now() - t0))
    p.on("error", reject)
  })

const timeHub = (db: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const p = spawn(process.execPath, [bin, "hub", "--db", db, "--port", "0", "--log-level", "error"], { stdio: ["ignore", "pipe", "ignore"] })
    const timer = setTimeout(() => {
      p.kill("SIGKILL")
      reject(new Error("mesh hub did not listen within 20 s"))
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
    const node: Array<number> = []
    const hub: Array<number> = []
    for (let i = 0; i < 7; i++) {
      node.push(await timeNode())
      hub.push(await timeHub(db))
    }
    const n = median(node)
    const h = median(hub)
    console.log(`\nnode -e 0: ${n.toFixed(0)} ms, mesh hub to first listen: ${h.toFixed(0)} ms (${(h / n).toFixed(2)}×)`)
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
      { figure: { name: "mesh hub start to first listen (starts/s)", opsPerSecond: 1000 / h }, baseline: { name: "node -e 0 (starts/s)", opsPerSecond: 1000 / n }, target: 0.2 },
      { figure: { name: "import agent-mesh (root, imports/s)", opsPerSecond: 1000 / r }, baseline: { name: "import agent-mesh/Envelope (imports/s)", opsPerSecond: 1000 / m } }
    ])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
