/**
 * The built `mesh` command for tests that run it as a process: rebuilt when missing or older than any source file,
 * so a test never runs yesterday's binary.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/** Absolute path of dist/bin/mesh.js. */
export const bin = path.resolve("dist/bin/mesh.js")

const newestSource = (dir: string): number =>
  fs.readdirSync(dir, { withFileTypes: true }).reduce((max, e) => {
    const p = path.join(dir, e.name)
    return Math.max(max, e.isDirectory() ? newestSource(p) : fs.statSync(p).mtimeMs)
  }, 0)

let checked = false

/** Builds the package unless dist/bin/mesh.js is newer than every file under src/. */
export const ensureBin = (): string => {
  if (checked) return bin
  if (!fs.existsSync(bin) || fs.statSync(bin).mtimeMs < newestSource(path.resolve("src"))) execFileSync("npm", ["run", "build"], { stdio: "ignore" })
  checked = true
  return bin
}
