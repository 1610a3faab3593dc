/**
 * `SagaStore.list`, the listing under `GET /v1/sagas`, on both SQLite and Postgres: one caller's sagas newest first,
 * a page at a time, resumed from `nextCursor` without repeating or skipping any; another caller's never listed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SagaStore from "../../src/saga/SagaStore.js"
import * as Database from "../../src/sql/Database.js"
import { tempDatabase } from "../hub/support.js"
import { describePostgres, probeNow, scopedDatabase } from "../support/postgres.js"

await probeNow()

const storeOn = (url: string) =>
  Effect.map(Layer.build(SagaStore.layer.pipe(Layer.provide(Database.layer(url)))), (ctx) => ctx.unsafeMap.get(SagaStore.SagaStore.key) as SagaStore.SagaStoreApi)

const plan = (steps: number) => ({
  mandate: "m",
  grantor: "did:mesh:buyer",
  steps: Array.from({ length: steps }, (_, i) => ({ name: `s${i}`, agentDid: "did:mesh:a", didHash: "h", endpointUrl: "http://127.0.0.1:9", capability: "c", params: {}, budgetMicros: 1, compensation: undefined }))
})

const listing = (url: string) =>
  Effect.gen(function* () {
    const store = yield* storeOn(url)
    // Created a few milliseconds apart, so newest first is an order of times, not only of ids.
    for (const [i, id] of ["saga_a", "saga_b", "saga_c", "saga_d"].entries()) {
      yield* store.create({ id, caller: "did:mesh:buyer", runner: "did:mesh:runner", poolId: `pool_${i}`, plan: plan(i + 1) })
      yield* Effect.sleep("3 millis")
    }
    yield* store.create({ id: "saga_x", caller: "did:mesh:other", runner: "did:mesh:runner", poolId: "pool_x", plan: plan(1) })
    yield* store.finish("saga_b", "compensated", "s1", "BUDGET_EXHAUSTED")

    const first = yield* store.list("did:mesh:buyer", 3)
    assert.deepStrictEqual(first.items.map((s) => s.sagaId), ["saga_d", "saga_c", "saga_b"])
    assert.deepStrictEqual(first.items.map((s) => s.steps), [4, 3, 2])
    assert.deepInclude(first.items[2], { status: "compensated", poolId: "pool_1", failedStep: "s1", errorCode: "BUDGET_EXHAUSTED" })
    assert.isString(first.nextCursor)
    const cursor = SagaStore.parseCursor(first.nextCursor!)
    assert.isDefined(cursor)
    const second = yield* store.list("did:mesh:buyer", 3, cursor)
    assert.deepStrictEqual(second.items.map((s) => s.sagaId), ["saga_a"])
    assert.isNull(second.nextCursor)
    // A page that ends exactly at the last saga says so: no cursor to an empty page.
    assert.isNull((yield* store.list("did:mesh:buyer", 4)).nextCursor)
    assert.deepStrictEqual((yield* store.list("did:mesh:other", 50)).items.map((s) => s.sagaId), ["saga_x"])
    assert.deepStrictEqual((yield* store.list("did:mesh:nobody", 50)).items, [])
  })

describe("saga listing", () => {
  it.scopedLive("on SQLite", () => listing(tempDatabase()))

  it("a cursor is read back only as the store writes it", () => {
    assert.deepStrictEqual(SagaStore.parseCursor(SagaStore.formatCursor({ createdAt: 1700000000000, id: "saga_Ab-_9" })), { createdAt: 1700000000000, id: "saga_Ab-_9" })
    for (const bad of ["", "nope", "1.notasaga", "x.saga_a", "1.saga_a' OR 1=1"]) assert.isUndefined(SagaStore.parseCursor(bad), bad)
  })
})

describePostgres("saga listing on Postgres", () => {
  it.scopedLive("the same pages as on SQLite", () => Effect.flatMap(scopedDatabase, (db) => listing(db.url)))
})
