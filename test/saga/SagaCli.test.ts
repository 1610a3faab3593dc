import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runSagaFile, sagaStatus } from "../../src/cli/Cli.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { step, world } from "./support.js"

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
        const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-saga-")), "trip.json")
        const steps = [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "car", "rental", "book-car", 10)]
        fs.writeFileSync(file, JSON.stringify({ mandate: yield* w.mandate(), steps }))
        const run = yield* capturing(runSagaFile({ hubUrl: w.hub.url, file }))
        assert.strictEqual(run.value.status, "compensated")
        const progress = run.lines.slice(1, -1).map((l) => l.trim().split(" ").slice(1, 3).join(" "))
        assert.deepStrictEqual(progress, [
          "saga_started", "step_started flight", "step_committed flight", "step_started car", "step_failed car", "step_compensating flight", "step_compensated flight", "saga_compensated car"
        ])
        assert.strictEqual(JSON.parse(run.lines[run.lines.length - 1]!).sagaId, run.value.sagaId)
        const status = yield* capturing(sagaStatus({ hubUrl: w.hub.url, sagaId: run.value.sagaId }))
        assert.strictEqual(JSON.parse(status.lines[0]!).status, "compensated")
        const missing = yield* Effect.flip(sagaStatus({ hubUrl: w.hub.url, sagaId: "saga_none" }))
        assert.include(missing.message, "NOT_FOUND")
      })
    ))
})
