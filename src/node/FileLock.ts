/**
 * A lock file beside a file only one process should use at a time (an agent's SQLite database): `<file>.lock`,
 * created exclusively, holding the holder's process id, host and a random token, removed when the scope closes.
 *
 * A holder that crashed leaves its lock file behind, so a lock is held only while its holder lives: on the same
 * host, a lock whose process is gone (`kill(pid, 0)` fails with ESRCH) or whose file cannot be read is taken over. A
 * lock written on another host cannot be checked from here and counts as held; its message names the file to
 * remove once that host's process is known to be gone.
 *
 * Floor: node (docs/architecture.md §3).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { randomBytes, toHex } from "../core/internal/bytes.js"

/** Another live process holds the lock (`DATABASE_IN_USE`). */
export class LockHeld extends Data.TaggedError("LockHeld")<{
  readonly code: "DATABASE_IN_USE"
  readonly message: string
  readonly lockFile: string
  readonly pid: number
  readonly host: string
}> {}

/** What a lock file holds. */
interface Holder {
  readonly pid: number
  readonly host: string
  readonly token: string
}

/** The lock file of `file`. */
export const lockFileOf = (file: string): string => `${path.resolve(file)}.lock`

const readHolder = (lockFile: string): Holder | undefined => {
  try {
    const h = JSON.parse(fs.readFileSync(lockFile, "utf8")) as Partial<Holder>
    return typeof h.pid === "number" && typeof h.host === "string" && typeof h.token === "string" ? (h as Holder) : undefined
  } catch {
    return undefined
  }
}

/** True when process `pid` exists on this host (EPERM: it exists, under another user). */
const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

const isHeld = (h: Holder): boolean => h.host !== os.hostname() || isAlive(h.pid)

/** Holds the lock of `file` for the scope; `LockHeld` while another live holder has it. */
export const acquire = (file: string): Effect.Effect<void, LockHeld, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const lockFile = lockFileOf(file)
      const me: Holder = { pid: process.pid, host: os.hostname(), token: toHex(randomBytes(16)) }
      fs.mkdirSync(path.dirname(lockFile), { recursive: true })
      // A few rounds: a stale lock removed here may be taken by another process starting at the same moment.
      for (let round = 0; round < 3; round++) {
        try {
          fs.writeFileSync(lockFile, JSON.stringify(me), { flag: "wx", mode: 0o600 })
          return Effect.succeed({ lockFile, token: me.token })
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "EEXIST") return Effect.die(e)
        }
        const holder = readHolder(lockFile)
        if (holder !== undefined && isHeld(holder)) {
          const where = holder.host === me.host ? `process ${holder.pid}` : `process ${holder.pid} on ${holder.host} (remove ${lockFile} once it is gone)`
          return Effect.fail(new LockHeld({ code: "DATABASE_IN_USE", message: `${path.resolve(file)} is in use by ${where}`, lockFile, pid: holder.pid, host: holder.host }))
        }
        fs.rmSync(lockFile, { force: true })
      }
      return Effect.fail(new LockHeld({ code: "DATABASE_IN_USE", message: `${path.resolve(file)}: its lock keeps being taken`, lockFile, pid: 0, host: "" }))
    }),
    // Removed only while it is still ours: a holder declared dead by mistake must not delete its successor's lock.
    ({ lockFile, token }) => Effect.sync(() => {
      if (readHolder(lockFile)?.token === token) fs.rmSync(lockFile, { force: true })
    })
  ).pipe(Effect.asVoid)
