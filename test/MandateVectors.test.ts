import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import { buildVectors, VECTORS_PATH } from "../scripts/mandate-vectors.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeStatic, type ResolvedKey } from "../src/core/KeyResolver.js"
import { verifyMandate } from "../src/core/Mandate.js"
import { fromHex } from "../src/core/internal/bytes.js"

interface VectorFile {
  readonly defaultTime: number
  readonly keys: Record<string, { readonly publicKeyHex: string }>
  readonly vectors: ReadonlyArray<{
    readonly name: string
    readonly token: string
    readonly valid: boolean
    readonly reason?: string
    readonly time?: number
    readonly expectedGrantee?: string
    readonly keyVersions?: Record<string, number>
    readonly omitKeys?: ReadonlyArray<string>
  }>
}

// The committed file is the reference; it is read, never regenerated, by this test.
const file = JSON.parse(fs.readFileSync(VECTORS_PATH, "utf8")) as VectorFile

describe("mandate vectors (test/vectors/mandates.json)", () => {
  for (const [layerName, layer] of [["native", KeysNative.layer], ["noble", Keys.noble]] as const) {
    for (const v of file.vectors) {
      it.effect(`${layerName}: ${v.name} → ${v.valid ? "valid" : v.reason}`, () =>
        Effect.gen(function* () {
          const map: Record<string, ResolvedKey> = {}
          for (const [did, k] of Object.entries(file.keys)) {
            if (v.omitKeys?.includes(did)) continue
            map[did] = { publicKey: fromHex(k.publicKeyHex), keyVersion: v.keyVersions?.[did] ?? 1 }
          }
          yield* TestClock.setTime((v.time ?? file.defaultTime) * 1000)
          const exit = yield* Effect.exit(verifyMandate(v.token, makeStatic(map), v.expectedGrantee === undefined ? {} : { expectedGrantee: v.expectedGrantee }))
          if (v.valid) assert.isTrue(Exit.isSuccess(exit), JSON.stringify(exit))
          else {
            assert.isTrue(Exit.isFailure(exit))
            const e = yield* Effect.flip(exit)
            assert.strictEqual(e.reason, v.reason, e.message)
          }
        }).pipe(Effect.provide(layer)))
    }
  }

  it.effect("the committed file is exactly what scripts/mandate-vectors.ts builds (encoding has not drifted)", () =>
    Effect.gen(function* () {
      const rebuilt = yield* buildVectors
      assert.deepStrictEqual(JSON.parse(JSON.stringify(rebuilt)), file)
    }).pipe(Effect.provide(KeysNative.layer)))
})
