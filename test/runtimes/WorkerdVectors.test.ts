/**
 * The core on a runtime without node:crypto: the core entry and the protocol's vectors bundled for the neutral
 * platform (no import left) and checked inside workerd without `nodejs_compat`, with `Keys.noble`; Web Crypto's
 * Ed25519 there reproduces RFC 8032 too. Speeds are bench/runtimes.ts, never asserted here.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import envelopes from "../vectors/envelopes.json" with { type: "json" }
import identities from "../vectors/identities.json" with { type: "json" }
import rfc8032 from "../vectors/rfc8032-ed25519.json" with { type: "json" }
import { bundle, freePort, startWorkerd } from "./support.js"

interface Verdict {
  readonly name: string
  readonly ok: boolean
  readonly detail?: string
}

describe("the core's vectors inside workerd", () => {
  it.live("the core entry bundles for the neutral platform with no import left", () =>
    Effect.gen(function* () {
      const core = yield* Effect.promise(() => bundle("src/core/index.ts"))
      assert.deepStrictEqual(core.imports, [])
      const runner = yield* Effect.promise(() => bundle("test/runtimes/workerd/vectors-worker.ts"))
      assert.deepStrictEqual(runner.imports, [])
    }))


  it.live("every vector passes with Keys.noble, without nodejs_compat; Web Crypto's Ed25519 reproduces RFC 8032", () =>
    Effect.gen(function* () {
      const runner = yield* Effect.promise(() => bundle("test/runtimes/workerd/vectors-worker.ts"))
      const port = yield* Effect.promise(freePort)
      const workerd = yield* Effect.acquireRelease(
        Effect.promise(() => startWorkerd(port, [["vectors.js", runner.code]], {}, [])),
        (w) => Effect.promise(w.stop)
      )
      const result = (yield* Effect.promise(() => fetch(`${workerd.url}/`).then((r) => r.json()))) as {
        noble: ReadonlyArray<Verdict>
        webCrypto: { rfc8032: ReadonlyArray<Verdict>; speccheck: ReadonlyArray<boolean | string> }
        hasNodeCrypto: boolean
      }
      assert.isFalse(result.hasNodeCrypto)
      const expected = rfc8032.vectors.length + 1 + identities.identities.length + identities.proofs.length + 1 + envelopes.envelopes.length + 1
      assert.strictEqual(result.noble.length, expected)
      assert.deepStrictEqual(result.noble.filter((v) => !v.ok), [])
      assert.deepStrictEqual(result.webCrypto.rfc8032.filter((v) => !v.ok), [])
      assert.strictEqual(result.webCrypto.rfc8032.length, rfc8032.vectors.length)
    }).pipe(Effect.scoped), 60_000)
})
