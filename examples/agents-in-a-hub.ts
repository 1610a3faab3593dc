/**
 * Two agents registered in a hub, one calling the other by its didHash as itself: the planner's handler calls
 * `input.callEffect(didHash, …)`, which resolves the weather agent through the planner's hub, signs the request
 * (mesh-sig, RFC 9421) with the planner's own identity and carries the user's correlation id; the weather agent
 * checks the signature against the planner's key in the same hub before its handler runs. Written with the Effect API.
 *
 *   npx tsx examples/agents-in-a-hub.ts
 */
import * as Effect from "effect/Effect"
import * as Console from "effect/Console"
import * as Option from "effect/Option"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as AgentClient from "../src/agent/AgentClient.js"
import * as AgentServer from "../src/agent/AgentServer.js"
import { didHash, generateDid, type MeshIdentity } from "../src/core/Did.js"
import * as Hub from "../src/hub/Hub.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as MeshClient from "../src/hub/MeshClient.js"

/** The whole scene; returns what the user got, what the weather agent saw of the planner's call, and what an unsigned caller got. */
export const program = Effect.gen(function* () {
  const hub = yield* Hub.start({ database: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-example-")), "hub.db") })
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey })
  const agents = yield* AgentClient.make({ hubUrl: hub.url })

  const weather = yield* generateDid("weather", undefined, "example")
  const planner = yield* generateDid("planner", undefined, "example")
  const register = (identity: MeshIdentity, endpointUrl: string, capabilities: ReadonlyArray<string>) =>
    registry.registerAgent({ identity, endpointUrl, manifest: { name: identity.did, meshProtocolVersion: "1.0", capabilities } })

  // The weather agent answers signed callers only; their keys come from the hub.
  const seen: Array<{ readonly caller: string | undefined; readonly capability: string | undefined; readonly correlationId: string | undefined }> = []
  const weatherAgent = yield* AgentServer.make({
    name: "weather",
    did: weather.did,
    privateKey: weather.privateKey,
    database: ":memory:",
    auth: "mesh-sig",
    hubUrl: hub.url,
    capabilities: ["forecast"],
    handler: ({ message, caller, capability, trace }) => {
      seen.push({ caller: caller.did, capability, correlationId: trace.correlationId })
      return `sunny in ${message} (asked by ${caller.did})`
    }
  })
  yield* register(weather, weatherAgent.url, ["forecast"])

  // The planner calls the weather agent by didHash, through its hub, as itself (its identity and hub are its own options).
  const plannerAgent = yield* AgentServer.make({
    name: "planner",
    did: planner.did,
    privateKey: planner.privateKey,
    database: ":memory:",
    hubUrl: hub.url,
    handler: ({ message, callEffect }) =>
      Effect.map(callEffect(didHash(weather.did), message, { capability: "forecast" }), (r) => ("message" in r ? `plan a picnic: ${r.message}` : "waiting"))
  })
  yield* register(planner, plannerAgent.url, ["plan"])
  yield* Console.log(`hub ${hub.url}\n  weather ${didHash(weather.did)} at ${weatherAgent.url}\n  planner ${didHash(planner.did)} at ${plannerAgent.url}`)

  const reply = yield* agents.call(didHash(planner.did), "Lisbon", { correlationId: "picnic-1" })
  yield* Console.log(`user <- planner: ${"message" in reply ? reply.message : "paused"}`)
  yield* Console.log(`weather saw: ${JSON.stringify(seen)}`)
  const unsigned = yield* Effect.flip(agents.call(didHash(weather.did), "Lisbon"))
  yield* Console.log(`unsigned caller <- weather: ${unsigned.code}`)
  return { reply, weatherSaw: seen, unsignedCode: unsigned.code }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await Effect.runPromise(program)
