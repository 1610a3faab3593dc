/**
 * Writes an `HttpServerResponse` straight to a node:http response, adding the correlation id header,
 * `X-Content-Type-Options: nosniff` (a JSON body holding markup is never sniffed into a page) and, unless the handler
 * chose its own (SSE says no-cache), `Cache-Control: no-store` (responses carry API keys and tokens).
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as Cookies from "@effect/platform/Cookies"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type * as Http from "node:http"
import { HEADER } from "./CorrelationId.js"

const SMALL = 16 * 1024

const isUtf8 = (contentType: string): boolean => contentType.includes("json") || contentType.startsWith("text/")

type Fork = <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>

/** Writes `value` (a response, or anything else as a defect) to `res`; `fail` reports what could not be written. */
export const writeResponse = (
  res: Http.ServerResponse,
  cid: string,
  value: unknown,
  fork: Fork,
  fail: (cause: Cause.Cause<unknown>) => void
): void => {
  if (!HttpServerResponse.isServerResponse(value)) return fail(Cause.die(new Error("handler returned a non-response")))
  if (res.destroyed) return
  const headers: Record<string, string | Array<string>> = { ...value.headers, [HEADER]: cid, "x-content-type-options": "nosniff" }
  headers["cache-control"] ??= "no-store"
  if (!Cookies.isEmpty(value.cookies)) headers["set-cookie"] = Cookies.toSetCookieHeaders(value.cookies)
  const body = value.body
  switch (body._tag) {
    case "Empty":
      res.writeHead(value.status, headers)
      return void res.end()
    case "Uint8Array":
      headers["content-type"] ??= body.contentType
      headers["content-length"] = String(body.contentLength)
      res.writeHead(value.status, headers)
      // node:http sends head and a string body in one write but a Buffer body as a second chunk; for small UTF-8
      // bodies (HttpApi's JSON) the round trip to a string is cheaper than the extra chunk.
      return void res.end(
        body.contentLength <= SMALL && isUtf8(body.contentType)
          ? Buffer.from(body.body.buffer, body.body.byteOffset, body.body.byteLength).toString("utf8")
          : body.body
      )
    case "Raw":
      if (typeof body.body === "string" || body.body instanceof Uint8Array) {
        if (body.contentType !== undefined) headers["content-type"] ??= body.contentType
        res.writeHead(value.status, headers)
        return void res.end(body.body)
      }
      break
    case "Stream": {
      headers["content-type"] ??= body.contentType
      if (body.contentLength !== undefined) headers["content-length"] = String(body.contentLength)
      res.writeHead(value.status, headers)
      const fiber = fork(Stream.runForEach(body.stream, (chunk) => Effect.sync(() => res.write(chunk))))
      // A client that goes away stops its stream (a long SSE response would otherwise be produced for nobody).
      const onClose = () => {
        if (!res.writableFinished) fork(fiber.interruptAsFork(fiber.id()))
      }
      res.once("close", onClose)
      return fiber.addObserver((exit) => {
        res.off("close", onClose)
        if (Exit.isSuccess(exit)) res.end()
        else res.destroy()
      })
    }
  }
  res.writeHead(value.status, headers)
  res.end()
}

/** Writes a JSON text answer with the headers `writeResponse` gives an HttpApi JSON response, in the same order. */
export const writeJson = (res: Http.ServerResponse, cid: string, status: number, contentType: string, body: string): void => {
  if (res.destroyed) return
  res.writeHead(status, {
    [HEADER]: cid,
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    "content-type": contentType,
    "content-length": String(Buffer.byteLength(body))
  })
  res.end(body)
}
