#!/usr/bin/env node
// `npm run mutate [-- stryker options]`: runs Stryker (docs/mutation.md), keeps each mutated file's part of the report
// with when, on which commit and under which load it ran (reports/mutation/files/), then prints the summary of every
// file kept so far. One module: `npm run mutate -- --mutate src/core/Money.ts --force`.
import { spawnSync, execSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { performance } from "node:perf_hooks"

const load = () => loadavg().map((l) => l.toFixed(2)).join(" ")
const loadBefore = load()
// What the run measures is the tree as it was when Stryker copied it, so the commit is taken before it starts.
const commit = execSync("git rev-parse --short HEAD").toString().trim()
const dirty = execSync("git status --porcelain -- src test").toString().trim() !== ""
const started = performance.now()
const stryker = spawnSync("npx", ["stryker", "run", ...process.argv.slice(2)], { stdio: "inherit" })
if (stryker.status !== 0) process.exit(stryker.status ?? 1)

const report = JSON.parse(readFileSync("reports/mutation/mutation.json", "utf8"))
const meta = {
  finishedAt: new Date().toISOString(),
  commit,
  dirty,
  args: process.argv.slice(2).join(" "),
  minutes: Math.round((performance.now() - started) / 6000) / 10,
  cores: cpus().length,
  loadBefore,
  loadAfter: load()
}
// The report also carries the other files' results kept from earlier runs (incremental mode): only the files this
// run mutated are stored with this run's details.
const args = process.argv.slice(2)
const at = args.findIndex((a) => a === "--mutate" || a === "-m")
const mutated = at >= 0 ? args[at + 1].split(",") : (await import("../stryker.config.mjs")).default.mutate
mkdirSync("reports/mutation/files", { recursive: true })
for (const [file, data] of Object.entries(report.files).filter(([f]) => mutated.includes(f))) {
  const name = file.replaceAll("/", "_").replace(/\.ts$/, ".json")
  writeFileSync(`reports/mutation/files/${name}`, JSON.stringify({ meta, file, ...data }))
}
const summary = spawnSync("node", ["scripts/mutation-summary.mjs"], { stdio: "inherit" })
process.exit(summary.status ?? 1)
