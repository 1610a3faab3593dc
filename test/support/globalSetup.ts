/**
 * Runs once before the tests: builds the `mesh` command if it is missing or stale, so tests that spawn it do not pay
 * for a build inside their own time limit; refuses to start on another Node.js than the one asked for.
 */
import { ensureBin } from "./bin.js"

export default (): void => {
  // scripts/node-versions.sh sets it: a run meant for Node 24 that found another `node` on PATH must not pass as one.
  const expected = process.env["MESH_TEST_NODE"]
  if (expected !== undefined && expected !== process.version) {
    throw new Error(`MESH_TEST_NODE is ${expected} but the tests run on Node.js ${process.version}`)
  }
  ensureBin()
}
