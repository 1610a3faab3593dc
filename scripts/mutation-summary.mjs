#!/usr/bin/env node
// Summarises the Stryker reports kept per file by scripts/mutate.mjs (reports/mutation/files/*.json): for each file,
// when and under which load it ran, the score as Stryker counts it (timeouts detected), the score with timeouts not
// counted as kills, and that score again without the mutants scripts/mutation-equivalent.mjs lists as equivalent;
// then every mutant not killed, with the reason when it is a listed equivalent.
// `node scripts/mutation-summary.mjs [--write docs/mutation-results.md]`
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { equivalent } from "./mutation-equivalent.mjs"

const dir = "reports/mutation/files"
const reports = existsSync(dir)
  ? readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) => JSON.parse(readFileSync(`${dir}/${f}`, "utf8")))
  : []
if (reports.length === 0) {
  console.error(`no reports in ${dir}: run npm run mutate first`)
  process.exit(1)
}

const snippet = (lines, m) => {
  const { start, end } = m.location
  if (start.line === end.line) return (lines[start.line - 1] ?? "").slice(start.column - 1, end.column - 1)
  return (lines[start.line - 1] ?? "").slice(start.column - 1)
}
const reasonOf = (file, lines, m) =>
  equivalent.find((e) =>
    file.endsWith(e.file) && e.mutator === m.mutatorName && snippet(lines, m).startsWith(e.original) &&
    (e.replacement === undefined || e.replacement === m.replacement) &&
    (e.line === undefined || (lines[m.location.start.line - 1] ?? "").includes(e.line))
  )?.reason

const runs = []
const rows = []
const details = []
for (const { meta, file, mutants, source } of reports) {
  const lines = source.split("\n")
  const count = (s) => mutants.filter((m) => m.status === s).length
  const killed = count("Killed")
  const timeout = count("Timeout")
  const survived = count("Survived")
  const noCov = count("NoCoverage")
  const ignored = count("Ignored")
  const valid = killed + timeout + survived + noCov
  const notKilled = mutants.filter((m) => m.status === "Survived" || m.status === "NoCoverage" || m.status === "Timeout")
  const equivalents = notKilled.filter((m) => m.status !== "Timeout" && reasonOf(file, lines, m) !== undefined).length
  const pct = (n, of = valid) => (of === 0 ? "n/a" : ((100 * n) / of).toFixed(1))
  runs.push(`- \`${file}\`: ${meta.finishedAt} on ${meta.commit}${meta.dirty ? " (with uncommitted changes)" : ""}, \`stryker run ${meta.args}\`${meta.testFiles === undefined ? "" : ` against ${meta.testFiles}`}, ${meta.minutes} min, ${meta.cores} cores, load ${meta.loadBefore} before and ${meta.loadAfter} after`)
  rows.push(`| ${file} | ${valid} | ${killed} | ${timeout} | ${survived} | ${noCov} | ${pct(killed + timeout)} | **${pct(killed)}** | ${equivalents} | ${pct(killed, valid - equivalents)} | ${ignored} |`)
  for (const m of notKilled) {
    const at = m.location.start
    const reason = m.status === "Timeout" ? undefined : reasonOf(file, lines, m)
    details.push(`- ${file}:${at.line}:${at.column} ${m.status} ${m.mutatorName}: \`${snippet(lines, m).replace(/\s+/g, " ").slice(0, 90)}\` → \`${(m.replacement ?? "").replace(/\s+/g, " ").slice(0, 60)}\`${reason === undefined ? "" : ` — equivalent: ${reason}`}`)
  }
}
const out = [
  "Runs (one per file; figures from different runs are not comparable in time):",
  "",
  ...runs,
  "",
  "| file | mutants | killed | timeout | survived | no coverage | score (timeouts detected) | score (timeouts not counted) | listed equivalent | score (timeouts not counted, equivalents excluded) | not run (static, ignored) |",
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ...rows,
  "",
  "Not killed:",
  "",
  ...details
].join("\n")
const i = process.argv.indexOf("--write")
if (i > 0) writeFileSync(process.argv[i + 1], out + "\n")
console.log(out)
