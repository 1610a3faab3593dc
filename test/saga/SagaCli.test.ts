import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { spawn } from "node:child_process"
import { ensureBin } from "../support/bin.js"
import { identityFileOf } from "../../src/cli/Cli.js"
import { runSagaFile, sagaStatus } from "../../src/cli/SagaCommands.js"
import { generateDid } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { register, step, world } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer), Effect.provide(NodeContext.layer))

/** Runs `effect` keeping what it printed: `lines` on stdout (the console's `log`), `notes` on stderr. */
const capturing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Console.consoleWith((base) => {
    const lines: Array<string> = []
    const notes: Array<string> = []
    const console: Console.Console = { ...base, log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void lines.push(args.map(String).join(" "))) }
    const write = process.stderr.write.bind(process.stderr)
    return Effect.acquireUseRelease(
      Effect.sync(() => {
        process.stderr.write = ((chunk: string | Uint8Array) => {
          notes.push(...String(chunk).split("\n").filter((l) => l !== ""))
          return true
        }) as typeof process.stderr.write
      }),
      () => Effect.map(Effect.withConsole(effect, console), (value) => ({ value, lines, notes })),
      () => Effect.sync(() => void (process.stderr.write = write))
    )
  })

/** Runs the built `mesh <args>` to its end without blocking the event loop (the hub under test is in this process). */
const mesh = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly status: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
    for (const k of Object.keys(env)) if (k.startsWith("MESH_")) delete env[k]
    const p = spawn(process.execPath, [ensureBin(), ...args], { env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    p.on("close", (status) => resume(Effect.succeed({ status, stdout, stderr })))
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
        const run = yield* capturing(runSagaFile({ hubUrl: w.hub.url, file, identity, follow: true }))
        assert.strictEqual(run.value.status, "compensated")
        // Progress goes to stderr; stdout carries only the saga's end, as JSON.
        assert.strictEqual(run.lines.length, 1)
        assert.match(run.notes[0]!, /^saga saga_\S+ started on /)
        const progress = run.notes.slice(1).map((l) => l.trim().split(" ").slice(1, 3).join(" "))
        assert.deepStrictEqual(progress, [
          "saga_started", "step_started flight", "step_committed flight", "step_started car", "step_failed car", "step_compensating flight", "step_compensated flight", "saga_compensated car"
        ])
        assert.strictEqual(JSON.parse(run.lines[0]!).sagaId, run.value.sagaId)
        // As a process: a saga that ends compensated exits 1, saying so on stderr; its end is still JSON on stdout.
        // Without --follow, its progress is not printed.
        const ran = yield* mesh(["saga", "run", file, "--identity", identity, "--hub", w.hub.url])
        assert.strictEqual(ran.status, 1, ran.stderr)
        const ended = JSON.parse(ran.stdout) as { readonly sagaId: string; readonly status: string }
        assert.strictEqual(ended.status, "compensated")
        assert.notInclude(ran.stderr, "step_started")
        assert.match(ran.stderr.trim().split("\n").pop()!, new RegExp(`^mesh: saga ${ended.sagaId} ended compensated at step car \\(\\w+\\)$`))
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

  it.live("saga run --follow and status --follow print progress on stderr and exit by outcome; saga ls lists one's own sagas", () =>
    provide(
      Effect.gen(function* () {
        const w = yield* world({ agents: [{ name: "airline" }, { name: "rental", failing: { "book-car": "always" } }] })
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-saga-follow-"))
        const identity = path.join(dir, "buyer.identity.json")
        fs.writeFileSync(identity, JSON.stringify(identityFileOf(w.buyer)))
        const mandate = yield* w.mandate()
        const trip = path.join(dir, "trip.json")
        fs.writeFileSync(trip, JSON.stringify({ mandate, steps: [step(w.agents, "flight", "airline", "book-flight", 30)] }))
        const signed = ["--identity", identity, "--hub", w.hub.url]

        const followed = yield* mesh(["saga", "run", trip, "--follow", "--json", ...signed])
        assert.strictEqual(followed.status, 0, followed.stderr)
        const committed = JSON.parse(followed.stdout) as { readonly sagaId: string; readonly status: string }
        assert.strictEqual(committed.status, "committed")
        const progress = followed.stderr.trim().split("\n").slice(1).map((l) => l.trim().split(" ")[1])
        assert.deepStrictEqual(progress, ["saga_started", "step_started", "step_committed", "saga_committed"])

        // A saga that compensates, started in process; status --follow replays its progress and exits 1 at its end.
        const failed = yield* w.hub.scheduler.run(w.buyer.did, { mandate, steps: [step(w.agents, "flight", "airline", "book-flight", 30), step(w.agents, "car", "rental", "book-car", 10)] })
        const status = yield* mesh(["saga", "status", failed.sagaId, "--follow", ...signed])
        assert.strictEqual(status.status, 1, status.stderr)
        assert.strictEqual((JSON.parse(status.stdout) as { readonly status: string }).status, "compensated")
        assert.include(status.stderr, "step_failed car")
        assert.match(status.stderr.trim().split("\n").pop()!, new RegExp(`^mesh: saga ${failed.sagaId} ended compensated at step car`))
        const once = yield* mesh(["saga", "status", failed.sagaId, ...signed])
        assert.strictEqual(once.status, 0, once.stderr)
        assert.strictEqual(once.stderr, "")

        const listed = yield* mesh(["saga", "ls", "--json", ...signed])
        assert.strictEqual(listed.status, 0, listed.stderr)
        const page = JSON.parse(listed.stdout) as { readonly items: ReadonlyArray<{ readonly sagaId: string; readonly status: string }>; readonly nextCursor: string | null }
        assert.sameMembers(page.items.map((i) => i.sagaId), [committed.sagaId, failed.sagaId])
        assert.isNull(page.nextCursor)
        const first = yield* mesh(["saga", "ls", "--limit", "1", ...signed])
        assert.strictEqual(first.status, 0, first.stderr)
        assert.match(first.stdout, /^saga_\S+ {2}(committed|compensated) +[12] steps? {2}\d{4}-/)
        assert.strictEqual(first.stdout.trim().split("\n").length, 1)
        const cursor = /^\(more: mesh saga ls --cursor (\S+)\)$/m.exec(first.stderr)?.[1]
        assert.isString(cursor, first.stderr)
        const rest = yield* mesh(["saga", "ls", "--limit", "1", "--cursor", cursor!, ...signed])
        assert.sameMembers([first.stdout.split(" ")[0], rest.stdout.split(" ")[0]], [committed.sagaId, failed.sagaId])
      })
    ),
    60_000)
})
