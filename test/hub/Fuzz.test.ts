import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as KeysNative from "../../src/node/KeysNative.js"
import { startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const routes = [
  ["POST", "/v1/manifests"],
  ["POST", "/v1/agents"],
  ["PATCH", "/v1/agents/y7mftsv4pls3arzqmbjjuhz7"],
  ["POST", "/v1/agents/y7mftsv4pls3arzqmbjjuhz7/key"],
  ["POST", "/v1/mcp"],
  ["POST", "/v1/skills"],
  ["POST", "/v1/mandates/revocations"],
  ["POST", "/keys"],
  ["POST", "/v1/spending/pools"],
  ["POST", "/v1/spending/pools/p/allocations"],
  ["POST", "/api/agent-keys/challenge"],
  ["POST", "/api/agent-keys"]
] as const

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth)
const nestedObject = (depth: number) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth)

/** Bodies: valid JSON of any shape, near-miss shapes, malformed text, huge and deeply nested documents. */
const body = fc.oneof(
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.record({ did: fc.oneof(fc.string(), fc.constant("did:mesh:x1"), fc.integer()), publicKeyB64: fc.oneof(fc.string(), fc.constant("A".repeat(43) + "=")), manifestCID: fc.string(), endpointUrl: fc.oneof(fc.webUrl(), fc.string()), name: fc.string(), tools: fc.array(fc.oneof(fc.string(), fc.object())), mandate: fc.string(), childMandate: fc.string(), idempotencyKey: fc.string(), usedUsd: fc.oneof(fc.double(), fc.integer()), challengeId: fc.string(), signature: fc.string(), type: fc.string(), jti: fc.string(), grantor: fc.string(), proof: fc.object(), meshProtocolVersion: fc.constantFrom("1.0", "2", 1) }, { requiredKeys: [] }).map((v) => JSON.stringify(v)),
  fc.string(),
  fc.constantFrom("", "{", "null", "[]", '{"__proto__":{"x":1}}', "\u0000", '{"a":1e999999}', nested(5000), nestedObject(5000), nested(200_000), "x".repeat(2_000_000))
)

describe("hub: fuzzed bodies", () => {
  it.live("only typed 4xx answers with the error shape: never a 500, never a crash", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey } = yield* startHub()
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.constantFrom(...routes), body, fc.boolean(), async ([method, route], text, auth) => {
              const res = await fetch(`${hub.url}${route}`, {
                method,
                headers: { "content-type": "application/json", ...(auth ? { authorization: `Bearer ${adminKey}` } : {}) },
                body: text
              })
              const out = await res.text()
              assert.isAtLeast(res.status, 200, out)
              assert.isBelow(res.status, 500, `${method} ${route} ${text.slice(0, 200)} → ${res.status} ${out.slice(0, 300)}`)
              if (res.status >= 400) {
                const json = JSON.parse(out) as Record<string, unknown>
                for (const k of ["_tag", "error", "code", "correlationId"]) assert.strictEqual(typeof json[k], "string", `${k} in ${out.slice(0, 300)}`)
              }
            }),
            { numRuns: 400 }
          )
        )
        // Still serving.
        const alive = yield* Effect.promise(() => fetch(`${hub.url}/api/status`).then((r) => r.status))
        assert.strictEqual(alive, 200)
      })
    ), 120_000)
})
