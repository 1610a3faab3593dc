/**
 * What the fake model providers share: a plain HTTP server on 127.0.0.1 with a free port that records every request
 * (its JSON body parsed), lets a test wait for the n-th one, and stops (dropping open connections) when the scope
 * closes; and the helpers both fakes answer with.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type * as Net from "node:net"

/** One request as the fake got it. */
export interface FakeRequest {
  readonly method: string
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  /** The parsed JSON body (undefined when it was not JSON). */
  readonly body: unknown
}

/** A running fake server. */
export interface FakeHttp {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number
  /** Every request received, in order (a live view). */
  readonly requests: ReadonlyArray<FakeRequest>
  /** Waits until at least `count` requests have arrived (to move a `TestClock` only once a call is in flight). */
  readonly received: (count: number) => Effect.Effect<void>
}

/** Words in a text, the fakes' token count. */
export const words = (text: string): number => text.split(/\s+/).filter((w) => w.length > 0).length

/** Splits a reply into word-sized deltas whose concatenation is the reply. */
export const deltas = (text: string): Array<string> => {
  const parts: Array<string> = [...(text.match(/\s*\S+/g) ?? [])]
  const rest = text.slice(parts.join("").length)
  if (rest.length > 0) parts.push(rest)
  return parts
}

/** Answers with a JSON body. */
export const sendJson = (res: Http.ServerResponse, status: number, body: unknown, headers: Http.OutgoingHttpHeaders = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

/** Starts a server that records each request, then hands it, its parsed body and the count so far to `answer`. */
export const startFakeHttp = (
  answer: (req: Http.IncomingMessage, res: Http.ServerResponse, body: unknown, count: number) => void
): Effect.Effect<FakeHttp, never, Scope.Scope> =>
  Effect.gen(function* () {
    const requests: Array<FakeRequest> = []
    const waiters: Array<{ readonly count: number; readonly done: Deferred.Deferred<void> }> = []

    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        let body: unknown
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          body = undefined
        }
        requests.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers, body })
        for (const w of waiters) if (requests.length >= w.count) Deferred.unsafeDone(w.done, Exit.void)
        answer(req, res, body, requests.length)
      })
    })

    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        const failed = (e: Error) => resume(Effect.die(e))
        server.once("error", failed)
        server.listen(0, "127.0.0.1", () => {
          server.off("error", failed)
          resume(Effect.void)
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const { port } = server.address() as Net.AddressInfo

    return {
      port,
      requests,
      received: (count) =>
        Effect.suspend(() =>
          requests.length >= count
            ? Effect.void
            : Effect.flatMap(Deferred.make<void>(), (done) => {
              waiters.push({ count, done })
              return Deferred.await(done)
            })
        )
    }
  })
