/**
 * The hub client for callers without Effect: every `MeshClient` operation returning a Promise, rejecting with the
 * same typed errors (match on `code`). Runs on fetch and node:crypto keys.
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as KeysNative from "../node/KeysNative.js"
import * as MeshClient from "../hub/MeshClient.js"
import { runOn } from "../node/internal/promiseRuntime.js"

/** A `MeshClient` operation as a Promise: functions keep their arguments, effects become functions of none. */
type Promised<T> = T extends (...args: infer A) => Effect.Effect<infer R, infer _E, never>
  ? (...args: A) => Promise<R>
  : T extends Effect.Effect<infer R, infer _E, never>
    ? () => Promise<R>
    : never

/** The Promise form of the hub client, plus `close()` to release it. */
export type MeshClientPromise = { readonly [K in Exclude<keyof MeshClient.MeshClientApi, "keyResolver">]: Promised<MeshClient.MeshClientApi[K]> } & {
  readonly close: () => Promise<void>
}

/** Creates a hub client whose operations return Promises. */
export const createMeshClient = async (options: MeshClient.MeshClientOptions): Promise<MeshClientPromise> => {
  const runtime = ManagedRuntime.make(Layer.merge(KeysNative.layer, FetchHttpClient.layer))
  const run = runOn(runtime)
  const api = await run(MeshClient.make(options)).catch(async (e: unknown) => {
    await runtime.dispose()
    throw e
  })
  const out: Record<string, unknown> = { close: () => runtime.dispose() }
  for (const [name, value] of Object.entries(api)) {
    if (name === "keyResolver") continue
    out[name] = Effect.isEffect(value)
      ? () => run(value as Effect.Effect<unknown, unknown>)
      : (...args: Array<unknown>) => run((value as (...a: Array<unknown>) => Effect.Effect<unknown, unknown>)(...args))
  }
  return out as MeshClientPromise
}
