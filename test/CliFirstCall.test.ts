/**
 * What a newcomer meets on the way to a first paid call, as processes of the built `mesh`: the hub's banner naming the
 * next commands, mandate kinds explained in `--help` and in the refusal of a kind `issue` does not make, bad targets
 * and empty mandates refused before anything is sent, refusals a flag fixes naming the flag, and an agent that
 * refuses a present-but-empty mandate field instead of taking it for none.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runMesh, startMeshAgent } from "./support/meshCli.js"
import { spawnHub } from "./support/meshHub.js"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "mesh-first-call-"))

/** One line of `mesh: CODE: …`, no schema tree and no JSON dump. */
const assertOneLine = (text: string, code: string) => {
  const lines = text.trim().split("\n")
  assert.strictEqual(lines.length, 1, text)
  assert.match(lines[0]!, new RegExp(`^mesh: ${code}: `))
  assert.notInclude(text, "Expected")
  assert.notInclude(text, "{\"_tag\"")
}

const echo = path.join(process.cwd(), "examples/echo-agent.ts")

describe("the first paid call, from the command line", () => {
  it.scopedLive("the hub's banner ends with the two commands to run next, naming its own URL", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const hub = yield* spawnHub(path.join(dir, "hub.db"))
      // The banner's last lines follow the database line the spawner waits for.
      const out = yield* Effect.sync(hub.out).pipe(
        Effect.filterOrFail((o) => o.includes("--register")),
        Effect.retry(Schedule.spaced(Duration.millis(50)).pipe(Schedule.upTo(Duration.seconds(10))))
      )
      const next = out.slice(out.indexOf("next, in another shell"))
      assert.include(next, `mesh keys create --hub ${hub.url}`)
      assert.include(next, `mesh agent examples/echo-agent.ts --hub ${hub.url}`)
    }))

  it.live("mandate issue --help explains the kinds and their members; a kind issue does not make points to attenuate", () =>
    Effect.gen(function* () {
      const help = yield* runMesh(["mandate", "issue", "--help"])
      assert.strictEqual(help.status, 0, help.stderr)
      assert.include(help.stdout, "cart and payment are cut from an intent with `mesh mandate attenuate`")
      for (const member of ["intent: spendLimitUsd", "allowedMerchants", "task: allowed", "model-budget: token_budget, cost_budget_usd"]) assert.include(help.stdout, member)
      const cut = yield* runMesh(["mandate", "attenuate", "--help"])
      for (const member of ["cart: spendLimitUsd", "payment: amountUsd", "merchant (name, required"]) assert.include(cut.stdout, member)

      const dir = tempDir()
      const key = path.join(dir, "alice.identity.json")
      assert.strictEqual((yield* runMesh(["keygen", "alice", "--out", key])).status, 0)
      for (const kind of ["payment", "cart"]) {
        const wrong = yield* runMesh(["mandate", "issue", "--identity", key, "--to", "did:mesh:bob", "--kind", kind, "--constraints", "{\"amountUsd\":\"5.00\"}"])
        assert.notStrictEqual(wrong.status, 0)
        assertOneLine(wrong.stderr, "INVALID_ARGUMENT")
        assert.include(wrong.stderr, `mesh mandate attenuate <intent token> --kind ${kind}`)
      }
      const unknown = yield* runMesh(["mandate", "issue", "--identity", key, "--to", "did:mesh:bob", "--kind", "intent", "--constraints", "{\"maxAmountUsd\":5}"])
      assert.notStrictEqual(unknown.status, 0)
      assert.include(unknown.stderr, "unknown member maxAmountUsd; allowed: spendLimitUsd, allowedMerchants")
      // The decimal string the docs give for USD is taken, and written in its canonical form.
      const issued = yield* runMesh(["mandate", "issue", "--identity", key, "--to", "did:mesh:bob", "--kind", "intent", "--constraints", "{\"spendLimitUsd\":\"5.00\"}"])
      assert.strictEqual(issued.status, 0, issued.stderr)
      const claims = JSON.parse(Buffer.from(issued.stdout.trim().split(".")[1]!, "base64url").toString("utf8"))
      assert.deepStrictEqual(claims.cns, { spendLimitUsd: 5 })
    }))

  it.scopedLive("an empty target or mandate is refused before sending; refusals a flag fixes name the flag; the agent refuses an empty mandate", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      // Nothing listens on port 9: a command that got as far as sending would say AGENT_UNREACHABLE instead.
      const emptyTarget = yield* runMesh(["call", "", "hi", "--hub", "http://127.0.0.1:9"])
      assert.notStrictEqual(emptyTarget.status, 0)
      assertOneLine(emptyTarget.stderr, "INVALID_ARGUMENT")
      assert.include(emptyTarget.stderr, "the didHash is empty")
      const emptyMandate = yield* runMesh(["call", "http://127.0.0.1:9", "hi", "--mandate", ""])
      assert.notStrictEqual(emptyMandate.status, 0)
      assertOneLine(emptyMandate.stderr, "INVALID_ARGUMENT")
      assert.include(emptyMandate.stderr, "--mandate is empty")
      const garbled = yield* runMesh(["call", "http://127.0.0.1:9", "hi", "--mandate", "not-a-token"])
      assert.notStrictEqual(garbled.status, 0)
      assert.notInclude(garbled.stderr, "AGENT_UNREACHABLE")

      // A mesh-sig agent resolves callers' keys through a hub; none is needed to refuse an unsigned call.
      const signed = yield* startMeshAgent([echo, "--port", "0", "--auth", "mesh-sig", "--hub", "http://127.0.0.1:9", "--db", path.join(dir, "signed.db")])
      const bearer = yield* startMeshAgent([echo, "--port", "0", "--auth", "bearer", "--bearer-token", "tok-first-call", "--db", path.join(dir, "bearer.db")])
      assert.isDefined(signed.url, signed.out())
      assert.isDefined(bearer.url, bearer.out())

      const unsigned = yield* runMesh(["call", signed.url!, "hi"])
      assert.notStrictEqual(unsigned.status, 0)
      assertOneLine(unsigned.stderr, "SIGNATURE_MISSING")
      assert.include(unsigned.stderr, "pass --identity <file>")
      const noToken = yield* runMesh(["call", bearer.url!, "hi"])
      assert.notStrictEqual(noToken.status, 0)
      assertOneLine(noToken.stderr, "AUTH_REQUIRED")
      assert.include(noToken.stderr, "pass --bearer-token <token>")
      const withToken = yield* runMesh(["call", bearer.url!, "hi", "--bearer-token", "tok-first-call"])
      assert.strictEqual(withToken.status, 0, withToken.stderr)

      // Straight to the agent, past the command's own check: a present-but-empty mandate is MALFORMED, not "no mandate".
      const res = yield* Effect.promise(() =>
        fetch(`${bearer.url}/v1/run`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer tok-first-call" },
          body: JSON.stringify({ message: "hi", mandate: " " })
        })
      )
      const body = (yield* Effect.promise(() => res.json())) as { code: string; reason?: string }
      assert.deepStrictEqual([res.status, body.code, body.reason], [403, "MANDATE_INVALID", "MALFORMED"])
    }))
})
