/**
 * An in-memory network for simulations: an `HttpClient` whose requests go straight to fetch handlers registered by
 * origin (an agent's `AgentWeb.make`, a MeshServer's `MeshServerWeb.make`, a hub's `WebHandler.make`), with no
 * socket in between, and faults injected per request from a schedule: a delay (slept on Effect's Clock, so under
 * `TestClock` it costs no real time and moves only when the simulation moves the clock), a request dropped before it
 * is delivered, a response dropped after the handler ran, a request delivered twice. Reordering is a delay: the
 * delayed request is overtaken by the ones sent after it.
 *
 * Faults are keyed by the request's sequence number on the network, counted from the last `reset`, so a schedule
 * replays exactly as long as the requests are sent in the same order, which a run under `TestClock` with seeded
 * inputs does. Every request leaves a line in the trace, which is what a simulation compares between two runs.
 *
 * Floor: sim (docs/architecture.md §3).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"

/** A fetch handler: what the web surfaces of the hub, the agents and MeshServer are. */
export type Handler = (request: Request) => Promise<Response>

/** What the network can do to one request. */
export type Fault =
  | { readonly _tag: "Delay"; readonly millis: number }
  | { readonly _tag: "DropRequest" }
  | { readonly _tag: "DropResponse" }
  | { readonly _tag: "Duplicate" }

/** One request as the network saw it. */
export interface TraceLine {
  readonly seq: number
  /** When it was sent, by the simulation's clock (ms). */
  readonly at: number
  readonly method: string
  readonly origin: string
  readonly path: string
  readonly faults: ReadonlyArray<string>
  /** The status the client saw, or why it saw none: `unreachable` (no handler at the origin), `dropped` (a fault). */
  readonly outcome: number | "unreachable" | "dropped" | "failed"
}

/** The network's operations. */
export interface NetworkApi {
  /** Routes requests for `origin` (`http://hub.sim`) to `handler`; replaces one already there (a restart). */
  readonly register: (origin: string, handler: Handler) => Effect.Effect<void>
  /** Stops routing to `origin`: its requests fail as a refused connection does (a crashed process). */
  readonly unregister: (origin: string) => Effect.Effect<void>
  /**
   * Faults for the requests to come, by sequence number; replaces the previous plan and restarts the count.
   * `triggers` run as their request is sent, before it goes on (a process crashing as it goes out): the request waits
   * for its trigger to end, or dies with its sender.
   */
  readonly reset: (plan: ReadonlyMap<number, ReadonlyArray<Fault>>, triggers?: ReadonlyMap<number, Effect.Effect<void>>) => Effect.Effect<void>
  /** The trace since the network was made. */
  readonly trace: Effect.Effect<ReadonlyArray<TraceLine>>
  /** Requests sent since the last `reset`. */
  readonly sent: Effect.Effect<number>
  /** Requests whose handler has not answered yet: while there are some, the mesh is not idle. */
  readonly inFlight: Effect.Effect<number>
  /** Requests delivered to `handler` that it has not answered yet (a process still at work). */
  readonly inFlightAt: (handler: Handler) => Effect.Effect<number>
  /** Sends one request through the network, faults and all: what the `HttpClient` of `client` does. */
  readonly send: (
    request: HttpClientRequest.HttpClientRequest,
    url: URL
  ) => Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>
}

/** The simulated network. */
export class Network extends Context.Tag("agent-mesh/sim/Network")<Network, NetworkApi>() {}

/** A short name of a fault, for traces. */
export const faultName = (fault: Fault): string => (fault._tag === "Delay" ? `Delay(${fault.millis})` : fault._tag)

/**
 * Path segments longer than this are written `*` in the trace: they are generated ids (saga ids, pool ids), which
 * come from the platform CSPRNG unless the randomness is seeded, and must not make two runs of one seed differ.
 */
const ID_SEGMENT = 20

const tracePath = (pathname: string): string => pathname.split("/").map((s) => (s.length > ID_SEGMENT ? "*" : s)).join("/")

const transport = (request: HttpClientRequest.HttpClientRequest, description: string) =>
  new HttpClientError.RequestError({ request, reason: "Transport", description })

/** The request body as bytes, read once so that a duplicate can be built from it. */
const bodyBytes = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<Uint8Array | undefined, HttpClientError.HttpClientError> => {
  const body = request.body
  switch (body._tag) {
    case "Empty":
      return Effect.succeed(undefined)
    case "Uint8Array":
      return Effect.succeed(body.body)
    case "Raw":
      return typeof body.body === "string" ? Effect.succeed(new TextEncoder().encode(body.body)) : Effect.fail(transport(request, "the simulated network carries byte bodies only"))
    case "Stream":
      return Effect.mapError(
        Stream.runFold(body.stream, new Uint8Array(0), (acc, chunk) => {
          const next = new Uint8Array(acc.byteLength + chunk.byteLength)
          next.set(acc)
          next.set(chunk, acc.byteLength)
          return next
        }),
        (e) => (HttpClientError.isHttpClientError(e) ? e : transport(request, String(e)))
      )
    case "FormData":
      return Effect.fail(transport(request, "the simulated network carries byte bodies only"))
  }
}

/** Waits for a response's body to be read to its end (a dropped response still ran its handler to the end). */
const drain = (response: Response): Promise<void> =>
  (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
    ? (response.body?.cancel() ?? Promise.resolve())
    : response.arrayBuffer().then(() => undefined)

/** Makes a network with no handlers and no faults. */
export const make: Effect.Effect<NetworkApi> = Effect.sync(() => {
  const handlers = new Map<string, Handler>()
  let plan: ReadonlyMap<number, ReadonlyArray<Fault>> = new Map()
  let triggers: ReadonlyMap<number, Effect.Effect<void>> = new Map()
  let seq = 0
  let sinceReset = 0
  let inFlight = 0
  const atHandler = new Map<Handler, number>()
  const lines: Array<TraceLine> = []
  return {
    register: (origin, handler) => Effect.sync(() => void handlers.set(origin, handler)),
    unregister: (origin) => Effect.sync(() => void handlers.delete(origin)),
    reset: (next, nextTriggers = new Map()) =>
      Effect.sync(() => {
        plan = next
        triggers = nextTriggers
        sinceReset = 0
      }),
    trace: Effect.sync(() => lines.slice()),
    sent: Effect.sync(() => sinceReset),
    inFlight: Effect.sync(() => inFlight),
    inFlightAt: (handler) => Effect.sync(() => atHandler.get(handler) ?? 0),
    send: (request, url) =>
      Effect.gen(function* () {
        const n = sinceReset++
        const line = { seq: seq++, at: yield* Clock.currentTimeMillis, method: request.method, origin: url.origin, path: tracePath(url.pathname) }
        const trigger = triggers.get(n)
        if (trigger !== undefined) yield* trigger
        const faults = plan.get(n) ?? []
        const names = faults.map(faultName)
        const record = (outcome: TraceLine["outcome"]) => Effect.sync(() => void lines.push({ ...line, faults: names, outcome }))
        const body = yield* bodyBytes(request)
        for (const f of faults) if (f._tag === "Delay") yield* Effect.sleep(Duration.millis(f.millis))
        if (faults.some((f) => f._tag === "DropRequest")) {
          yield* record("dropped")
          return yield* Effect.fail(transport(request, "the request was lost"))
        }
        const handler = handlers.get(url.origin)
        if (handler === undefined) {
          yield* record("unreachable")
          return yield* Effect.fail(transport(request, `connection refused: nothing listens at ${url.origin}`))
        }
        const webRequest = () =>
          new Request(url, { method: request.method, headers: request.headers as Record<string, string>, ...(body === undefined ? {} : { body: body as Uint8Array<ArrayBuffer> }) })
        const call = Effect.tryPromise({
          try: () => {
            inFlight++
            atHandler.set(handler, (atHandler.get(handler) ?? 0) + 1)
            return handler(webRequest()).finally(() => {
              inFlight--
              const left = atHandler.get(handler)! - 1
              if (left === 0) atHandler.delete(handler)
              else atHandler.set(handler, left)
            })
          },
          catch: (cause) => transport(request, String(cause))
        })
        const first = yield* Effect.tapError(call, () => record("failed"))
        if (faults.some((f) => f._tag === "Duplicate")) {
          // The copy arrives after the original was answered; what it is answered goes nowhere.
          yield* Effect.ignore(Effect.flatMap(call, (r) => Effect.promise(() => drain(r))))
        }
        if (faults.some((f) => f._tag === "DropResponse")) {
          yield* Effect.promise(() => drain(first))
          yield* record("dropped")
          return yield* Effect.fail(transport(request, "the response was lost"))
        }
        yield* record(first.status)
        return HttpClientResponse.fromWeb(request, first)
      })
  }
})

/** A layer of a fresh network. */
export const layer: Layer.Layer<Network> = Layer.effect(Network, make)

/** An `HttpClient` over a network: every request goes through it, faults and all. */
export const client = (network: NetworkApi): HttpClient.HttpClient =>
  HttpClient.make(network.send)

/** The `HttpClient` of the `Network` in context. */
export const layerClient: Layer.Layer<HttpClient.HttpClient, never, Network> = Layer.effect(HttpClient.HttpClient, Effect.map(Network, client))
