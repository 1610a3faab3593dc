#!/usr/bin/env node
// `npm run mutate [-- stryker options]`: runs Stryker (docs/mutation.md), keeps each mutated file's part of the report
// with when, on which commit and under which load it ran (reports/mutation/files/), then prints the summary of every
// file kept so far. One module: `npm run mutate -- --mutate src/core/Money.ts --force`.
//
// A run of one module tests its mutants against the test files that exercise it (TEST_FILES below), not the whole
// mutation suite: a static mutant (code run while test files load) runs every test it is given, so against the whole
// suite a module like Mandate takes hours. Fewer tests can only kill fewer mutants. `--all-tests` gives it all.
import { spawnSync, execSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { performance } from "node:perf_hooks"

const TEST_FILES = {
  "src/core/Money.ts": ["test/Money.test.ts", "test/SpendingGuard.test.ts", "test/core/SpendingGuardEdges.test.ts", "test/core/Constraints.test.ts", "test/ReviewRegressions.test.ts"],
  "src/core/Constraints.ts": ["test/core/Constraints*.test.ts", "test/Mandate*.test.ts", "test/ReviewRegressions.test.ts", "test/TaskGuard.test.ts", "test/SpendingGuard.test.ts"],
  "src/core/SpendingGuard.ts": ["test/SpendingGuard.test.ts", "test/core/SpendingGuardEdges.test.ts", "test/MandateProperties.test.ts"],
  "src/core/TaskGuard.ts": ["test/TaskGuard.test.ts", "test/core/TaskGuardEdges.test.ts", "test/ComputeReservations.test.ts"],
  "src/core/Did.ts": ["test/Did.test.ts", "test/core/DidEdges.test.ts", "test/PublicKeyAcceptance.test.ts", "test/Vectors.test.ts"],
  "src/core/Proof.ts": ["test/core/Proof.test.ts", "test/Vectors.test.ts", "test/ReviewRegressions.test.ts", "test/Timestamps.test.ts", "test/Approval.test.ts"],
  "src/core/Approval.ts": ["test/Approval.test.ts", "test/core/ApprovalEdges.test.ts", "test/Timestamps.test.ts"],
  "src/core/Envelope.ts": [
    "test/Envelope.test.ts", "test/core/EnvelopeEdges.test.ts", "test/Timestamps.test.ts", "test/Vectors.test.ts", "test/ReviewRegressions.test.ts", "test/NonceStore.test.ts"
  ],
  "src/core/HttpSignature.ts": ["test/HttpSignature*.test.ts", "test/core/HttpSignatureEdges.test.ts"],
  "src/core/Mandate.ts": [
    "test/Mandate*.test.ts", "test/core/Mandate*.test.ts", "test/ReviewRegressions.test.ts", "test/core/ConstraintsProperties.test.ts", "test/TaskGuard.test.ts",
    "test/SpendingGuard.test.ts"
  ]
}

const given = process.argv.slice(2)
const args = given.filter((a) => a !== "--all-tests")
const at = args.findIndex((a) => a === "--mutate" || a === "-m")
const mutated = at >= 0 ? args[at + 1].split(",") : (await import("../stryker.config.mjs")).default.mutate
const own = mutated.length === 1 ? TEST_FILES[mutated[0]] : undefined
// Passed to vitest.mutate.config.ts rather than as Stryker's --testFiles: with --testFiles, every static mutant of a
// Did run survived, even those that replace a tested function by one returning undefined.
const testFiles = own !== undefined && !given.includes("--all-tests") ? own.join(",") : undefined
if (testFiles !== undefined) console.log(`testing ${mutated[0]} against ${testFiles} (--all-tests for the whole mutation suite)`)

const load = () => loadavg().map((l) => l.toFixed(2)).join(" ")
const loadBefore = load()
// What the run measures is the tree as it was when Stryker copied it, so the commit is taken before it starts.
const commit = execSync("git rev-parse --short HEAD").toString().trim()
const dirty = execSync("git status --porcelain -- src test").toString().trim() !== ""
const started = performance.now()
const env = testFiles === undefined ? process.env : { ...process.env, MUTATE_TEST_FILES: testFiles }
const stryker = spawnSync("npx", ["stryker", "run", ...args], { stdio: "inherit", env })
if (stryker.status !== 0) process.exit(stryker.status ?? 1)

const report = JSON.parse(readFileSync("reports/mutation/mutation.json", "utf8"))
const meta = {
  finishedAt: new Date().toISOString(),
  commit,
  dirty,
  args: args.join(" "),
  testFiles: testFiles ?? "the whole mutation suite",
  minutes: Math.round((performance.now() - started) / 6000) / 10,
  cores: cpus().length,
  loadBefore,
  loadAfter: load()
}
// The report also carries the other files' results kept from earlier runs (incremental mode): only the files this
// run mutated are stored with this run's details.
mkdirSync("reports/mutation/files", { recursive: true })
for (const [file, data] of Object.entries(report.files).filter(([f]) => mutated.includes(f))) {
  const name = file.replaceAll("/", "_").replace(/\.ts$/, ".json")
  writeFileSync(`reports/mutation/files/${name}`, JSON.stringify({ meta, file, ...data }))
}
const summary = spawnSync("node", ["scripts/mutation-summary.mjs"], { stdio: "inherit" })
process.exit(summary.status ?? 1)
