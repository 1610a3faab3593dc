/**
 * Reads a request body natively with a size limit enforced before anything is parsed: a declared
 * `Content-Length` over the limit is refused without buffering, and a streamed body is cut off at the limit.
 *
 * A refused body is still read and thrown away, up to a bound (RFC 9112 §9.6): most clients (Node's fetch, Python's
 * http.client) write the whole body before they read, so closing on an unread body resets the connection under
 * them and they never see the 413. Past the bound the connection is closed: draining forever would let a client
 * hold the server's bandwidth for nothing.
 *
 * Floor: http (docs/architecture.md §3).
 */
import type * as Http from "node:http"

/** How reading ended: the bytes, or too large (`close`: past the drain bound, the connection will close). */
export type BodyResult =
  | { readonly _tag: "Body"; readonly bytes: Buffer }
  | { readonly _tag: "TooLarge"; readonly close: boolean }
  | { readonly _tag: "Aborted"; readonly cause: unknown }

const EMPTY: BodyResult = { _tag: "Body", bytes: Buffer.alloc(0) }
const TOO_LARGE: BodyResult = { _tag: "TooLarge", close: false }
const TOO_LARGE_CLOSE: BodyResult = { _tag: "TooLarge", close: true }

/** Whether a request carries a body, whatever its method. */
export const hasBody = (req: Http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined
}

/**
 * Throws away the rest of `req`'s body, `already` bytes of which were read, destroying the connection once more
 * than `maxDrainBytes` were seen. Returns false when the declared length is already past the bound (the response
 * should then say `Connection: close`).
 */
export const discardBody = (req: Http.IncomingMessage, maxDrainBytes: number, already = 0): boolean => {
  const declared = req.headers["content-length"]
  if (declared !== undefined && Number(declared) > maxDrainBytes) {
    req.resume()
    return false
  }
  let seen = already
  // Listening to "data" (rather than `resume()` alone) also stops node:http from dumping the body without a bound.
  req.on("data", (chunk: Buffer) => {
    seen += chunk.length
    if (seen > maxDrainBytes) req.socket.destroy()
  })
  req.on("error", () => {})
  return true
}

/**
 * Reads `req` to the end (at most `maxBytes`) and calls `done` exactly once. A body over the limit is reported as
 * soon as that is known and drained in the background up to `maxDrainBytes`.
 */
export const readBody = (
  req: Http.IncomingMessage,
  maxBytes: number,
  maxDrainBytes: number,
  done: (result: BodyResult) => void
): void => {
  const declared = req.headers["content-length"]
  if (declared !== undefined && Number(declared) > maxBytes) {
    return done(discardBody(req, maxDrainBytes) ? TOO_LARGE : TOO_LARGE_CLOSE)
  }
  if (!hasBody(req)) {
    req.resume()
    return done(EMPTY)
  }
  const chunks: Array<Buffer> = []
  let size = 0
  let finished = false
  const finish = (result: BodyResult) => {
    if (finished) return
    finished = true
    done(result)
  }
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size > maxBytes) {
      chunks.length = 0
      req.off("data", onData)
      discardBody(req, maxDrainBytes, size)
      return finish(TOO_LARGE)
    }
    chunks.push(chunk)
  }
  req.on("data", onData)
  req.on("end", () => finish(chunks.length === 1 ? { _tag: "Body", bytes: chunks[0]! } : { _tag: "Body", bytes: Buffer.concat(chunks, size) }))
  req.on("error", (cause) => finish({ _tag: "Aborted", cause }))
}
