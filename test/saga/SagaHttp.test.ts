import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as KeysNative from "../../src/node/KeysNative.js"
import { generateDid } from "../../src/core/Did.js"
import { register, signedRequest, step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** Reads a whole event stream (the saga's ends after its final event) into its frames, signed by `signer`. */
const readEvents = (url: string, signer: Parameters<typeof signedRequest>[2], headers: Record<string, string> = {}) =>
  Effect.map(signedRequest(url, "GET", signer, undefined, { accept: "text/event-stream", ...headers }), (res) => {
    const frames = res.text
      .split("\n\n")
      .filter((f) => f.trim().length > 0)
      .map((frame) => Object.fromEntries(frame.split("\n").map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trim()])))
    return { status: res.status, contentType: res.headers.get("content-type") ?? "", frames }
  })

describe("hub saga endpoints", () => {
  it.live("POST /v1/sagas answers 202 running; GET reads the end; the events stream from Last-Event-ID; /openapi.json lists the routes", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "hotel", failing: { "book-hotel": "always" } }] })
        const mandate = yield* w.mandate()
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), { ...step(w.agents, "hotel", "hotel", "book-hotel", 20), budgetUsd: "20.00" }]
        const started = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps })
        assert.strictEqual(started.status, 202, JSON.stringify(started.body))
        assert.strictEqual(started.body.status, "running")
        const sagaId = String(started.body.sagaId)

        const all = yield* readEvents(`${w.hub.url}/v1/sagas/${sagaId}/events`, w.buyer)
        assert.strictEqual(all.status, 200)
        assert.include(all.contentType, "text/event-stream")
        assert.deepStrictEqual(all.frames.map((f) => f.event), [
          "saga_started", "step_started", "step_committed", "step_started", "step_failed", "step_compensating", "step_compensated", "saga_compensated"
        ])
        assert.deepStrictEqual(all.frames.map((f) => Number(f.id)), all.frames.map((_, i) => i + 1))
        // A budget given as the decimal string Money reads is planned exactly and echoed in canonical form.
        const hotelStarted = all.frames.find((f) => f.event === "step_started" && JSON.parse(f.data ?? "{}").step === "hotel")
        assert.strictEqual(JSON.parse(hotelStarted?.data ?? "{}").data?.budgetUsd, "20")
        const rest = yield* readEvents(`${w.hub.url}/v1/sagas/${sagaId}/events`, w.buyer, { "last-event-id": "6" })
        assert.deepStrictEqual(rest.frames.map((f) => f.event), ["step_compensated", "saga_compensated"])

        const ended = yield* signedRequest(`${w.hub.url}/v1/sagas/${sagaId}`, "GET", w.buyer)
        assert.strictEqual(ended.status, 200)
        assert.deepStrictEqual([ended.body.status, ended.body.failedStep], ["compensated", "hotel"])

        const missing = yield* signedRequest(`${w.hub.url}/v1/sagas/saga_nope`, "GET", w.buyer)
        assert.deepStrictEqual([missing.status, missing.body.code], [404, "NOT_FOUND"])
        const noEvents = yield* signedRequest(`${w.hub.url}/v1/sagas/saga_nope/events`, "GET", w.buyer)
        assert.deepStrictEqual([noEvents.status, noEvents.body.code], [404, "NOT_FOUND"])
        const duplicate = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: [steps[0], steps[0]] })
        assert.deepStrictEqual([duplicate.status, duplicate.body.code], [400, "INVALID_REQUEST"])
        const over = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: [{ ...steps[0], budgetUsd: 1000 }] })
        assert.deepStrictEqual([over.status, over.body.code], [422, "LIMIT_EXCEEDED"])
        const overAsText = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: [{ ...steps[0], budgetUsd: "1000.00" }] })
        assert.deepStrictEqual([overAsText.status, overAsText.body.code], [422, "LIMIT_EXCEEDED"])
        const notUsd = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: [{ ...steps[0], budgetUsd: "thirty" }] })
        assert.strictEqual(notUsd.body.code, "INVALID_AMOUNT")
        const malformed = yield* signedRequest(`${w.hub.url}/v1/sagas`, "POST", w.buyer, { mandate, steps: [] })
        assert.deepStrictEqual([malformed.status, malformed.body.code], [400, "INVALID_REQUEST"])

        const doc = yield* signedRequest(`${w.hub.url}/openapi.json`, "GET", w.buyer)
        const paths = Object.keys(doc.body.paths as Record<string, unknown>)
        for (const p of ["/v1/sagas", "/v1/sagas/{sagaId}", "/v1/sagas/{sagaId}/events", "/v1/agents"]) assert.include(paths, p)
      })
    ))

  it.live("GET /v1/sagas lists the signer's own sagas newest first, a page at a time; another's are never listed", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }] })
        const mandate = yield* w.mandate()
        const ids: Array<string> = []
        for (const name of ["a", "b", "c"]) {
          const ended = yield* w.hub.scheduler.run(w.buyer.did, { mandate, steps: [step(w.agents, name, "airline", "book-flight", 1)] })
          ids.push(ended.sagaId)
        }
        const first = yield* signedRequest(`${w.hub.url}/v1/sagas?limit=2`, "GET", w.buyer)
        assert.strictEqual(first.status, 200, JSON.stringify(first.body))
        const items = first.body.items as ReadonlyArray<Record<string, unknown>>
        // Sagas created in one millisecond are ordered by id, so newest first is checked as the set of the pages.
        assert.strictEqual(items.length, 2)
        assert.deepInclude(items[0], { status: "committed", steps: 1, failedStep: null, errorCode: null })
        assert.match(String(items[0]!.createdAt), /^\d{4}-\d\d-\d\dT/)
        assert.isString(first.body.nextCursor)
        const second = yield* signedRequest(`${w.hub.url}/v1/sagas?limit=2&cursor=${encodeURIComponent(String(first.body.nextCursor))}`, "GET", w.buyer)
        assert.strictEqual(second.status, 200, JSON.stringify(second.body))
        const rest = second.body.items as ReadonlyArray<Record<string, unknown>>
        assert.strictEqual(rest.length, 1)
        assert.isNull(second.body.nextCursor)
        assert.sameMembers([...items, ...rest].map((i) => String(i.sagaId)), ids)
        const created = [...items, ...rest].map((i) => Date.parse(String(i.createdAt)))
        assert.deepStrictEqual(created, [...created].sort((x, y) => y - x))

        // Another DID registered on the hub lists none of them.
        const stranger = yield* generateDid("stranger")
        yield* register(w.client, stranger, "http://127.0.0.1:9/stranger")
        const foreign = yield* signedRequest(`${w.hub.url}/v1/sagas`, "GET", stranger)
        assert.deepStrictEqual([foreign.status, foreign.body.items, foreign.body.nextCursor], [200, [], null])

        const badCursor = yield* signedRequest(`${w.hub.url}/v1/sagas?cursor=nope`, "GET", w.buyer)
        assert.deepStrictEqual([badCursor.status, badCursor.body.code], [400, "INVALID_REQUEST"])
        const unsigned = yield* Effect.promise(() => fetch(`${w.hub.url}/v1/sagas`).then((r) => r.status))
        assert.strictEqual(unsigned, 401)
      })
    ))
})
