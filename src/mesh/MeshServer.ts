/**
 * MeshServer: the low-level envelope transport. Signed envelopes come in on `POST /v1/messages`, are checked by
 * `validateEnvelope` against the sender's key and the server's `NonceStore`, pass the middleware in order, and reach
 * `onMessage(envelope, respond, stream)`; what the handler sends back goes out as envelopes signed by the server.
 * The contract is `MeshServerApi`, served by the lean `Serve`; the handlers are `MeshServerHandlers` (also served as a
 * fetch handler by `MeshServerWeb`); the rules are in docs/mesh-server.md.
 *
 * Floor: mesh (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type { InvalidDid } from "../core/Did.js"
import type { Keys, MalformedKey } from "../core/Keys.js"
import { MeshServerApi } from "./MeshServerApi.js"
import { makeHandlers, type MeshServerError, type MeshServerOptions, type RunningMeshServer } from "./MeshServerHandlers.js"
import * as Serve from "../http/Serve.js"
import { runWithKeys } from "../node/internal/promiseRuntime.js"

export * from "./MeshServerHandlers.js"

/** Starts a MeshServer on node:http; it stops when the scope closes. */
export const make = <R = never>(
  options: MeshServerOptions<R>
): Effect.Effect<RunningMeshServer, MeshServerError | InvalidDid | MalformedKey | Serve.ServeError, Scope.Scope | Keys | R> =>
  Effect.gen(function* () {
    const { did, handlers } = yield* makeHandlers(options)
    const server = yield* Serve.make(MeshServerApi, handlers, {
      ...options.serving,
      port: options.port ?? 0,
      host: options.host ?? "127.0.0.1",
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes })
    })
    return { url: server.url, port: server.port, did, close: server.close }
  })

/** `make` as a layer: the server runs while the layer is alive. */
export const layer = <R = never>(options: MeshServerOptions<R>): Layer.Layer<never, MeshServerError | InvalidDid | MalformedKey | Serve.ServeError, Keys | R> =>
  Layer.scopedDiscard(make(options))

/** A MeshServer started from Promise code. */
export interface RunningMeshServerPromise {
  readonly url: string
  readonly port: number
  readonly did: string
  readonly close: () => Promise<void>
}

/**
 * Starts a MeshServer from Promise code (node:crypto keys, memory nonce store); rejects with the typed error
 * (`InvalidDid`, `MalformedKey`, `MeshServerError`, `ServeError`). `close()` stops it.
 */
export const startPromise = async (options: MeshServerOptions): Promise<RunningMeshServerPromise> => {
  const scope = Effect.runSync(Scope.make())
  const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  try {
    const server = await runWithKeys(Scope.extend(make(options), scope))
    return { url: server.url, port: server.port, did: server.did, close }
  } catch (e) {
    await close()
    throw e
  }
}
