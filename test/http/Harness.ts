/**
 * Wire-level helpers for the serving tests: node:http requests that show exactly what went on the wire, and raw
 * sockets for what node:http's client will not do (trickling, writing a whole body before reading, binding a source
 * address). Every wait is bounded: a socket that neither answers nor closes fails the test after `BOUND_MS`.
 */
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import * as Net from "node:net"

/** The bound on any single wait for a real server (not a timing assertion: a hung test fails instead of hanging). */
export const BOUND_MS = 10_000

export interface Reply {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** One request on a fresh connection. */
export const request = (url: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}) =>
  Effect.async<Reply, Error>((resume) => {
    const req = Http.request(url, { method: options.method ?? "GET", headers: options.headers ?? {}, agent: false }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") })))
    })
    req.on("error", (e) => resume(Effect.fail(e)))
    req.end(options.body)
  })

export const json = (reply: Reply): Record<string, unknown> => JSON.parse(reply.body) as Record<string, unknown>

/** A raw client socket: what it has received so far and whether the server closed it. */
export interface RawSocket {
  readonly socket: Net.Socket
  readonly received: () => string
  readonly closed: () => boolean
  /** Waits (bounded) until `test` holds of the received text, or the socket closes. */
  readonly until: (test: (received: string) => boolean) => Effect.Effect<string, Error>
  /** Waits (bounded) until the socket is closed; succeeds with what was received. */
  readonly untilClosed: Effect.Effect<string, Error>
}

/** Connects a raw socket to `port` on 127.0.0.1, from `localAddress` when given; closed with the scope. */
export const connect = (port: number, localAddress?: string) =>
  Effect.acquireRelease(
    Effect.async<RawSocket, Error>((resume) => {
      const socket = Net.connect({ port, host: "127.0.0.1", ...(localAddress === undefined ? {} : { localAddress }) })
      let data = ""
      let closed = false
      const waiters = new Set<() => void>()
      const wake = () => {
        for (const w of waiters) w()
      }
      socket.on("data", (c: Buffer) => {
        data += c.toString("latin1")
        wake()
      })
      socket.on("error", () => {})
      socket.on("close", () => {
        closed = true
        wake()
      })
      const wait = (done: () => boolean, what: string) =>
        Effect.async<string, Error>((resumeWait) => {
          const check = () => {
            if (!done()) return
            waiters.delete(check)
            clearTimeout(timer)
            resumeWait(Effect.succeed(data))
          }
          const timer = setTimeout(() => {
            waiters.delete(check)
            resumeWait(Effect.fail(new Error(`no ${what} within ${BOUND_MS} ms; received ${JSON.stringify(data.slice(0, 200))}`)))
          }, BOUND_MS)
          waiters.add(check)
          check()
          return Effect.sync(() => {
            waiters.delete(check)
            clearTimeout(timer)
          })
        })
      const raw: RawSocket = {
        socket,
        received: () => data,
        closed: () => closed,
        until: (test) => wait(() => closed || test(data), "answer"),
        untilClosed: wait(() => closed, "close")
      }
      socket.once("connect", () => resume(Effect.succeed(raw)))
      socket.once("error", (e) => resume(Effect.fail(e)))
    }),
    (raw) => Effect.sync(() => raw.socket.destroy())
  )

/** The statuses of the complete responses (head and `Content-Length` body) at the start of `text`. */
export const statuses = (text: string): Array<number> => {
  const out: Array<number> = []
  let at = 0
  for (;;) {
    const end = text.indexOf("\r\n\r\n", at)
    if (end < 0) return out
    const head = text.slice(at, end)
    const status = /^HTTP\/1\.1 (\d{3})/.exec(head)
    if (status === null) return out
    const length = /\r\ncontent-length: *(\d+)/i.exec(head)
    const next = end + 4 + (length === null ? 0 : Number(length[1]))
    if (next > text.length) return out
    out.push(Number(status[1]))
    at = next
  }
}
