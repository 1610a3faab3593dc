/**
 * The commands of one's own identity and of human gates, as a user runs them (the built binary, as processes):
 * `mesh register` a caller-only identity, `whoami`, calling a mesh-sig agent as that caller, `agents rm`;
 * `mesh mandate attenuate` as someone else refused at once; and a pause printed by `mesh call` answered with
 * `mesh approve` (and `--deny`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { IdentityFile } from "../src/cli/Cli.js"
import { type Did, didHash } from "../src/core/Did.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { startHub } from "./hub/support.js"
import { runMesh as mesh, startMeshAgent } from "./support/meshCli.js"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "mesh-cli-id-"))

const keygen = (dir: string, name: string) =>
  Effect.gen(function* () {
    const file = path.join(dir, `${name}.identity.json`)
    const r = yield* mesh(["keygen", name, "--namespace", "acme", "--out", file])
    assert.strictEqual(r.status, 0, r.stderr)
    const identity = JSON.parse(fs.readFileSync(file, "utf8")) as IdentityFile
    return { file, identity, hash: didHash(identity.did as Did) }
  })

describe("mesh register, whoami, agents rm, approve", () => {
  it.live("a caller registered with mesh register calls a mesh-sig agent; whoami says so; agents rm removes it", () =>
    Effect.gen(function* () {
      const { hub, client } = yield* startHub()
      const dir = tempDir()
      const alice = yield* keygen(dir, "alice")
      const echo = yield* keygen(dir, "echo")
      const aliceKey = yield* client.createApiKey({ owner: alice.identity.did })
      const echoKey = yield* client.createApiKey({ owner: echo.identity.did })
      const agent = yield* startMeshAgent(["examples/echo-agent.ts", "--port", "0", "--db", path.join(dir, "echo.db"), "--identity", echo.file, "--hub", hub.url, "--api-key", echoKey.apiKey, "--register", "--auth", "mesh-sig", "--log-level", "warning"])
      assert.isString(agent.url, agent.out())

      const unknown = yield* mesh(["whoami", "--identity", alice.file, "--hub", hub.url])
      assert.strictEqual(unknown.status, 0, unknown.stderr)
      assert.include(unknown.stdout, `didHash  ${alice.hash}`)
      assert.include(unknown.stdout, "not registered")
      const refused = yield* mesh(["call", echo.hash, "hello", "--identity", alice.file, "--hub", hub.url])
      assert.strictEqual(refused.status, 1)
      assert.include(refused.stderr, "KEY_NOT_FOUND")

      const registered = yield* mesh(["register", "--identity", alice.file, "--hub", hub.url, "--api-key", aliceKey.apiKey])
      assert.strictEqual(registered.status, 0, registered.stderr)
      assert.include(registered.stdout, `${alice.hash}  ${alice.identity.did}  registered on ${hub.url} (a caller: no endpoint)`)
      const again = yield* mesh(["register", "--identity", alice.file, "--hub", hub.url, "--api-key", aliceKey.apiKey])
      assert.strictEqual(again.status, 0, again.stderr)
      assert.include(again.stdout, "already registered")
      const me = yield* mesh(["whoami", "--identity", alice.file, "--hub", hub.url, "--json"])
      assert.strictEqual(me.status, 0, me.stderr)
      const shown = JSON.parse(me.stdout)
      assert.strictEqual(shown.registration, "registered")
      assert.strictEqual(shown.endpointUrl, null)
      assert.strictEqual(shown.keyVersion, 1)

      const call = yield* mesh(["call", echo.hash, "hello", "--identity", alice.file, "--hub", hub.url, "--session", "s1"])
      assert.strictEqual(call.status, 0, call.stderr)
      assert.strictEqual(call.stdout, "echo: hello (session s1)\n")
      const callingAlice = yield* mesh(["call", alice.hash, "hello", "--hub", hub.url])
      assert.strictEqual(callingAlice.status, 1)
      assert.include(callingAlice.stderr, "AGENT_NOT_CALLABLE")

      // Another DID's key cannot remove alice; her own key and identity can.
      const notHers = yield* mesh(["agents", "rm", alice.hash, "--identity", alice.file, "--hub", hub.url, "--api-key", echoKey.apiKey])
      assert.strictEqual(notHers.status, 1)
      assert.include(notHers.stderr, "NOT_OWNER")
      const removed = yield* mesh(["agents", "rm", alice.hash, "--identity", alice.file, "--hub", hub.url, "--api-key", aliceKey.apiKey])
      assert.strictEqual(removed.status, 0, removed.stderr)
      assert.include(removed.stdout, `removed ${alice.hash}`)
      const gone = yield* mesh(["whoami", "--identity", alice.file, "--hub", hub.url])
      assert.include(gone.stdout, "not registered")
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)),
    // A dozen processes one after another, one an agent loading TypeScript: a limit on a hang, not a figure.
    180_000)

  it.live("mandate attenuate with an identity that is not the parent's grantee exits 1 with GRANTEE_MISMATCH and prints no token", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const alice = yield* keygen(dir, "alice")
      const bot = yield* keygen(dir, "bot")
      const mallory = yield* keygen(dir, "mallory")
      const issued = yield* mesh(["mandate", "issue", "--identity", alice.file, "--to", bot.identity.did, "--kind", "task", "--constraints", "{\"allowed\":[\"search\"],\"maxDelegationDepth\":1}"])
      assert.strictEqual(issued.status, 0, issued.stderr)
      const token = issued.stdout.trim()
      const constraints = "{\"allowed\":[\"search\"],\"maxDelegationDepth\":0}"
      const stolen = yield* mesh(["mandate", "attenuate", token, "--identity", mallory.file, "--to", mallory.identity.did, "--kind", "task", "--constraints", constraints])
      assert.strictEqual(stolen.status, 1)
      assert.strictEqual(stolen.stdout, "")
      assert.include(stolen.stderr, "GRANTEE_MISMATCH")
      const held = yield* mesh(["mandate", "attenuate", token, "--identity", bot.file, "--to", mallory.identity.did, "--kind", "task", "--constraints", constraints])
      assert.strictEqual(held.status, 0, held.stderr)
    }),
    90_000)

  it.live("a pause printed by mesh call names mesh approve, which resumes the task; --deny ends it", () =>
    Effect.gen(function* () {
      const { hub, client } = yield* startHub()
      const dir = tempDir()
      const user = yield* keygen(dir, "user")
      const assistant = yield* keygen(dir, "assistant")
      const userKey = yield* client.createApiKey({ owner: user.identity.did })
      const assistantKey = yield* client.createApiKey({ owner: assistant.identity.did })
      assert.strictEqual((yield* mesh(["register", "--identity", user.file, "--hub", hub.url, "--api-key", userKey.apiKey])).status, 0)
      const agent = yield* startMeshAgent(["examples/human-gate.ts", "--port", "0", "--db", path.join(dir, "assistant.db"), "--identity", assistant.file, "--hub", hub.url, "--api-key", assistantKey.apiKey, "--register", "--auth", "mesh-sig", "--log-level", "warning"])
      assert.isString(agent.url, agent.out())
      const issued = yield* mesh(["mandate", "issue", "--identity", user.file, "--to", assistant.identity.did, "--kind", "task", "--constraints", "{\"allowed\":[\"send_email\"],\"humanGates\":[\"send_email\"],\"maxDelegationDepth\":0}"])
      assert.strictEqual(issued.status, 0, issued.stderr)
      const mandate = issued.stdout.trim()

      const pauseOf = (text: string) => {
        const m = /mesh approve (\S+) --agent (\S+) --capability (\S+) --hub (\S+) --identity /.exec(text)
        assert.isNotNull(m, text)
        return { taskId: m![1]!, agent: m![2]!, capability: m![3]!, hub: m![4]! }
      }
      const paused = yield* mesh(["call", assistant.hash, "lunch at noon?", "--identity", user.file, "--mandate", mandate, "--hub", hub.url])
      assert.strictEqual(paused.status, 0, paused.stderr)
      assert.include(paused.stdout, "paused at a human gate: send_email")
      const pause = pauseOf(paused.stdout)
      assert.deepStrictEqual([pause.agent, pause.capability, pause.hub], [assistant.hash, "send_email", hub.url])

      const approved = yield* mesh(["approve", pause.taskId, "--agent", pause.agent, "--capability", pause.capability, "--hub", pause.hub, "--identity", user.file])
      assert.strictEqual(approved.status, 0, approved.stderr)
      assert.strictEqual(approved.stdout, "sent \"lunch at noon?\" to bob\n")
      const twice = yield* mesh(["approve", pause.taskId, "--agent", pause.agent, "--capability", pause.capability, "--hub", pause.hub, "--identity", user.file])
      assert.strictEqual(twice.status, 1)
      assert.include(twice.stderr, "TASK_ALREADY_RESUMED")

      const second = pauseOf((yield* mesh(["call", assistant.hash, "dinner?", "--identity", user.file, "--mandate", mandate, "--hub", hub.url])).stdout)
      const denied = yield* mesh(["approve", second.taskId, "--agent", second.agent, "--capability", second.capability, "--hub", second.hub, "--identity", user.file, "--deny"])
      assert.strictEqual(denied.status, 0, denied.stderr)
      assert.include(denied.stdout, `denied: task ${second.taskId}`)
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)),
    180_000)
})
