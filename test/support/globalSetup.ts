/**
 * Runs once before the tests: builds the `mesh` command if it is missing or stale, so tests that spawn it do not pay
 * for a build inside their own time limit.
 */
import { ensureBin } from "./bin.js"

export default (): void => {
  ensureBin()
}
