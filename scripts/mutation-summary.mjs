#!/usr/bin/env node
// Summarises a Stryker JSON report (reports/mutation/mutation.json) per file: the score as Stryker counts it
// (timeouts detected) and with timeouts not counted as kills, and every mutant that was not killed.
// `node scripts/mutation-summary.mjs [--write docs/mutation-results.md]`
import { readFileSync, writeFileSync } from "node:fs"
import { execSync } from "node:child_process"
import { cpus, loadavg } from "node:os"

const report = JSON.parse(readFileSync("reports/mutation/mutation.json", "utf8"))
const rows = []
const details = []
for (const [file, { mutants, source }] of Object.entries(report.files).sort()) {
  const lines = source.split("\n")
  const count = (s) => mutants.filter((m) => m.status === s).length
  const killed = count("Killed")
  const timeout = count("Timeout")
  const survived = count("Survived")
  const noCov = count("NoCoverage")
  const valid = killed + timeout + survived + noCov
  const pct = (n) => (valid === 0 ? "n/a" : ((100 * n) / valid).toFixed(1))
  rows.push(`| ${file} | ${valid} | ${killed} | ${timeout} | ${survived} | ${noCov} | ${pct(killed + timeout)} | ${pct(killed)} |`)
  for (const m of mutants.filter((m) => m.status !== "Killed" && m.status !== "CompileError" && m.status !== "RuntimeError")) {
    const at = m.location.start
    details.push(`- ${file}:${at.line}:${at.column} ${m.status} ${m.mutatorName}: \`${(lines[at.line - 1] ?? "").trim().slice(0, 110)}\` → \`${(m.replacement ?? "").replace(/\s+/g, " ").slice(0, 80)}\``)
  }
}
const commit = execSync("git rev-parse --short HEAD").toString().trim()
const out = [
  `Run at ${new Date().toISOString()} on ${commit}, Node ${process.version}, ${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(2)).join(" ")}.`,
  "",
  "| file | mutants | killed | timeout | survived | no coverage | score (timeouts detected) | score (timeouts not counted) |",
  "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ...rows,
  "",
  "Not killed:",
  "",
  ...details
].join("\n")
const i = process.argv.indexOf("--write")
if (i > 0) writeFileSync(process.argv[i + 1], out + "\n")
console.log(out)
