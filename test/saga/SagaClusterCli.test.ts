/**
 * `mesh hub`'s cluster flags: refused where they cannot apply (no saga identity, or a SQLite database, where one hub
 * runs every saga), and described in `--help`.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ensureBin } from "../support/bin.js"

const mesh = (...args: ReadonlyArray<string>) => {
  const r = spawnSync(process.execPath, [ensureBin(), ...args], { encoding: "utf8", timeout: 60_000 })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

describe("mesh hub: the saga cluster's flags", { timeout: 120_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-cluster-cli-"))

  it("refuses --runner-address without --saga-identity", () => {
    const r = mesh("hub", "--db", path.join(dir, "a.db"), "--port", "0", "--runner-address", "127.0.0.1:4000")
    assert.strictEqual(r.status, 1)
    assert.include(r.out, "INVALID_ARGUMENT: --runner-address, --runner-listen and --saga-failover need --saga-identity")
  })

  it("refuses the cluster's flags on SQLite, where one hub runs every saga", () => {
    const identity = path.join(dir, "runner.json")
    assert.strictEqual(mesh("keygen", "runner", "--out", identity).status, 0)
    const r = mesh("hub", "--db", path.join(dir, "b.db"), "--port", "0", "--saga-identity", identity, "--saga-failover", "5")
    assert.strictEqual(r.status, 1)
    assert.include(r.out, "need a Postgres --db: a hub on SQLite runs every saga itself")
  })

  it("--help says how the runners form a cluster, and that SQLite has one", () => {
    const r = mesh("hub", "--help")
    assert.include(r.out, "--runner-address")
    assert.include(r.out, "on SQLite one hub runs every saga")
    assert.include(r.out, "MESH_HUB_SAGA_FAILOVER")
  })
})
