/**
 * An agent server's logs and metrics: an access line per request (method, path, status, duration, correlation id,
 * the caller's DID under mesh-sig), every handler and provider failure logged once with its cause and correlation
 * id, `/metrics` with runs in flight and replays refused, and the log formats of `--log-format`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { generateDid, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import { ModelError, type ModelProviderApi } from "../../src/core/ModelProvider.js"
import { AccessLog } from "../../src/http/AccessLog.js"
import * as Observability from "../../src/cli/Observability.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { post } from "./support.js"

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Readonly<Record<string, unknown>>
  readonly cause: string
}

/** A logger that keeps every line, and the access log on. */
const capturing = () => {
  const lines: Array<Line> = []
  const logger = Logger.make(({ annotations, cause, logLevel, message }) => {
    lines.push({
      level: logLevel.label,
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      annotations: Object.fromEntries(HashMap.toEntries(annotations)),
      cause: Cause.isEmpty(cause) ? "" : Cause.pretty(cause)
    })
  })
  return { lines, layer: Layer.merge(Logger.replace(Logger.defaultLogger, logger), Layer.succeed(AccessLog, true)) }
}

const failingProvider: ModelProviderApi = {
  name: "down",
  chat: () => Effect.fail(new ModelError({ code: "PROVIDER_UNAVAILABLE", message: "upstream answered 503" })),
  stream: () => Stream.fail(new ModelError({ code: "PROVIDER_UNAVAILABLE", message: "upstream answered 503" }))
}

const scrape = (url: string) =>
  Effect.promise(async () => {
    const text = await (await fetch(`${url}/metrics`)).text()
    return (series: string): number => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `))
      return line === undefined ? 0 : Number(line.slice(series.length + 1))
    }
  })

describe("agent observability", () => {
  it.live("an access line per request; a handler failure is logged once, with its cause and the correlation id", () => {
    const { layer, lines } = capturing()
    return Effect.gen(function* () {
      const agent = yield* AgentServer.make({ name: "failing", database: ":memory:", handler: () => Promise.reject(new Error("the database of the handler is gone")) })
      const res = yield* post(`${agent.url}/v1/run`, { message: "hi" }, { "x-correlation-id": "fail-1" })
      assert.strictEqual(res.status, 500)
      assert.strictEqual(res.body.code, "HANDLER_FAILED")
      yield* Effect.promise(() => fetch(`${agent.url}/health`, { headers: { "x-correlation-id": "health-1" } }).then((r) => r.text()))

      const access = lines.filter((l) => l.annotations.correlationId === "fail-1" && l.annotations.path === "/v1/run")
      assert.strictEqual(access.length, 1)
      assert.strictEqual(access[0]!.annotations.method, "POST")
      assert.strictEqual(access[0]!.annotations.status, 500)
      assert.isNumber(access[0]!.annotations.durationMs)
      assert.match(access[0]!.message, /^POST \/v1\/run 500 /)
      const failures = lines.filter((l) => l.annotations.correlationId === "fail-1" && l.annotations.path === undefined)
      assert.strictEqual(failures.length, 1, JSON.stringify(failures))
      assert.strictEqual(failures[0]!.level, "ERROR")
      assert.include(failures[0]!.cause, "the database of the handler is gone")
      // One Error line per failure: the access line stays at Info.
      assert.strictEqual(access[0]!.level, "INFO")
      assert.strictEqual(lines.filter((l) => l.annotations.correlationId === "fail-1" && l.level === "ERROR").length, 1)
      const health = lines.filter((l) => l.annotations.correlationId === "health-1")
      assert.strictEqual(health.length, 1)
      assert.deepInclude(health[0]!.annotations, { method: "GET", path: "/health", status: 200 })
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(layer, KeysNative.layer)))
  })

  it.live("a provider failure is logged once with the provider's words and the correlation id, plain or streamed", () => {
    const { layer, lines } = capturing()
    return Effect.gen(function* () {
      const agent = yield* AgentServer.make({ name: "chat", database: ":memory:", provider: failingProvider, model: "m-1" })
      const plain = yield* post(`${agent.url}/v1/run`, { message: "hi" }, { "x-correlation-id": "prov-1" })
      assert.strictEqual(plain.status, 502)
      assert.strictEqual(plain.body.code, "PROVIDER_UNAVAILABLE")
      const streamed = yield* Effect.promise(() =>
        fetch(`${agent.url}/v1/run`, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", "x-correlation-id": "prov-2" }, body: JSON.stringify({ message: "hi" }) }).then((r) => r.text())
      )
      assert.include(streamed, "PROVIDER_UNAVAILABLE")
      for (const cid of ["prov-1", "prov-2"]) {
        const logged = lines.filter((l) => l.annotations.correlationId === cid && l.annotations.path === undefined)
        assert.strictEqual(logged.length, 1, `${cid}: ${JSON.stringify(lines)}`)
        assert.strictEqual(logged[0]!.level, "ERROR")
        assert.include(logged[0]!.message, "upstream answered 503")
      }
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(layer, KeysNative.layer)))
  })

  it.live("under mesh-sig the access line names the caller's DID; a replayed request is counted in /metrics", () => {
    const { layer, lines } = capturing()
    return Effect.gen(function* () {
      const caller = yield* generateDid("caller")
      const agent = yield* AgentServer.make({
        name: "signed", database: ":memory:", auth: "mesh-sig", resolveCallerKey: (did) => (did === caller.did ? caller.publicKey : null), handler: () => "ok"
      })
      const body = new TextEncoder().encode(JSON.stringify({ message: "hi" }))
      const headers = yield* signRequest({ method: "POST", url: `${agent.url}/v1/run`, body }, { privateKey: caller.privateKey, keyId: verificationMethodId(caller.did) })
      const before = yield* scrape(agent.url)
      const first = yield* post(`${agent.url}/v1/run`, new TextDecoder().decode(body), { ...headers, "x-correlation-id": "sig-1" })
      assert.strictEqual(first.status, 200)
      const again = yield* post(`${agent.url}/v1/run`, new TextDecoder().decode(body), { ...headers, "x-correlation-id": "sig-2" })
      assert.strictEqual(again.body.code, "REPLAYED")
      const after = yield* scrape(agent.url)
      assert.strictEqual(after(`mesh_replays_refused_total{kind="http"}`) - before(`mesh_replays_refused_total{kind="http"}`), 1)
      assert.strictEqual(after(`mesh_http_requests_total{method="POST",route="/v1/run",status="401"}`), 1)
      const line = lines.find((l) => l.annotations.correlationId === "sig-1" && l.annotations.path === "/v1/run")
      assert.strictEqual(line?.annotations.caller, caller.did)
      // The refused request has no verified caller.
      assert.isUndefined(lines.find((l) => l.annotations.correlationId === "sig-2" && l.annotations.path === "/v1/run")?.annotations.caller)
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(layer, KeysNative.layer)))
  })

  it.live("/metrics shows a run in flight while its handler works", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const agent = yield* AgentServer.make({
        name: "slow", database: ":memory:", handler: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.as(Deferred.await(release), "done"))
      })
      const before = (yield* scrape(agent.url))("mesh_agent_runs_in_flight")
      const running = yield* Effect.fork(post(`${agent.url}/v1/run`, { message: "hi" }))
      yield* Deferred.await(started)
      const during = yield* scrape(agent.url)
      assert.strictEqual(during("mesh_agent_runs_in_flight") - before, 1)
      assert.strictEqual(during("mesh_http_requests_in_flight"), 2)
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(running)).status, 200)
      assert.strictEqual((yield* scrape(agent.url))("mesh_agent_runs_in_flight"), before)
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))

  it.live("--log-format json prints the access line as one JSON object with its fields", () => {
    const printed: Array<string> = []
    return Effect.gen(function* () {
      const agent = yield* AgentServer.make({ name: "json", database: ":memory:", handler: () => "ok" })
      yield* post(`${agent.url}/v1/run`, { message: "hi" }, { "x-correlation-id": "json-1" })
      const line = printed.map((p) => JSON.parse(p) as { message: unknown; logLevel: string; annotations: Record<string, unknown> }).find((j) => j.annotations?.correlationId === "json-1")
      assert.isDefined(line)
      assert.strictEqual(line!.logLevel, "INFO")
      assert.deepInclude(line!.annotations, { method: "POST", path: "/v1/run", status: 200, correlationId: "json-1" })
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(Observability.layer("test", "json", {}, (line) => void printed.push(line)), KeysNative.layer)))
  })
})
