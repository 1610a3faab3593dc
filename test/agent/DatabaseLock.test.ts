/**
 * An agent's default database is named after its DID, and a SQLite file is one live agent's: a second is refused
 * (DATABASE_IN_USE) unless it asks to share; a crashed holder's lock does not block.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid } from "../../src/core/Did.js"
import * as FileLock from "../../src/node/FileLock.js"
import * as KeysNative from "../../src/node/KeysNative.js"

const tempFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-lock-")), "agent.db")
const options = (database: string, extra: Partial<AgentServer.AgentServerOptions> = {}): AgentServer.AgentServerOptions => ({
  name: "echo",
  database,
  serving: { maxEventLoopLagMs: Infinity },
  handler: ({ message }) => `echo: ${message}`,
  ...extra
})

describe("agent databases", () => {
  it.effect("the default database is named after the DID: one module under two DIDs gets two files", () =>
    Effect.sync(() => {
      const a = AgentServer.databaseOf({ name: "echo", did: "did:mesh:acme.a" })
      const b = AgentServer.databaseOf({ name: "echo", did: "did:mesh:acme.b" })
      assert.notStrictEqual(a, b)
      assert.strictEqual(a, AgentServer.databaseOf({ name: "another-module", did: "did:mesh:ACME.a" }))
      assert.match(a, /^\.mesh\/agents\/[A-Za-z0-9_-]+\.db$/)
      assert.notInclude(a, "echo")
      assert.strictEqual(AgentServer.databaseOf({ name: "echo", database: "x.db" }), "x.db")
    }))

  it.scoped("a second live agent on one SQLite file is refused with DATABASE_IN_USE; --shared-db lets it; a stopped one frees it", () =>
    Effect.gen(function* () {
      const file = tempFile()
      const one = yield* generateDid("one")
      const two = yield* generateDid("two")
      const first = yield* Scope.make()
      yield* Scope.extend(AgentServer.make(options(file, { did: one.did, privateKey: one.privateKey })), first)
      assert.isTrue(fs.existsSync(`${file}.lock`))
      const refused = yield* Effect.flip(AgentServer.make(options(file, { did: two.did, privateKey: two.privateKey })))
      assert.strictEqual(refused._tag === "AgentConfigError" ? refused.code : refused._tag, "DATABASE_IN_USE")
      assert.include(refused.message, `process ${process.pid}`)
      const shared = yield* AgentServer.make(options(file, { did: two.did, privateKey: two.privateKey, sharedDatabase: true }))
      assert.isString(shared.url)
      yield* Scope.close(first, Exit.void)
      assert.isFalse(fs.existsSync(`${file}.lock`))
      const after = yield* AgentServer.make(options(file, { did: two.did, privateKey: two.privateKey }))
      assert.isString(after.url)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.scoped("a lock left by a process that is gone, or unreadable, is taken over", () =>
    Effect.gen(function* () {
      const file = tempFile()
      // A process that has exited: its pid names nobody now.
      const gone = spawnSync(process.execPath, ["-e", "0"]).pid
      fs.writeFileSync(`${file}.lock`, JSON.stringify({ pid: gone, host: os.hostname(), token: "old" }))
      yield* Effect.scoped(FileLock.acquire(file))
      fs.writeFileSync(`${file}.lock`, "{ torn")
      yield* Effect.scoped(FileLock.acquire(file))
      // A lock from another host cannot be checked from here: held, and the message says which file to remove.
      fs.writeFileSync(`${file}.lock`, JSON.stringify({ pid: 1, host: `${os.hostname()}-elsewhere`, token: "t" }))
      const held = yield* Effect.flip(Effect.scoped(FileLock.acquire(file)))
      assert.strictEqual(held.code, "DATABASE_IN_USE")
      assert.include(held.message, `remove ${file}.lock`)
    }))
})
