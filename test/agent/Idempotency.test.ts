import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as AgentClient from "../../src/agent/AgentClient.js"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid } from "../../src/core/Did.js"
import { verify } from "../../src/core/CommitToken.js"
import { fromBase64 } from "../../src/core/internal/bytes.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { post, readSse, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const BEARER = { authorization: "Bearer secret-1" }
const keyed = (key: string) => ({ ...BEARER, "idempotency-key": key })

/** An agent whose handler counts its runs (its side effect) and can be held until released. */
const counting = (options: Partial<AgentServer.AgentServerOptions> = {}) => {
  const counter = { runs: 0, release: () => {}, held: Promise.resolve() }
  let gate: Promise<void> = Promise.resolve()
  const hold = () => {
    gate = new Promise<void>((resolve) => {
      counter.release = resolve
    })
  }
  const handler: AgentServer.Handler = async ({ message }) => {
    counter.runs++
    if (message === "slow") await gate
    return `booked ${message} #${counter.runs}`
  }
  const options_: AgentServer.AgentServerOptions = {
    name: "booker",
    did: "did:mesh:booker",
    privateKey: new Uint8Array(32).fill(11),
    auth: "bearer",
    bearerTokens: ["secret-1", "secret-2"],
    capabilities: ["book"],
    database: ":memory:",
    handler,
    ...options
  }
  return { counter, hold, options: options_ }
}

describe("Idempotency-Key on /v1/run", () => {
  it.live("the same key twice runs the handler once; the second answer is the stored one, commit token included", () =>
    provide(
      Effect.gen(function* () {
        const { counter, options } = counting()
        const agent = yield* AgentServer.make(options)
        const body = { message: "flight", commit: { sagaId: "saga_1", step: "flight", amountUsd: "10" } }
        const first = yield* post(`${agent.url}/v1/run`, body, keyed("saga_1:flight"))
        const second = yield* post(`${agent.url}/v1/run`, body, keyed("saga_1:flight"))
        assert.strictEqual(first.status, 200)
        assert.strictEqual(second.status, 200)
        assert.strictEqual(counter.runs, 1)
        assert.deepStrictEqual(second.body, first.body)
        assert.isNull(first.headers.get("idempotent-replayed"))
        assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
        yield* verify(second.body.commitToken, fromBase64(agent.publicKeyB64))
        // Another caller's same key is its own, and so is another key.
        yield* post(`${agent.url}/v1/run`, body, { authorization: "Bearer secret-2", "idempotency-key": "saga_1:flight" })
        yield* post(`${agent.url}/v1/run`, body, keyed("saga_1:hotel"))
        assert.strictEqual(counter.runs, 3)
      })
    ))

  it.live("concurrent requests with one key: the handler runs once and every request gets its reply", () =>
    provide(
      Effect.gen(function* () {
        const { counter, hold, options } = counting()
        hold()
        const agent = yield* AgentServer.make(options)
        const requests = Effect.all(
          Array.from({ length: 5 }, () => post(`${agent.url}/v1/run`, { message: "slow" }, keyed("k-concurrent"))),
          { concurrency: "unbounded" }
        )
        const fiber = yield* Effect.fork(requests)
        while (counter.runs === 0) yield* Effect.promise(() => new Promise((r) => setImmediate(r)))
        counter.release()
        const replies = yield* fiber.await.pipe(Effect.flatten)
        assert.strictEqual(counter.runs, 1)
        for (const r of replies) assert.deepStrictEqual([r.status, r.body.message], [200, "booked slow #1"])
      })
    ))

  it.live("the same key with another request is 409 IDEMPOTENCY_KEY_REUSED, and nothing runs", () =>
    provide(
      Effect.gen(function* () {
        const { counter, options } = counting()
        const agent = yield* AgentServer.make(options)
        yield* post(`${agent.url}/v1/run`, { message: "flight" }, keyed("k"))
        const other = yield* post(`${agent.url}/v1/run`, { message: "hotel" }, keyed("k"))
        assert.strictEqual(other.status, 409)
        assert.strictEqual(other.body.code, "IDEMPOTENCY_KEY_REUSED")
        assert.strictEqual(counter.runs, 1)
      })
    ))

  it.live("a key from an unauthenticated caller, on a streamed request, or malformed is 400 INVALID_REQUEST before anything runs", () =>
    provide(
      Effect.gen(function* () {
        const open = counting({ auth: "none", name: "open", did: "did:mesh:open" })
        const anonymous = yield* AgentServer.make(open.options)
        const r = yield* post(`${anonymous.url}/v1/run`, { message: "x" }, { "idempotency-key": "k" })
        assert.deepStrictEqual([r.status, r.body.code], [400, "INVALID_REQUEST"])
        // A saga step to an open agent fails this way: the refusal names the flag that fixes it.
        assert.include(String(r.body.error), "--auth mesh-sig")
        assert.strictEqual(open.counter.runs, 0)
        const { counter, options } = counting()
        const agent = yield* AgentServer.make(options)
        const streamed = yield* readSse(`${agent.url}/v1/run`, { message: "x" }, keyed("k"))
        assert.deepStrictEqual([streamed.status, streamed.body.code], [400, "INVALID_REQUEST"])
        const bad = yield* post(`${agent.url}/v1/run`, { message: "x" }, keyed("has space"))
        assert.deepStrictEqual([bad.status, bad.body.code], [400, "INVALID_REQUEST"])
        assert.strictEqual(counter.runs, 0)
      })
    ))

  it.live("a failed run lets its key go: the retry runs the handler again", () =>
    provide(
      Effect.gen(function* () {
        let runs = 0
        const agent = yield* AgentServer.make({
          ...counting().options,
          handler: () => {
            if (++runs === 1) throw new Error("transient")
            return "ok"
          }
        })
        const first = yield* post(`${agent.url}/v1/run`, { message: "x" }, keyed("k"))
        assert.strictEqual(first.status, 500)
        const second = yield* post(`${agent.url}/v1/run`, { message: "x" }, keyed("k"))
        assert.deepStrictEqual([second.status, second.body.message, runs], [200, "ok", 2])
      })
    ))

  it.live("a caller that goes away does not cancel a keyed run: its retry gets the reply, and the handler ran once", () =>
    provide(
      Effect.gen(function* () {
        const signals = new Map<string, AbortSignal>()
        let runs = 0
        let release = () => {}
        const gate = new Promise<void>((resolve) => (release = resolve))
        const agent = yield* AgentServer.make({
          ...counting().options,
          handler: async ({ message, signal }) => {
            const n = ++runs
            signals.set(message, signal)
            await gate
            return `booked ${message} #${n}`
          }
        })
        const abandon = (message: string, headers: Record<string, string>) =>
          Effect.promise(async () => {
            const controller = new AbortController()
            const p = fetch(`${agent.url}/v1/run`, {
              method: "POST",
              headers: { "content-type": "application/json", ...headers },
              body: JSON.stringify({ message }),
              signal: controller.signal
            }).catch(() => undefined)
            while (!signals.has(message)) await new Promise((r) => setTimeout(r, 5))
            controller.abort()
            await p
          })
        yield* abandon("slow", keyed("k-gone"))
        // A plain run abandoned after it is cancelled once the server sees its client go: by then it has seen the first.
        yield* abandon("control", BEARER)
        while (!signals.get("control")!.aborted) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
        assert.isFalse(signals.get("slow")!.aborted)
        const retry = yield* Effect.fork(post(`${agent.url}/v1/run`, { message: "slow" }, keyed("k-gone")))
        release()
        const r = yield* retry.await.pipe(Effect.flatten)
        assert.deepStrictEqual([r.status, r.body.message, runs], [200, "booked slow #1", 2])
      })
    ))

  it.live("after a restart on the same database the retry is answered from the store", () =>
    Effect.gen(function* () {
      const database = tempDatabase()
      const { counter, options } = counting({ database })
      const body = { message: "flight", commit: { sagaId: "saga_9", step: "flight" } }
      const first = yield* provide(Effect.flatMap(AgentServer.make(options), (agent) => post(`${agent.url}/v1/run`, body, keyed("saga_9:flight"))))
      const second = yield* provide(Effect.flatMap(AgentServer.make(options), (agent) => post(`${agent.url}/v1/run`, body, keyed("saga_9:flight"))))
      assert.strictEqual(counter.runs, 1)
      assert.deepStrictEqual(second.body, first.body)
      assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
    }))

  it.effect("a stored reply expires after idempotencyTtlMs (TestClock): then the key runs the handler again", () =>
    provide(
      Effect.gen(function* () {
        const { counter, options } = counting({ idempotencyTtlMs: 60_000 })
        const agent = yield* AgentServer.make(options)
        yield* post(`${agent.url}/v1/run`, { message: "x" }, keyed("k"))
        yield* TestClock.adjust(59_999)
        yield* post(`${agent.url}/v1/run`, { message: "x" }, keyed("k"))
        assert.strictEqual(counter.runs, 1)
        yield* TestClock.adjust(1)
        const again = yield* post(`${agent.url}/v1/run`, { message: "x" }, keyed("k"))
        assert.deepStrictEqual([again.body.message, counter.runs], ["booked x #2", 2])
      })
    ))

  it.live("AgentClient over mesh-sig: capability, commit and idempotencyKey; a retry gets the same signed receipt and the handler ran once", () =>
    provide(
      Effect.gen(function* () {
        const planner = yield* generateDid("planner")
        const { counter, options } = counting({ auth: "mesh-sig", resolveCallerKey: (did) => (did === planner.did ? planner.publicKey : null) })
        const agent = yield* AgentServer.make(options)
        const client = yield* AgentClient.make()
        const call = client.call(agent.url, "flight", {
          signAs: { did: planner.did, privateKey: planner.privateKey },
          capability: "book",
          commit: { sagaId: "saga_7", step: "flight", amountUsd: "12" },
          idempotencyKey: "saga_7:flight"
        })
        const first = yield* call
        const second = yield* call
        assert.strictEqual(counter.runs, 1)
        assert.deepStrictEqual(second, first)
        const token = "commitToken" in first ? first.commitToken : undefined
        const receipt = yield* verify(token ?? "", fromBase64(agent.publicKeyB64))
        assert.deepInclude(receipt, { sagaId: "saga_7", step: "flight", capability: "book", amountUsd: "12", issuer: "did:mesh:booker" })
        // A streamed call carries the receipt in its done event.
        const events = yield* Stream.runCollect(
          client.stream(agent.url, "hotel", { signAs: { did: planner.did, privateKey: planner.privateKey }, commit: { sagaId: "saga_7", step: "hotel" } })
        )
        const done = Chunk.toReadonlyArray(events).at(-1)
        assert.strictEqual((yield* verify(done?.type === "done" ? (done.commitToken ?? "") : "", fromBase64(agent.publicKeyB64))).step, "hotel")
      }).pipe(Effect.provide(FetchHttpClient.layer))
    ))

  it.live("stored replies are bounded per caller: past its keys or bytes a caller gets 429 IDEMPOTENCY_QUOTA_EXCEEDED with Retry-After, its stored keys still answer, another caller goes on", () =>
    provide(
      Effect.gen(function* () {
        const big = "x".repeat(20_000)
        const agent = yield* AgentServer.make({ ...counting().options, handler: () => big, idempotencyQuota: { entries: 100, bytes: 50_000 } })
        const url = `${agent.url}/v1/run`
        // 20 KB replies: the third puts the caller past 50 KB, so the fourth new key is refused.
        const statuses: Array<number> = []
        for (let i = 0; i < 6; i++) statuses.push((yield* post(url, { message: `m${i}` }, keyed(`k${i}`))).status)
        assert.deepStrictEqual(statuses, [200, 200, 200, 429, 429, 429])
        const refused = yield* post(url, { message: "m9" }, keyed("k9"))
        assert.strictEqual(refused.body.code, "IDEMPOTENCY_QUOTA_EXCEEDED")
        assert.isAbove(Number(refused.headers.get("retry-after")), 0)
        // A retry of a stored key is still answered from the store; another caller is not affected.
        const replay = yield* post(url, { message: "m0" }, keyed("k0"))
        assert.deepStrictEqual([replay.status, replay.headers.get("idempotent-replayed")], [200, "true"])
        const other = yield* post(url, { message: "m0" }, { authorization: "Bearer secret-2", "idempotency-key": "k0" })
        assert.strictEqual(other.status, 200)
      })
    ))
})
