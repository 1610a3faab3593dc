/**
 * A trip booked as a saga: flight, then hotel, then car, each on its own agent, each paid from the traveller's one
 * budget. The car agent fails, so the hub undoes the hotel and then the flight (in reverse), and the saga ends
 * `compensated`. Each booking that ran came back with a commit token, the agent's signed receipt.
 *
 * The hub runs sagas as its runner DID: the traveller grants the runner an intent mandate (a budget), and the runner
 * pays each step from it with a payment mandate to that step's agent. Written with the Effect API.
 *
 *   npx tsx examples/saga-trip.ts
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as AgentServer from "../src/agent/AgentServer.js"
import type { RunInput } from "../src/agent/Handler.js"
import { generateDid, type MeshIdentity } from "../src/core/Did.js"
import { issueIntentMandate } from "../src/core/Mandate.js"
import * as MeshClient from "../src/hub/MeshClient.js"
import * as KeysNative from "../src/node/KeysNative.js"
import * as SagaClient from "../src/saga/SagaClient.js"
import * as SagaHub from "../src/saga/SagaHub.js"

/** The whole trip; returns the saga as it ended and what each agent did, in order. */
export const program = Effect.gen(function* () {
  const runner = yield* generateDid("trip-runner", undefined, "example")
  const hub = yield* SagaHub.start({
    database: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-saga-example-")), "hub.db"),
    runner: { did: runner.did, privateKey: runner.privateKey },
    // The agents listen on 127.0.0.1 beside the hub: a hub calls only public addresses unless told otherwise.
    outboundUrls: "any"
  })
  const registry = yield* MeshClient.make({ hubUrl: hub.url, apiKey: Option.getOrThrow(hub.admin).apiKey })
  const register = (identity: MeshIdentity, endpointUrl: string, capabilities: ReadonlyArray<string>) =>
    registry.registerAgent({ identity, endpointUrl, manifest: { name: identity.did, meshProtocolVersion: "1.0", capabilities } })
  // The runner signs its calls and the step mandates: the hub registered its key when it started, so agents and the
  // ledger find it there.

  const log: Array<string> = []
  const agent = (name: string, book: string, price: number) =>
    Effect.gen(function* () {
      const identity = yield* generateDid(name, undefined, "example")
      const server = yield* AgentServer.make({
        name,
        did: identity.did,
        privateKey: identity.privateKey,
        database: ":memory:",
        auth: "mesh-sig",
        hubUrl: hub.url,
        capabilities: [book, `cancel-${book}`],
        handler: (input: RunInput) => {
          if (input.capability === "book-car") throw new Error("no cars left")
          log.push(`${name}: ${input.capability}`)
          if (input.capability === book) input.reportCost(price)
          return `${input.capability} done`
        }
      })
      yield* register(identity, server.url, [book, `cancel-${book}`])
      return identity
    })
  const airline = yield* agent("airline", "book-flight", 420)
  const hotel = yield* agent("hotel", "book-hotel", 310)
  const rental = yield* agent("rental", "book-car", 90)

  const traveller = yield* generateDid("traveller", undefined, "example")
  yield* register(traveller, "http://127.0.0.1:9/traveller", ["travel"])
  const budget = yield* issueIntentMandate({ grantorDid: traveller.did, granteeDid: runner.did, constraints: { spendLimitUsd: 1000 }, privateKey: traveller.privateKey })

  const step = (name: string, who: MeshIdentity, capability: string, budgetUsd: number) => ({
    name,
    agentDid: who.did,
    capability,
    params: { trip: "Lisbon, 3 nights" },
    budgetUsd,
    compensation: { capability: `cancel-${capability}` }
  })
  // The traveller signs its saga requests: the hub starts a saga only for its mandate's grantor, and shows it only to them.
  const sagas = yield* SagaClient.make({ hubUrl: hub.url, identity: traveller })
  const ended = yield* sagas.runSaga(
    { mandate: budget.token, steps: [step("flight", airline, "book-flight", 500), step("hotel", hotel, "book-hotel", 400), step("car", rental, "book-car", 100)] },
    { onEvent: (e) => void log.push(`hub: ${e.type}${e.step === null ? "" : ` ${e.step}`}`) }
  )
  yield* Console.log(log.join("\n"))
  yield* Console.log(`saga ${ended.sagaId}: ${ended.status} (failed at ${ended.failedStep}: ${ended.errorCode})`)
  return { ended, log }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer), Effect.provide(KeysNative.layer))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await Effect.runPromise(program)
