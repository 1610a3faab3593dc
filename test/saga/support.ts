/**
 * A world for saga tests: a hub with sagas on a temp SQLite file, its runner registered, agents that count what
 * their handlers did (per saga, step and capability), and a buyer whose intent mandate grants the runner a budget.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import * as AgentServer from "../../src/agent/AgentServer.js"
import type { RunInput } from "../../src/agent/Handler.js"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import { signRequest } from "../../src/core/HttpSignature.js"
import { issueIntentMandate } from "../../src/core/Mandate.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as SagaHub from "../../src/saga/SagaHub.js"
import { tempDatabase } from "../hub/support.js"

const NO_LAG_SHEDDING = { maxEventLoopLagMs: Infinity }

/** What the agents did: `${sagaId}|${step}|${capability}` → how many times the handler ran it. */
export type Effects = Map<string, number>

/** An agent of the world: a name, and the capabilities that fail (always, or the first `n` times). */
export interface AgentSpec {
  readonly name: string
  readonly failing?: Readonly<Record<string, number | "always">>
}

/** The handler of a counting agent. */
export const countingHandler = (effects: Effects, spec: AgentSpec) => {
  const failures = new Map<string, number>()
  return (input: RunInput): string => {
    const ctx = input.context as { readonly sagaId?: string; readonly step?: string; readonly params?: { readonly costUsd?: number } }
    const capability = input.capability ?? input.message
    const rule = spec.failing?.[capability]
    const seen = failures.get(capability) ?? 0
    if (rule === "always" || (typeof rule === "number" && seen < rule)) {
      failures.set(capability, seen + 1)
      throw new Error(`${spec.name} cannot ${capability}`)
    }
    const key = `${ctx.sagaId}|${ctx.step}|${capability}`
    effects.set(key, (effects.get(key) ?? 0) + 1)
    if (ctx.params?.costUsd !== undefined) input.reportCost(ctx.params.costUsd)
    return `${spec.name} did ${capability}`
  }
}

/** Registers `identity` in the hub as an agent at `endpointUrl`. */
export const register = (client: MeshClient.MeshClientApi, identity: MeshIdentity, endpointUrl: string) =>
  Effect.gen(function* () {
    const key = yield* client.createApiKey({ owner: identity.did })
    yield* client.registerAgent({ manifest: { name: identity.did.slice(9), meshProtocolVersion: "1.0", capabilities: ["saga"] }, endpointUrl, identity, apiKey: key.apiKey })
    return key.apiKey
  })

/** Starts the world (scoped). */
export const world = (options: {
  readonly agents: ReadonlyArray<AgentSpec>
  readonly memoryEngine?: boolean
  readonly database?: string
  readonly spendLimitUsd?: number
  readonly compensationRetry?: Schedule.Schedule<unknown, unknown>
  /** Which addresses the hub's step calls reach; default `any` (the agents listen on 127.0.0.1). */
  readonly outboundUrls?: "public" | "any"
  readonly maxRunningPerCaller?: number
  readonly maxRunning?: number
  readonly notStartedAfterMs?: number
  /** The agents' handler, in place of the counting one. */
  readonly handler?: (effects: Effects, spec: AgentSpec) => (input: RunInput) => string | Promise<string>
}) =>
  Effect.gen(function* () {
    const runner = yield* generateDid("saga-runner")
    // Lag shedding measures the test runner's load, not the servers': off for the hub and the agents here.
    const hub = yield* SagaHub.start({
      database: options.database ?? tempDatabase(),
      serving: NO_LAG_SHEDDING,
      runner: { did: runner.did, privateKey: runner.privateKey },
      outboundUrls: options.outboundUrls ?? "any",
      ...(options.maxRunningPerCaller === undefined ? {} : { maxRunningPerCaller: options.maxRunningPerCaller }),
      ...(options.maxRunning === undefined ? {} : { maxRunning: options.maxRunning }),
      ...(options.notStartedAfterMs === undefined ? {} : { notStartedAfterMs: options.notStartedAfterMs }),
      ...(options.memoryEngine === true ? { memoryEngine: true } : {}),
      ...(options.compensationRetry === undefined ? {} : { compensationRetry: options.compensationRetry })
    })
    const client = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey, retry: { times: 0 } }).pipe(
      Effect.provide(FetchHttpClient.layer)
    )
    // The hub registered its runner when it started.
    const effects: Effects = new Map()
    const agents: Record<string, MeshIdentity> = {}
    for (const spec of options.agents) {
      const identity = yield* generateDid(spec.name)
      const server = yield* AgentServer.make({
        name: spec.name,
        did: identity.did,
        privateKey: identity.privateKey,
        auth: "mesh-sig",
        hubUrl: hub.url,
        database: ":memory:",
        serving: NO_LAG_SHEDDING,
        handler: (options.handler ?? countingHandler)(effects, spec)
      })
      yield* register(client, identity, server.url)
      agents[spec.name] = identity
    }
    const buyer = yield* generateDid("buyer")
    yield* register(client, buyer, "http://127.0.0.1:9/buyer")
    const mandate = (spendLimitUsd = options.spendLimitUsd ?? 100, ttlSeconds = 3600) =>
      Effect.map(
        issueIntentMandate({ grantorDid: buyer.did, granteeDid: runner.did, constraints: { spendLimitUsd }, privateKey: buyer.privateKey, ttlSeconds }),
        (m) => m.token
      )
    /** The pool of a mandate, read as the runner (its grantee), signed by its key. */
    const pool = (poolId: string) => client.getPool(poolId, { identity: runner })
    return { hub, client, runner, agents, buyer, effects, mandate, pool }
  })

/** A step on agent `agent` with a compensation `undo-<capability>`. */
export const step = (agents: Record<string, MeshIdentity>, name: string, agent: string, capability: string, budgetUsd: number, costUsd?: number) => ({
  name,
  agentDid: agents[agent]!.did,
  capability,
  params: costUsd === undefined ? { item: name } : { item: name, costUsd },
  budgetUsd,
  compensation: { capability: `undo-${capability}` }
})

/** `method url` with a JSON body, signed (mesh-sig) by `signer`: its status, JSON body and headers. */
export const signedRequest = (url: string, method: string, signer: { readonly did: string; readonly privateKey: MeshIdentity["privateKey"] }, body?: unknown, headers: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const bytes = body === undefined ? new Uint8Array(0) : new TextEncoder().encode(JSON.stringify(body))
    const signature = yield* signRequest({ method, url: new URL(url).href, body: bytes }, { privateKey: signer.privateKey, keyId: verificationMethodId(signer.did) })
    return yield* Effect.promise(async () => {
      const res = await fetch(url, { method, headers: { "content-type": "application/json", ...signature, ...headers }, ...(body === undefined ? {} : { body: bytes }) })
      const text = await res.text()
      let json: Record<string, unknown> = {}
      try {
        json = JSON.parse(text) as Record<string, unknown>
      } catch {
        json = { text }
      }
      return { status: res.status, body: json, headers: res.headers, text }
    })
  }).pipe(Effect.orDie, Effect.provide(KeysNative.layer))
