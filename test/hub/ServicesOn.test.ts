import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Hub from "../../src/hub/Hub.js"
import { Registry } from "../../src/hub/Registry.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import * as Database from "../../src/sql/Database.js"

describe("Hub.layerServicesOn", () => {
  it.live("a hub rebuilt over the database it ran on keeps its state: the admin credential is not made twice", () =>
    Effect.gen(function* () {
      // The database is built once and outlives both builds of the services, as across a crash and restart.
      const db = Layer.succeedContext(yield* Layer.build(Database.layer(":memory:")))
      const ensureAdmin = Effect.flatMap(Registry, (r) => r.ensureAdmin).pipe(Effect.provide(Hub.layerServicesOn({}, db)))
      const first = yield* ensureAdmin
      const second = yield* ensureAdmin
      assert.isTrue(Option.isSome(first))
      assert.isTrue(Option.isNone(second))
      // Over a fresh database the credential is made again: the state was in the database, not in the process.
      const fresh = yield* Effect.flatMap(Registry, (r) => r.ensureAdmin).pipe(Effect.provide(Hub.layerServices({ database: ":memory:" })))
      assert.isTrue(Option.isSome(fresh))
    }).pipe(Effect.scoped, Effect.provide(KeysNative.layer)))
})
