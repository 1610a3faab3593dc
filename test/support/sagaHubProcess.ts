/**
 * A hub with sagas in a process of its own, for crash tests: `node --import tsx sagaHubProcess.ts <db> <port>
 * <runner seed hex>`. Prints `listening <url>` (and `admin <key>` on the database's first start) and runs until it
 * is killed. The runner's identity comes from the seed, so a restarted hub is the same runner.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { importIdentity } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as SagaHub from "../../src/saga/SagaHub.js"

const [database, port, seedHex] = process.argv.slice(2)
const seed = Uint8Array.from(Buffer.from(seedHex!, "hex"))

const main = Effect.gen(function* () {
  const runner = yield* importIdentity("did:mesh:saga-runner", seed)
  const hub = yield* SagaHub.start({ database: database!, port: Number(port), runner: { did: runner.did, privateKey: runner.privateKey }, outboundUrls: "any" })
  if (Option.isSome(hub.admin)) process.stdout.write(`admin ${hub.admin.value.apiKey}\n`)
  process.stdout.write(`listening ${hub.url}\n`)
  return yield* Effect.never
})

Effect.runPromise(main.pipe(Effect.scoped, Effect.provide(KeysNative.layer))).catch((e) => {
  process.stderr.write(`${String(e)}\n`)
  process.exit(1)
})
