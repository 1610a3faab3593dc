/**
 * The hub-backed `KeyResolver` (MeshClient.keyResolver) as an agent uses it for every signed request: a key is asked
 * of the hub once per `keyCacheTtlMs`, and a cached key is answered without a fiber, so the request stays on the
 * calling stack (RunSync.ts).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import { generateDid } from "../../src/core/Did.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import * as RunSync from "../../src/http/RunSync.js"
import * as KeysNative from "../../src/node/KeysNative.js"

describe("the hub-backed key resolver's cache", () => {
  it.effect("asks the hub once per TTL, and answers a cached key without a fiber", () =>
    Effect.gen(function* () {
      const alice = yield* generateDid("alice")
      let asked = 0
      const hub = HttpClient.make((request) =>
        Effect.sync(() => {
          asked++
          return HttpClientResponse.fromWeb(
            request,
            new Response(JSON.stringify({ did: alice.did, keyVersion: 1, document: alice.document }), { headers: { "content-type": "application/json" } })
          )
        })
      )
      const client = yield* MeshClient.make({ hubUrl: "http://hub.invalid", keyCacheTtlMs: 30_000, retry: { times: 0 } }).pipe(
        Effect.provideService(HttpClient.HttpClient, hub)
      )
      assert.deepStrictEqual((yield* client.keyResolver.resolve(alice.did)).publicKey, alice.publicKeyBytes)
      const cached = RunSync.run(client.keyResolver.resolve(alice.did), () => RunSync.MISSING)
      assert.isTrue(Exit.isExit(cached) && Exit.isSuccess(cached), "a cached key needs no fiber")
      yield* TestClock.adjust("29 seconds")
      yield* client.keyResolver.resolve(alice.did)
      assert.strictEqual(asked, 1)
      yield* TestClock.adjust("1 second")
      yield* client.keyResolver.resolve(alice.did)
      assert.strictEqual(asked, 2)
    }).pipe(Effect.provide(KeysNative.layer)))
})
