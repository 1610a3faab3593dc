/**
 * The `mesh` command as a user runs it (the built binary, as processes): registering an agent and keeping it live,
 * calling it, reading the registry, delegating with mandates, settings from flags, environment and mesh.json, and
 * errors printed once on one line.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { meshIdentityOf, type IdentityFile } from "../src/cli/Cli.js"
import { type Did, didHash } from "../src/core/Did.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { runMesh, startMeshAgent } from "./support/meshCli.js"
import { startHub } from "./hub/support.js"

const mesh = runMesh
const startAgent = (args: ReadonlyArray<string>) => startMeshAgent(args)

const stopped = (proc: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (proc.exitCode !== null) return resume(Effect.void)
    proc.once("exit", () => resume(Effect.void))
    proc.kill("SIGTERM")
  })

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "mesh-cli-cmd-"))

const keygen = (dir: string, name: string) =>
  Effect.gen(function* () {
    const file = path.join(dir, `${name}.identity.json`)
    const r = yield* mesh(["keygen", name, "--namespace", "ops", "--out", file])
    assert.strictEqual(r.status, 0, r.stderr)
    return { file, identity: JSON.parse(fs.readFileSync(file, "utf8")) as IdentityFile }
  })

/** One line, naming the command, no colour, no JSON dump. */
const assertOneLine = (text: string) => {
  const lines = text.trim().split("\n")
  assert.strictEqual(lines.length, 1, text)
  assert.match(lines[0]!, /^mesh: /)
  assert.notInclude(text, "\x1b[")
  assert.notInclude(text, "{\"_tag\"")
}

describe("mesh commands", () => {
  it.live("agent --register registers and keeps the agent live; a restart updates the record; agents and call reach it", () =>
    Effect.gen(function* () {
      const { hub, client } = yield* startHub()
      const dir = tempDir()
      const { file, identity } = yield* keygen(dir, "echo")
      const key = yield* client.createApiKey({ owner: identity.did })
      const args = ["examples/echo-agent.ts", "--port", "0", "--db", path.join(dir, "agent.db"), "--identity", file, "--hub", hub.url, "--api-key", key.apiKey, "--register", "--log-level", "warning"]

      // Without its key, --register refuses to start and says what is missing.
      const refused = yield* mesh(["agent", "examples/echo-agent.ts", "--register", "--identity", file, "--hub", hub.url])
      assert.strictEqual(refused.status, 1)
      assertOneLine(refused.stderr)
      assert.include(refused.stderr, "INVALID_ARGUMENT: --register needs --api-key")

      const first = yield* startAgent(args)
      assert.isString(first.url, first.out())
      assert.include(first.out(), "registry   registered")
      const h = didHash(identity.did as Did)
      const record = yield* client.resolveAgent(h)
      assert.strictEqual(record.endpointUrl, first.url)
      assert.isTrue(record.live)

      const ls = yield* mesh(["agents", "ls", "--hub", hub.url, "--live"])
      assert.strictEqual(ls.status, 0, ls.stderr)
      assert.include(ls.stdout, `${h}  live   ${identity.did}`)
      const stale = yield* mesh(["agents", "ls", "--hub", hub.url, "--stale"])
      assert.strictEqual(stale.stdout, "")
      assert.include(stale.stderr, "no stale agents")
      const show = yield* mesh(["agents", "show", h, "--hub", hub.url])
      const shown = JSON.parse(show.stdout)
      assert.strictEqual(shown.did, identity.did)
      assert.strictEqual(shown.manifest.name, "echo")
      assert.isTrue(shown.live)
      const found = yield* mesh(["agents", "search", "echo", "--hub", hub.url])
      assert.include(found.stdout, h)

      const call = yield* mesh(["call", h, "hello there", "--hub", hub.url, "--session", "s1"])
      assert.strictEqual(call.status, 0, call.stderr)
      assert.strictEqual(call.stdout, "echo: hello there (session s1)\n")
      assert.strictEqual(call.stderr, "session s1\n")
      const streamed = yield* mesh(["call", h, "streamed", "--hub", hub.url, "--stream", "--session", "s2"])
      assert.strictEqual(streamed.status, 0, streamed.stderr)
      assert.strictEqual(streamed.stdout, "echo: streamed (session s2)\n")

      // A restart listens elsewhere: the record follows it.
      yield* stopped(first.proc)
      const second = yield* startAgent(args)
      assert.isString(second.url, second.out())
      assert.include(second.out(), "registry   updated")
      assert.strictEqual((yield* client.resolveAgent(h)).endpointUrl, second.url)
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)),
    // Ten processes one after another, two of them agents loading TypeScript: on a loaded two-core machine this
    // passes 30 s on any Node version (a limit on a hang, not a figure).
    90_000)

  it.live("mandate issue, attenuate and verify against the hub; a wrong grantee is MANDATE_INVALID", () =>
    Effect.gen(function* () {
      const { hub, client } = yield* startHub()
      const dir = tempDir()
      const alice = yield* keygen(dir, "alice")
      const bob = yield* keygen(dir, "bob")
      for (const who of [alice, bob]) {
        const identity = yield* meshIdentityOf(who.identity)
        yield* client.registerAgent({ manifest: { name: identity.did, meshProtocolVersion: "1.0" }, endpointUrl: "http://127.0.0.1:9/x", identity })
      }
      const issued = yield* mesh(["mandate", "issue", "--identity", alice.file, "--to", bob.identity.did, "--kind", "task", "--constraints", '{"allowed":["search","fetch"],"maxDelegationDepth":1}'])
      assert.strictEqual(issued.status, 0, issued.stderr)
      const token = issued.stdout.trim()
      assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/)
      assert.include(issued.stderr, `task ${alice.identity.did} → ${bob.identity.did}`)

      const valid = yield* mesh(["mandate", "verify", token, "--hub", hub.url, "--grantee", bob.identity.did, "--kind", "task"])
      assert.strictEqual(valid.status, 0, valid.stderr)
      assert.include(valid.stdout, "valid")
      const wrong = yield* mesh(["mandate", "verify", token, "--hub", hub.url, "--grantee", "did:mesh:ops.mallory"])
      assert.strictEqual(wrong.status, 1)
      assertOneLine(wrong.stderr)
      assert.include(wrong.stderr, "MANDATE_INVALID: GRANTEE_MISMATCH")

      const child = yield* mesh(["mandate", "attenuate", token, "--identity", bob.file, "--to", "did:mesh:ops.carol", "--kind", "task", "--constraints", '{"allowed":["search"],"maxDelegationDepth":0}'])
      assert.strictEqual(child.status, 0, child.stderr)
      const chain = yield* mesh(["mandate", "verify", child.stdout.trim(), "--hub", hub.url, "--grantee", "did:mesh:ops.carol"])
      assert.strictEqual(chain.status, 0, chain.stderr)
      assert.include(chain.stdout, "└─ task did:mesh:ops.bob → did:mesh:ops.carol")
      // Widening what the parent allowed is refused when issuing, not left for a verifier to find.
      const wider = yield* mesh(["mandate", "attenuate", token, "--identity", bob.file, "--to", "did:mesh:ops.carol", "--kind", "task", "--constraints", '{"allowed":["search","pay"],"maxDelegationDepth":0}'])
      assert.strictEqual(wider.status, 1)
      assertOneLine(wider.stderr)
      assert.include(wider.stderr, "ATTENUATION_WIDENED")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))

  it.live("settings: flags > environment > mesh.json > defaults; an unknown setting in the file is refused", () =>
    Effect.gen(function* () {
      const { hub } = yield* startHub()
      const dir = tempDir()
      const dead = "http://127.0.0.1:9"
      fs.writeFileSync(path.join(dir, "mesh.json"), JSON.stringify({ MESH_HUB: hub.url }))
      const fromFile = yield* mesh(["agents", "ls"], { cwd: dir })
      assert.strictEqual(fromFile.stderr, `no agents on ${hub.url}\n`, fromFile.stdout)
      fs.writeFileSync(path.join(dir, "mesh.json"), JSON.stringify({ MESH_HUB: dead }))
      const fromEnv = yield* mesh(["agents", "ls"], { cwd: dir, env: { MESH_HUB: hub.url } })
      assert.strictEqual(fromEnv.stderr, `no agents on ${hub.url}\n`, fromEnv.stdout)
      const fromFlag = yield* mesh(["agents", "ls", "--hub", hub.url], { cwd: dir, env: { MESH_HUB: dead } })
      assert.strictEqual(fromFlag.stderr, `no agents on ${hub.url}\n`, fromFlag.stdout)
      const named = path.join(dir, "other.json")
      fs.writeFileSync(named, JSON.stringify({ MESH_HUB: hub.url }))
      const fromNamed = yield* mesh(["agents", "ls"], { cwd: dir, env: { MESH_CONFIG: named } })
      assert.strictEqual(fromNamed.stderr, `no agents on ${hub.url}\n`, fromNamed.stdout)

      fs.writeFileSync(path.join(dir, "mesh.json"), JSON.stringify({ MESH_HUB_PROT: 1 }))
      const typo = yield* mesh(["agents", "ls"], { cwd: dir })
      assert.strictEqual(typo.status, 1)
      assertOneLine(typo.stderr)
      assert.include(typo.stderr, "CONFIG_INVALID")
      assert.include(typo.stderr, "MESH_HUB_PROT")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))

  it.live("usage errors print once on one line; help names the whole command with an example, without colour", () =>
    Effect.gen(function* () {
      const missing = yield* mesh(["keys", "create"])
      assert.strictEqual(missing.status, 2)
      assertOneLine(missing.stderr)
      assert.include(missing.stderr, "--owner")
      assert.include(missing.stderr, "mesh keys create --help")
      assert.strictEqual(missing.stdout, "")
      const unknown = yield* mesh(["hub", "--bogus"])
      assert.strictEqual(unknown.status, 2)
      assertOneLine(unknown.stderr)

      for (const command of [["hub"], ["agent"], ["keys", "create"], ["call"], ["agents", "ls"], ["mandate", "issue"], ["saga", "run"]]) {
        const help = yield* mesh([...command, "--help"])
        assert.strictEqual(help.status, 0, help.stderr)
        assert.include(help.stdout, `$ mesh ${command.join(" ")}`)
        assert.include(help.stdout, `example: mesh ${command[0]}`)
        assert.notInclude(help.stdout, "\x1b[")
      }
    }))

  it.live("keys create prints only the key on stdout and names the hub it used on stderr", () =>
    Effect.gen(function* () {
      const { hub, adminKey } = yield* startHub()
      const created = yield* mesh(["keys", "create", "--owner", "ops"], { env: { MESH_HUB: hub.url, MESH_ADMIN_KEY: adminKey } })
      assert.strictEqual(created.status, 0, created.stderr)
      assert.match(created.stdout, /^\S+\n$/)
      assert.include(created.stderr, `for ops (user) on hub ${hub.url}`)
      const refused = yield* mesh(["keys", "create", "--owner", "ops", "--hub", hub.url, "--admin-key", "mk_wrong"])
      assert.strictEqual(refused.status, 1)
      assertOneLine(refused.stderr)
      assert.include(refused.stderr, "INVALID_API_KEY")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
