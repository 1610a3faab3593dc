/**
 * Reads a request body natively with a size limit enforced before anything is parsed: a declared
 * `Content-Length` over the limit is refused without reading, and a streamed body is cut off at the limit.
 */
import type * as Http from "node:http"

/** How reading ended: the bytes, or too large, or the connection failed. */
export type BodyResult =
  | { readonly _tag: "Body"; readonly bytes: Buffer }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Aborted"; readonly cause: unknown }

const EMPTY: BodyResult = { _tag: "Body", bytes: Buffer.alloc(0) }
const TOO_LARGE: BodyResult = { _tag: "TooLarge" }

/** Reads `req` to the end (at most `maxBytes`) and calls `done` exactly once. */
export const readBody = (req: Http.IncomingMessage, maxBytes: number, done: (result: BodyResult) => void): void => {
  const declared = req.headers["content-length"]
  if (declared !== undefined && Number(declared) > maxBytes) {
    // Let the client finish sending so the 413 is read on a live connection, without buffering it.
    req.resume()
    return done(TOO_LARGE)
  }
  if (declared === "0" || (declared === undefined && req.headers["transfer-encoding"] === undefined)) {
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
  req.on("data", (chunk: Buffer) => {
    if (finished) return
    size += chunk.length
    if (size > maxBytes) {
      chunks.length = 0
      return finish(TOO_LARGE)
    }
    chunks.push(chunk)
  })
  req.on("end", () => finish(chunks.length === 1 ? { _tag: "Body", bytes: chunks[0]! } : { _tag: "Body", bytes: Buffer.concat(chunks, size) }))
  req.on("error", (cause) => finish({ _tag: "Aborted", cause }))
}
