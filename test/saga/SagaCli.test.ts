import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { identityFileOf, runSagaFile, sagaStatus } from "../../src/cli/Cli.js"
import { generateDid } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { register, step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer), Effect.provide(NodeContext.layer))

/** Runs `effect` with a console that keeps what `log` printed. */
const capturing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Console.consoleWith((base) => {
    const lines: Array<string> = []
    const console: Console.Console = { ...base, log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void lines.push(args.map(String).join(" "))) }
    return Effect.map(Effect.withConsole(effect, console), (value) => ({ value, lines }))
  })

describe("mesh saga run | status", () => {
  it.live("runs a saga file, printing each progress event, then the end; status prints the state", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "rental", failing: { "book-car": "always" } }] })
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-saga-"))
        const file = path.join(dir, "trip.json")
        const identity = path.join(dir, "buyer.identity.json")
        fs.writeFileSync(identity, JSON.stringify(identityFileOf(w.buyer)))
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "car", "rental", "book-car", 10)]
        fs.writeFileSync(file, JSON.stringify({ mandate: yield* w.mandate(), steps }))
        const run = yield* capturing(runSagaFile({ hubUrl: w.hub.url, file, identity }))
        assert.strictEqual(run.value.status, "compensated")
        const progress = run.lines.slice(1, -1).map((l) => l.trim().split(" ").slice(1, 3).join(" "))
        assert.deepStrictEqual(progress, [
          "saga_started", "step_started flight", "step_committed flight", "step_started car", "step_failed car", "step_compensating flight", "step_compensated flight", "saga_compensated car"
        ])
        assert.strictEqual(JSON.parse(run.lines[run.lines.length - 1]!).sagaId, run.value.sagaId)
        const status = yield* capturing(sagaStatus({ hubUrl: w.hub.url, sagaId: run.value.sagaId, identity }))
        assert.strictEqual(JSON.parse(status.lines[0]!).status, "compensated")
        const missing = yield* Effect.flip(sagaStatus({ hubUrl: w.hub.url, sagaId: "saga_none", identity }))
        assert.include(missing.message, "NOT_FOUND")
        // Another identity, registered in the same hub, is told there is no such saga.
        const stranger = path.join(dir, "stranger.identity.json")
        const other = yield* generateDid("stranger")
        yield* register(w.client, other, "http://127.0.0.1:9/stranger")
        fs.writeFileSync(stranger, JSON.stringify(identityFileOf(other)))
        const foreign = yield* Effect.flip(sagaStatus({ hubUrl: w.hub.url, sagaId: run.value.sagaId, identity: stranger }))
        assert.include(foreign.message, "NOT_FOUND")
      })
    ))
})
