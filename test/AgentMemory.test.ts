import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { AgentMemory, layerSession, makeSession } from "../src/core/AgentMemory.js"
import type { ChatMessage } from "../src/core/ModelProvider.js"
import * as AgentMemorySql from "../src/sql/AgentMemorySql.js"
import * as Database from "../src/sql/Database.js"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-memory-")), "mesh.db")
const sqlMemory = (filename: string, options: { readonly maxTurns?: number } = {}) =>
  AgentMemorySql.layer(options).pipe(Layer.provide(Database.layerSqlite(filename)), Layer.orDie)

const user = (content: string): ChatMessage => ({ role: "user", content })
const assistant = (content: string): ChatMessage => ({ role: "assistant", content })

// One contract, every layer that keeps turns: what an agent server may rely on whichever memory is behind it.
const layers: ReadonlyArray<readonly [string, (options: { readonly maxTurns?: number }) => Layer.Layer<AgentMemory>]> = [
  ["session", (options) => layerSession(options)],
  ["SQL", (options) => sqlMemory(":memory:", options)]
]

for (const [name, layerOf] of layers) {
  describe(`AgentMemory contract (${name})`, () => {
    it.effect("a session never written loads as no turns", () =>
      Effect.gen(function* () {
        const memory = yield* AgentMemory
        assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s"), [])
      }).pipe(Effect.provide(layerOf({}))))

    it.effect("appended turns load back oldest first, across appends", () =>
      Effect.gen(function* () {
        const memory = yield* AgentMemory
        yield* memory.append("did:mesh:agent", "alice", "s", [user("1"), assistant("one")])
        yield* memory.append("did:mesh:agent", "alice", "s", [user("2"), assistant("two")])
        assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s"), [user("1"), assistant("one"), user("2"), assistant("two")])
      }).pipe(Effect.provide(layerOf({}))))

    it.effect("sessions are apart per agent, per owner and per session id", () =>
      Effect.gen(function* () {
        const memory = yield* AgentMemory
        yield* memory.append("did:mesh:a", "alice", "s", [user("a/alice/s")])
        yield* memory.append("did:mesh:b", "alice", "s", [user("b/alice/s")])
        yield* memory.append("did:mesh:a", "bob", "s", [user("a/bob/s")])
        yield* memory.append("did:mesh:a", "alice", "t", [user("a/alice/t")])
        assert.deepStrictEqual(yield* memory.load("did:mesh:a", "alice", "s"), [user("a/alice/s")])
        assert.deepStrictEqual(yield* memory.load("did:mesh:b", "alice", "s"), [user("b/alice/s")])
        assert.deepStrictEqual(yield* memory.load("did:mesh:a", "bob", "s"), [user("a/bob/s")])
        assert.deepStrictEqual(yield* memory.load("did:mesh:a", "alice", "t"), [user("a/alice/t")])
        // Key parts are not concatenated ambiguously: another split of the same characters is another session.
        assert.deepStrictEqual(yield* memory.load("did:mesh:a", "alic", "es"), [])
      }).pipe(Effect.provide(layerOf({}))))

    it.effect("history is bounded: a load returns at most maxTurns, the latest ones, oldest first", () =>
      Effect.gen(function* () {
        const memory = yield* AgentMemory
        yield* memory.append("did:mesh:agent", "alice", "s", [user("1"), user("2")])
        yield* memory.append("did:mesh:agent", "alice", "s", [user("3"), user("4"), user("5")])
        assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s"), [user("3"), user("4"), user("5")])
        yield* memory.append("did:mesh:agent", "alice", "s", Array.from({ length: 10 }, (_, i) => user(`x${i}`)))
        assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s"), [user("x7"), user("x8"), user("x9")])
      }).pipe(Effect.provide(layerOf({ maxTurns: 3 }))))

    it.effect("a loaded history is the caller's copy: changing it changes nothing stored", () =>
      Effect.gen(function* () {
        const memory = yield* AgentMemory
        yield* memory.append("did:mesh:agent", "alice", "s", [user("1")])
        const loaded = yield* memory.load("did:mesh:agent", "alice", "s")
        ;(loaded as Array<ChatMessage>).push(user("injected"))
        assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s"), [user("1")])
      }).pipe(Effect.provide(layerOf({}))))
  })
}

describe("AgentMemory (session)", () => {
  it.effect("holds at most maxSessions sessions, forgetting the least recently used first", () =>
    Effect.gen(function* () {
      const memory = makeSession({ maxSessions: 2 })
      assert.strictEqual(memory.mode, "session")
      yield* memory.append("did:mesh:agent", "alice", "s1", [user("1")])
      yield* memory.append("did:mesh:agent", "alice", "s2", [user("2")])
      yield* memory.load("did:mesh:agent", "alice", "s1") // s1 is now the most recently used
      yield* memory.append("did:mesh:agent", "alice", "s3", [user("3")])
      assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s1"), [user("1")])
      assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s2"), [])
      assert.deepStrictEqual(yield* memory.load("did:mesh:agent", "alice", "s3"), [user("3")])
    }))
})

describe("AgentMemory (SQL)", () => {
  it.effect("turns survive closing and reopening the database file", () =>
    Effect.gen(function* () {
      const file = tempDb()
      yield* Effect.provide(Effect.flatMap(AgentMemory, (m) => m.append("did:mesh:agent", "alice", "s", [user("remember me")])), sqlMemory(file))
      const reopened = yield* Effect.provide(
        Effect.flatMap(AgentMemory, (m) => Effect.all([Effect.succeed(m.mode), m.load("did:mesh:agent", "alice", "s")])),
        sqlMemory(file)
      )
      assert.deepStrictEqual(reopened, ["persistent", [user("remember me")]])
      fs.rmSync(path.dirname(file), { recursive: true, force: true })
    }))
})
