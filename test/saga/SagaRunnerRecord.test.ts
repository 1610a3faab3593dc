/**
 * A hub with sagas registers its runner's DID and key when it starts (or rotates the DID to the runner's key), and a
 * saga whose runner key does not resolve is refused before anything is allocated (SAGA_RUNNER_UNAVAILABLE); a hub
 * without sagas answers the saga paths with SAGAS_DISABLED.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { didHash, generateDid } from "../../src/core/Did.js"
import { makeStatic } from "../../src/core/KeyResolver.js"
import { issueIntentMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { plan } from "../../src/saga/Saga.js"
import * as SagaHub from "../../src/saga/SagaHub.js"
import { request, startHub, tempDatabase } from "../hub/support.js"

const NO_LAG_SHEDDING = { maxEventLoopLagMs: Infinity }

describe("the saga runner's registry record", () => {
  it.scoped("start registers the runner as a caller; a restart with the same key leaves it, with another key rotates it", () =>
    Effect.gen(function* () {
      const database = tempDatabase()
      const runner = yield* generateDid("saga-runner")
      const first = yield* Effect.scoped(Effect.gen(function* () {
        const hub = yield* SagaHub.start({ database, serving: NO_LAG_SHEDDING, memoryEngine: true, runner: { did: runner.did, privateKey: runner.privateKey } })
        const record = yield* request(`${hub.url}/v1/agents/${didHash(runner.did)}`, "GET")
        return { action: hub.runnerRecord, record }
      }))
      assert.strictEqual(first.action, "registered")
      assert.strictEqual(first.record.status, 200)
      assert.strictEqual(first.record.body.publicKeyB64, runner.publicKey)
      assert.strictEqual(first.record.body.endpointUrl, "")

      const again = yield* Effect.scoped(Effect.map(
        SagaHub.start({ database, serving: NO_LAG_SHEDDING, memoryEngine: true, runner: { did: runner.did, privateKey: runner.privateKey } }),
        (h) => h.runnerRecord
      ))
      assert.strictEqual(again, "unchanged")

      const rekeyed = yield* generateDid("saga-runner")
      const rotated = yield* Effect.scoped(Effect.gen(function* () {
        const hub = yield* SagaHub.start({ database, serving: NO_LAG_SHEDDING, memoryEngine: true, runner: { did: rekeyed.did, privateKey: rekeyed.privateKey } })
        const record = yield* request(`${hub.url}/v1/agents/${didHash(runner.did)}`, "GET")
        return { action: hub.runnerRecord, record }
      }))
      assert.strictEqual(rotated.action, "rotated")
      assert.strictEqual(rotated.record.body.publicKeyB64, rekeyed.publicKey)
      assert.strictEqual(rotated.record.body.keyVersion, 2)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.effect("a saga whose runner key does not resolve is refused with SAGA_RUNNER_UNAVAILABLE before its agents are looked up", () =>
    Effect.gen(function* () {
      const runner = yield* generateDid("saga-runner")
      const buyer = yield* generateDid("buyer")
      const mandate = yield* issueIntentMandate({ grantorDid: buyer.did, granteeDid: runner.did, constraints: { spendLimitUsd: 10 }, privateKey: buyer.privateKey })
      const input = { mandate: mandate.token, steps: [{ name: "book", agentDid: "did:mesh:airline", capability: "book", params: {}, budgetUsd: 1, compensation: { capability: "cancel" } }] }
      let lookedUp = 0
      const options = {
        caller: buyer.did,
        runner: runner.did,
        findAgent: () => Effect.sync(() => void lookedUp++)
      }
      const withoutRunner = makeStatic({ [buyer.did]: { publicKey: buyer.publicKeyBytes, keyVersion: 1 } })
      const refused = yield* Effect.flip(plan(input as never, { ...options, resolver: withoutRunner }))
      assert.strictEqual(refused.code, "SAGA_RUNNER_UNAVAILABLE")
      assert.strictEqual(lookedUp, 0)
      const withRunner = makeStatic({ [buyer.did]: { publicKey: buyer.publicKeyBytes, keyVersion: 1 }, [runner.did]: { publicKey: runner.publicKeyBytes, keyVersion: 1 } })
      const next = yield* Effect.flip(plan(input as never, { ...options, resolver: withRunner }))
      // Past the runner check: the unknown agent is what stops it now.
      assert.strictEqual(next.code, "AGENT_NOT_FOUND")
      assert.strictEqual(lookedUp, 1)
    }).pipe(Effect.provide(KeysNative.layer)))

  it.scoped("a hub without a saga runner answers every saga path with 503 SAGAS_DISABLED naming --saga-identity", () =>
    Effect.gen(function* () {
      const { hub } = yield* startHub()
      for (const [method, path, body] of [["POST", "/v1/sagas", { mandate: "x", steps: [] }], ["GET", "/v1/sagas", undefined], ["GET", "/v1/sagas/saga_x", undefined], ["GET", "/v1/sagas/saga_x/events", undefined]] as const) {
        const r = yield* request(`${hub.url}${path}`, method, body)
        assert.strictEqual(r.status, 503, `${method} ${path}: ${JSON.stringify(r.body)}`)
        assert.strictEqual(r.body.code, "SAGAS_DISABLED")
        assert.include(String(r.body.message), "--saga-identity")
        assert.isString(r.body.correlationId)
      }
    }).pipe(Effect.provide(KeysNative.layer)))
})
