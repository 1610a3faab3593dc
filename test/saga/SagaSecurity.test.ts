/**
 * The saga surface under attack from outside: a step agent reusing the caller's mandate, a registered endpoint on the
 * hub's own network, a step answered without a receipt, one caller flooding the scheduler, a step agent reading
 * another's results, and a runner made to act for whoever names a capability. Each was possible before the rules of
 * docs/sagas.md §1, §3 and §6 and docs/security.md §2.9.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as AgentServer from "../../src/agent/AgentServer.js"
import type { RunInput } from "../../src/agent/Handler.js"
import * as CommitToken from "../../src/core/CommitToken.js"
import { generateDid } from "../../src/core/Did.js"
import { issueIntentMandate } from "../../src/core/Mandate.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { request } from "../hub/support.js"
import { countingListener } from "../support/countingListener.js"
import { countingHandler, register, signedRequest, step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** Waits until the saga the buyer started has ended, reading it as the buyer. */
const ended = (url: string, signer: Parameters<typeof signedRequest>[2]) =>
  Effect.gen(function* () {
    while (true) {
      const r = yield* signedRequest(url, "GET", signer)
      if (r.status === 200 && r.body.status !== "running") return r.body
      yield* Effect.sleep("50 millis")
    }
  })

describe("saga attacks", { timeout: 60_000 }, () => {
  it.live("a step agent holding the caller's mandate cannot start a saga on it: unsigned is 401, signed by another than the grantor 403", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }] })
        // Every step agent holds this token: its payment mandate carries it whole in `prf`.
        const mandate = yield* w.mandate()
        const steps = [step(w.agents, "drain", "airline", "book-flight", 100)]
        const unsigned = yield* request(`${w.hub.url}/v1/sagas`, "POST", { mandate, steps })
        assert.deepStrictEqual([unsigned.status, unsigned.body.code], [401, "SIGNATURE_MISSING"])
        const byAgent = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.agents.airline!, { mandate, steps })
        assert.deepStrictEqual([byAgent.status, byAgent.body.code], [403, "MANDATE_GRANTOR_MISMATCH"])
        // Nothing ran and nothing was charged; the grantor's own request is accepted.
        assert.strictEqual(w.effects.size, 0)
        const byGrantor = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: [{ ...steps[0]!, budgetUsd: 1 }] })
        assert.strictEqual(byGrantor.status, 202, byGrantor.text)
      })
    ))

  it.live("a registered endpoint on the hub's own network is never called by default; the step fails ADDRESS_NOT_PUBLIC without echoing the address", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [], outboundUrls: "public" })
        const internal = yield* countingListener({ secret: "internal admin answer" })
        const insider = yield* generateDid("insider")
        yield* register(w.client, insider, `${internal.url}/json?x=`)
        const mandate = yield* w.mandate()
        const steps = [{ name: "probe", agentDid: insider.did, capability: "anything", params: { x: "y" }, budgetUsd: 5 }]
        const started = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps })
        assert.strictEqual(started.status, 202, started.text)
        const end = yield* ended(`${w.hub.url}/v1/sagas/${String(started.body.sagaId)}`, w.buyer)
        assert.deepStrictEqual([end.status, end.errorCode], ["compensated", "ADDRESS_NOT_PUBLIC"])
        const only = (end.steps as ReadonlyArray<Record<string, unknown>>)[0]!
        assert.deepStrictEqual([only.result, only.usedUsd], [null, "0"])
        assert.notInclude(String(only.error), "127.0.0.1")
        // The failure names the flag that lets a hub reach agents on its own networks.
        assert.include(String(only.error), "--outbound-urls any")
        assert.strictEqual(internal.hits(), 0)
      })
    ))

  it.live("a step answered without a commit token fails and compensates; nothing is charged", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }] })
        const receiptless = yield* countingListener({ message: "booked, trust me", sessionId: "s" })
        const liar = yield* generateDid("liar")
        yield* register(w.client, liar, receiptless.url)
        const mandate = yield* w.mandate()
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30, 12), { name: "hotel", agentDid: liar.did, capability: "book-hotel", budgetUsd: 50 }]
        const started = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps })
        const end = yield* ended(`${w.hub.url}/v1/sagas/${String(started.body.sagaId)}`, w.buyer)
        assert.deepStrictEqual([end.status, end.failedStep, end.errorCode], ["compensated", "hotel", "COMMIT_INVALID"])
        const [flight, hotel] = end.steps as ReadonlyArray<Record<string, unknown>>
        assert.deepStrictEqual([flight!.status, hotel!.status, hotel!.usedUsd, hotel!.commitToken], ["compensated", "failed", "0", null])
        assert.strictEqual(receiptless.hits(), 1)
        // The pool holds only what the flight used, with its receipt.
        const pool = yield* w.pool(String(end.poolId))
        assert.strictEqual(pool.allocatedUsd, 12)
      })
    ))

  it.live("one caller cannot flood the scheduler: beyond its bound it gets 429 with Retry-After, beyond the hub's 503, and /health keeps answering", () =>
    provide(
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const w = yield* world({
          agents: [{ name: "slow" }],
          maxRunningPerCaller: 3,
          maxRunning: 4,
          handler: (effects, spec) => {
            const count = countingHandler(effects, spec)
            return async (input: RunInput) => {
              await Effect.runPromise(Deferred.await(gate))
              return count(input)
            }
          }
        })
        const mandate = yield* w.mandate(1000)
        const steps = Array.from({ length: 32 }, (_, i) => step(w.agents, `s${i}`, "slow", "work", 1))
        const submissions = yield* Effect.forEach(Array.from({ length: 20 }, () => 0), () => signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps }), {
          concurrency: 5
        })
        const accepted = submissions.filter((s) => s.status === 202)
        const limited = submissions.filter((s) => s.status === 429)
        assert.strictEqual(accepted.length, 3, JSON.stringify(submissions.map((s) => s.status)))
        assert.strictEqual(limited.length, 17)
        for (const l of limited) {
          assert.strictEqual(l.body.code, "RATE_LIMITED")
          assert.isAbove(Number(l.headers.get("retry-after")), 0)
        }
        // Another caller still gets the hub's last slot, and then the hub as a whole is full.
        const other = yield* generateDid("other-buyer")
        yield* register(w.client, other, "http://127.0.0.1:9/other")
        const otherMandate = (yield* issueIntentMandate({ grantorDid: other.did, granteeDid: w.runner.did, constraints: { spendLimitUsd: 1000 }, privateKey: other.privateKey })).token
        const fourth = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", other, { mandate: otherMandate, steps: steps.slice(0, 2) })
        assert.strictEqual(fourth.status, 202, fourth.text)
        const full = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", other, { mandate: otherMandate, steps: steps.slice(0, 2) })
        assert.deepStrictEqual([full.status, full.body.code], [503, "OVERLOADED"])
        assert.isAbove(Number(full.headers.get("retry-after")), 0)
        // Liveness, not speed: the hub answers /health while its sagas wait on their agents.
        const health = yield* Effect.promise(() => fetch(`${w.hub.url}/health`, { signal: AbortSignal.timeout(5_000) }).then((r) => r.status))
        assert.strictEqual(health, 200)
        yield* Deferred.succeed(gate, undefined)
        for (const a of [...accepted, fourth]) {
          const end = yield* ended(`${w.hub.url}/v1/sagas/${String(a.body.sagaId)}`, a === fourth ? other : w.buyer)
          assert.strictEqual(end.status, "committed")
        }
        // With the sagas ended, the caller may start again.
        const again = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: steps.slice(0, 1) })
        assert.strictEqual(again.status, 202, again.text)
      })
    ))

  it.live("a saga is read only by the one who started it: a step agent knowing the sagaId gets 404, an unsigned read 401", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel" }] })
        const mandate = yield* w.mandate()
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "hotel", "hotel", "book-hotel", 20)]
        const started = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps })
        const sagaId = String(started.body.sagaId)
        yield* ended(`${w.hub.url}/v1/sagas/${sagaId}`, w.buyer)
        // The hotel's agent learned the sagaId from its step's context.
        for (const path of [`/v1/sagas/${sagaId}`, `/v1/sagas/${sagaId}/events`]) {
          const foreign = yield* signedRequest(`${w.hub.url}${path}`, "GET", w.agents.hotel!)
          assert.deepStrictEqual([foreign.status, foreign.body.code], [404, "NOT_FOUND"], path)
          assert.notInclude(foreign.text, "commitToken")
          const anonymous = yield* request(`${w.hub.url}${path}`, "GET")
          assert.deepStrictEqual([anonymous.status, anonymous.body.code], [401, "SIGNATURE_MISSING"], path)
        }
        const own = yield* signedRequest(`${w.hub.url}/v1/sagas/${sagaId}`, "GET", w.buyer)
        assert.strictEqual(own.status, 200)
      })
    ))

  it.live("an agent that admits only the runner sees who asked (onBehalfOf, proven by the mandate chain); a compensation carries the step's receipt and reply, never the submitter's params", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [] })
        const seen: Array<{ readonly capability: string | undefined; readonly onBehalfOf: string | undefined; readonly context: Readonly<Record<string, unknown>> }> = []
        const bookings = new Map<string, string>()
        const airline = yield* generateDid("airline")
        const server = yield* AgentServer.make({
          name: "airline",
          did: airline.did,
          privateKey: airline.privateKey,
          auth: "mesh-sig",
          allowedCallers: [w.runner.did],
          hubUrl: w.hub.url,
          database: ":memory:",
          serving: { maxEventLoopLagMs: Infinity },
          handler: (input: RunInput) => {
            seen.push({ capability: input.capability, onBehalfOf: input.caller.onBehalfOf, context: input.context })
            const params = (input.context.params ?? {}) as { readonly bookingId?: string; readonly fail?: boolean }
            if (input.capability === "book-flight") {
              bookings.set(String(params.bookingId), input.caller.onBehalfOf ?? "nobody")
              return `booked ${String(params.bookingId)}`
            }
            if (input.capability === "cancel-book-flight") {
              // A cancellation as a forward step names a booking: only its owner may cancel it.
              const bookingId = params.bookingId ?? String(input.context.result).replace(/^booked /, "")
              if (bookings.get(bookingId) !== input.caller.onBehalfOf) throw new Error("not your booking")
              bookings.delete(bookingId)
              return `cancelled ${bookingId}`
            }
            throw new Error("fails on purpose")
          }
        })
        yield* register(w.client, airline, server.url)
        const flight = { name: "flight", agentDid: airline.did, capability: "book-flight", params: { bookingId: "B1" }, budgetUsd: 10, compensation: { capability: "cancel-book-flight" } }
        const boom = { name: "boom", agentDid: airline.did, capability: "explode", budgetUsd: 1 }
        const victim = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate: yield* w.mandate(), steps: [flight, boom] })
        const end = yield* ended(`${w.hub.url}/v1/sagas/${String(victim.body.sagaId)}`, w.buyer)
        assert.deepStrictEqual([end.status, (end.steps as ReadonlyArray<Record<string, unknown>>)[0]!.status], ["compensated", "compensated"])
        assert.strictEqual(seen[0]!.onBehalfOf, w.buyer.did)
        const undo = seen.find((s) => s.capability === "cancel-book-flight")!
        assert.strictEqual(undo.onBehalfOf, w.buyer.did)
        assert.isUndefined(undo.context.params)
        assert.strictEqual(undo.context.result, "booked B1")
        const receipt = yield* CommitToken.verify(String(undo.context.commitToken), airline.publicKeyBytes)
        assert.deepStrictEqual([receipt.sagaId, receipt.step, receipt.capability], [String(victim.body.sagaId), "flight", "book-flight"])

        // Another caller names someone else's booking as a forward step: the agent sees who asked and refuses.
        bookings.set("B2", w.buyer.did)
        const thief = yield* generateDid("thief")
        yield* register(w.client, thief, "http://127.0.0.1:9/thief")
        const thiefMandate = (yield* issueIntentMandate({ grantorDid: thief.did, granteeDid: w.runner.did, constraints: { spendLimitUsd: 100 }, privateKey: thief.privateKey })).token
        const cancelOther = { name: "cancel", agentDid: airline.did, capability: "cancel-book-flight", params: { bookingId: "B2" }, budgetUsd: 1 }
        const stolen = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", thief, { mandate: thiefMandate, steps: [cancelOther] })
        const stolenEnd = yield* ended(`${w.hub.url}/v1/sagas/${String(stolen.body.sagaId)}`, thief)
        assert.strictEqual(stolenEnd.status, "compensated")
        assert.strictEqual(bookings.get("B2"), w.buyer.did)

        // A compensation with params of the submitter's choosing is refused before anything runs.
        const withParams = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, {
          mandate: yield* w.mandate(),
          steps: [{ ...flight, compensation: { capability: "cancel-book-flight", params: { bookingId: "B2" } } }]
        })
        assert.deepStrictEqual([withParams.status, withParams.body.code], [400, "INVALID_REQUEST"])
      })
    ))
})
