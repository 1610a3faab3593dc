/**
 * `mesh` in scripts (the built binary, as processes): the result alone on stdout, one JSON document with `--json`,
 * notes, progress and log lines on stderr; and errors that say what to do on one line (docs/operations.md, "What the
 * command prints").
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as KeysNative from "../src/node/KeysNative.js"
import { ensureBin } from "./support/bin.js"
import { cleanEnv, runMesh as mesh } from "./support/meshCli.js"
import { startHub, tempDatabase } from "./hub/support.js"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "mesh-cli-script-"))

/** One line on stderr, naming the command's failure, and nothing on stdout. */
const assertOneLineError = (r: { readonly stdout: string; readonly stderr: string }, code: string) => {
  assert.strictEqual(r.stdout, "", r.stdout)
  const lines = r.stderr.trimEnd().split("\n")
  assert.strictEqual(lines.length, 1, r.stderr)
  assert.match(lines[0]!, new RegExp(`^mesh: ${code}: `), r.stderr)
  assert.notInclude(r.stderr, "    at ", r.stderr)
}

/** stdout is exactly one JSON document. */
const oneJson = (r: { readonly status: number | null; readonly stdout: string; readonly stderr: string }): Record<string, unknown> => {
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout) as Record<string, unknown>
}

describe("mesh in scripts: stdout holds the result", () => {
  it.live("--json prints one JSON document per command; notes go to stderr; an empty list prints nothing on stdout", () =>
    Effect.gen(function* () {
      const { hub, adminKey } = yield* startHub()
      const dir = tempDir()
      const hubArgs = ["--hub", hub.url]

      const empty = yield* mesh(["agents", "ls", ...hubArgs])
      assert.strictEqual(empty.status, 0, empty.stderr)
      assert.strictEqual(empty.stdout, "")
      assert.strictEqual(empty.stderr, `no agents on ${hub.url}\n`)

      const file = path.join(dir, "alice.identity.json")
      const keygen = oneJson(yield* mesh(["keygen", "alice", "--namespace", "ops", "--out", file, "--json"]))
      assert.deepStrictEqual(Object.keys(keygen), ["path", "did", "didHash", "publicKeyB64", "didKey"])
      assert.strictEqual(keygen.did, "did:mesh:ops.alice")

      const created = yield* mesh(["keys", "create", "--owner", "did:mesh:ops.alice", "--admin-key", adminKey, "--json", ...hubArgs])
      const key = oneJson(created)
      assert.match(String(key.apiKey), /^mk_/)
      assert.deepInclude(key, { owner: "did:mesh:ops.alice", kind: "agent", hub: hub.url })
      assert.include(created.stderr, "created API key")

      const registered = oneJson(yield* mesh(["register", "--identity", file, "--api-key", String(key.apiKey), "--json", ...hubArgs]))
      assert.strictEqual(registered.action, "registered")
      const h = String(keygen.didHash)
      assert.strictEqual(oneJson(yield* mesh(["agents", "show", h, "--json", ...hubArgs])).did, "did:mesh:ops.alice")
      assert.strictEqual((oneJson(yield* mesh(["agents", "ls", "--json", ...hubArgs])).items as ReadonlyArray<unknown>).length, 1)

      const issued = yield* mesh(["mandate", "issue", "--identity", file, "--to", "did:mesh:ops.bob", "--kind", "task", "--constraints", '{"allowed":["search"],"maxDelegationDepth":0}', "--json"])
      const mandate = oneJson(issued)
      assert.deepInclude((mandate.chain as ReadonlyArray<Record<string, unknown>>)[0], { kind: "task", grantor: "did:mesh:ops.alice", grantee: "did:mesh:ops.bob" })
      assert.include(issued.stderr, "root task did:mesh:ops.alice → did:mesh:ops.bob")
      const verified = oneJson(yield* mesh(["mandate", "verify", String(mandate.token), "--json", ...hubArgs]))
      assert.deepInclude(verified, { valid: true, hub: hub.url, token: mandate.token })

      assert.deepStrictEqual(oneJson(yield* mesh(["agents", "rm", h, "--api-key", adminKey, "--json", ...hubArgs])), { removed: h, hub: hub.url })

      const both = yield* mesh(["call", h, "hi", "--json", "--stream", ...hubArgs])
      assert.strictEqual(both.status, 1)
      assertOneLineError(both, "INVALID_ARGUMENT")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)),
    60_000)

  it.live("mesh hub: its banner on stdout; log lines and notes (the next steps, stopping) on stderr", () =>
    Effect.gen(function* () {
      const proc = yield* Effect.acquireRelease(
        Effect.sync(() => spawn(process.execPath, [ensureBin(), "hub", "--port", "0", "--db", tempDatabase()], { env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] })),
        (p) => Effect.sync(() => void p.kill("SIGKILL"))
      )
      const ran = yield* Effect.async<{ readonly stdout: string; readonly stderr: string }>((resume) => {
        let stdout = ""
        let stderr = ""
        let stopping = false
        // Stopped once it listens and has logged that it started; once only, since a second signal ends it at once.
        const stopWhenStarted = () => {
          if (stopping || !/\n {2}database /.test(stdout) || !stderr.includes("hub started")) return
          stopping = true
          proc.kill("SIGTERM")
        }
        proc.stdout.on("data", (d: Buffer) => {
          stdout += d.toString()
          stopWhenStarted()
        })
        proc.stderr.on("data", (d: Buffer) => {
          stderr += d.toString()
          stopWhenStarted()
        })
        proc.on("close", () => resume(Effect.succeed({ stdout, stderr })))
      }).pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("mesh hub did not log that it started on stderr") }))
      assert.match(ran.stdout, /listening on http:\/\/127\.0\.0\.1:\d+/)
      assert.match(ran.stdout, /^mk_/m)
      for (const noted of ["hub started", "next, in another shell", "hub stopping", "hub stopped"]) {
        assert.include(ran.stderr, noted)
        assert.notInclude(ran.stdout, noted)
      }
    }).pipe(Effect.scoped),
    30_000)
})

describe("mesh errors say what to do, on one line", () => {
  it.live("a hub URL without its scheme, from the flag or MESH_HUB", () =>
    Effect.gen(function* () {
      const flag = yield* mesh(["agents", "ls", "--hub", "localhost:8080"])
      assert.strictEqual(flag.status, 2)
      assertOneLineError(flag, "INVALID_ARGUMENT")
      assert.include(flag.stderr, '--hub "localhost:8080" must start with http:// or https://')
      const env = yield* mesh(["call", "aaaaaaaaaaaaaaaaaaaaaaaa", "hi"], { env: { MESH_HUB: "localhost:8080" } })
      assert.strictEqual(env.status, 2)
      assertOneLineError(env, "INVALID_ARGUMENT")
      assert.include(env.stderr, 'MESH_HUB "localhost:8080" must start with http:// or https://')
    }))

  it.live("a port out of range from MESH_HUB_PORT is refused like the flag; a port in use fails once, on one line", () =>
    Effect.gen(function* () {
      const db = tempDatabase()
      for (const [args, env, named] of [
        [["--port", "99999"], {}, "--port"],
        [[], { MESH_HUB_PORT: "99999" }, "MESH_HUB_PORT"],
        [[], { MESH_HUB_PORT: "http" }, "MESH_HUB_PORT"]
      ] as const) {
        const r = yield* mesh(["hub", "--db", db, ...args], { env })
        assert.strictEqual(r.status, 2, r.stderr)
        assertOneLineError(r, "INVALID_ARGUMENT")
        assert.include(r.stderr, `${named} must be a port from 0 to 65535`)
      }
      const { hub } = yield* startHub()
      const port = new URL(hub.url).port
      const taken = yield* mesh(["hub", "--db", db, "--port", port])
      assert.strictEqual(taken.status, 1)
      assertOneLineError(taken, "LISTEN_FAILED")
      assert.include(taken.stderr, `cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`)
      // A port no flag checked (a module's own) is refused by listen() itself: once, on one line, with no stack.
      const dir = tempDir()
      const module = path.join(dir, "far.mjs")
      fs.writeFileSync(module, 'export default { name: "far", port: 99999, handler: () => "x" }\n')
      const far = yield* mesh(["agent", module, "--db", path.join(dir, "far.db"), "--log-level", "error"])
      assert.strictEqual(far.status, 1, far.stderr)
      assertOneLineError(far, "LISTEN_FAILED")
      assert.include(far.stderr, "cannot listen on 127.0.0.1:99999")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))

  it.live("a malformed identity file names the member that is wrong, without the schema's tree", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      for (const [content, says] of [
        [{ did: 3 }, "did must be a string, not 3"],
        [{ did: "did:mesh:x" }, "didHash is missing"],
        [[], "the file must be a JSON object"]
      ] as const) {
        const file = path.join(dir, "bad.identity.json")
        fs.writeFileSync(file, JSON.stringify(content))
        const r = yield* mesh(["whoami", "--identity", file, "--hub", "http://127.0.0.1:9"])
        assert.strictEqual(r.status, 1)
        assertOneLineError(r, "IDENTITY_INVALID")
        assert.include(r.stderr, `${file}: ${says}`)
        assert.notInclude(r.stderr, "readonly")
      }
    }))

  it.live("an unknown didHash is AGENT_NOT_FOUND from mesh call, mesh agents show and mesh agents rm", () =>
    Effect.gen(function* () {
      const { hub, adminKey } = yield* startHub()
      const unknown = "aaaaaaaaaaaaaaaaaaaaaaaa"
      for (const args of [["call", unknown, "hi"], ["agents", "show", unknown], ["agents", "rm", unknown, "--api-key", adminKey]]) {
        const r = yield* mesh([...args, "--hub", hub.url])
        assert.strictEqual(r.status, 1, r.stderr)
        assertOneLineError(r, "AGENT_NOT_FOUND")
        assert.include(r.stderr, `no agent ${unknown} on ${hub.url}`)
      }
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
