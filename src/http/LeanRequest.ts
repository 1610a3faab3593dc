/**
 * A `HttpServerRequest` over a node:http request whose body has already been read (and, for JSON, parsed): what
 * HttpApi's route handlers see. Far cheaper than the platform-node request, which streams the body on demand.
 *
 * Floor: http (docs/architecture.md §3).
 */
import type * as Headers from "@effect/platform/Headers"
import * as IncomingMessage from "@effect/platform/HttpIncomingMessage"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as Multipart from "@effect/platform/Multipart"
import type * as Socket from "@effect/platform/Socket"
import * as UrlParams from "@effect/platform/UrlParams"
import * as Effect from "effect/Effect"
import { NodeInspectSymbol } from "effect/Inspectable"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type * as Http from "node:http"

/** The holds on a request's answer, shared by the request and its `modify`d copies. */
class Holds {
  count = 0
  write: (() => void) | undefined = undefined
}

/** A read request: its node:http source, its raw body and (when the body was JSON) the parsed value. */
export class LeanRequest implements HttpServerRequest.HttpServerRequest {
  readonly [HttpServerRequest.TypeId]: HttpServerRequest.TypeId = HttpServerRequest.TypeId
  readonly [IncomingMessage.TypeId]: IncomingMessage.TypeId = IncomingMessage.TypeId
  readonly method: HttpMethod
  readonly headers: Headers.Headers
  /** The caller's DID once an auth step verified one (`noteCaller`); the access log names it. */
  caller: string | undefined = undefined

  constructor(
    readonly source: Http.IncomingMessage,
    readonly url: string,
    readonly body: Buffer,
    readonly parsedJson: unknown,
    headers?: Headers.Headers,
    private readonly remoteAddressOverride?: string,
    private readonly holds: Holds = new Holds()
  ) {
    // node:http already upper-cases standard methods.
    this.method = source.method as HttpMethod
    // node:http's header object is a null-prototype record of lower-case names, which is what Headers is.
    this.headers = headers ?? (source.headers as Headers.Headers)
  }

  get originalUrl(): string {
    return this.source.url ?? this.url
  }

  get remoteAddress(): Option.Option<string> {
    return Option.fromNullable(this.remoteAddressOverride ?? this.source.socket.remoteAddress)
  }

  get cookies(): Record<string, string> {
    const out: Record<string, string> = {}
    for (const part of (this.headers.cookie ?? "").split(";")) {
      const eq = part.indexOf("=")
      if (eq > 0) out[part.slice(0, eq).trim()] = decodeURIComponent(part.slice(eq + 1).trim())
    }
    return out
  }

  get json(): Effect.Effect<unknown, HttpServerError.RequestError> {
    return Effect.succeed(this.parsedJson)
  }

  get text(): Effect.Effect<string, HttpServerError.RequestError> {
    return Effect.sync(() => this.body.toString("utf8"))
  }

  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpServerError.RequestError> {
    return Effect.sync(() => UrlParams.fromInput(new URLSearchParams(this.body.toString("utf8"))))
  }

  get arrayBuffer(): Effect.Effect<ArrayBuffer, HttpServerError.RequestError> {
    return Effect.sync(() => {
      const copy = new ArrayBuffer(this.body.byteLength)
      new Uint8Array(copy).set(this.body)
      return copy
    })
  }

  get stream(): Stream.Stream<Uint8Array, HttpServerError.RequestError> {
    return Stream.succeed(this.body)
  }

  // Multipart and upgrades need the live stream, which this request has already consumed.
  get multipart(): Effect.Effect<Multipart.Persisted, Multipart.MultipartError> {
    return Effect.dieMessage("multipart bodies are not supported by the lean server")
  }

  get multipartStream(): Stream.Stream<Multipart.Part, Multipart.MultipartError> {
    return Stream.dieMessage("multipart bodies are not supported by the lean server")
  }

  get upgrade(): Effect.Effect<Socket.Socket, HttpServerError.RequestError> {
    return Effect.fail(new HttpServerError.RequestError({ request: this, reason: "Decode", description: "not an upgradeable request" }))
  }

  modify(options: { readonly url?: string; readonly headers?: Headers.Headers; readonly remoteAddress?: string }): LeanRequest {
    return new LeanRequest(
      this.source,
      options.url ?? this.url,
      this.body,
      this.parsedJson,
      options.headers ?? this.headers,
      options.remoteAddress ?? this.remoteAddressOverride,
      this.holds
    )
  }

  /** Holds the answer back until the returned function is called (once is enough; later calls do nothing). */
  hold(): () => void {
    const holds = this.holds
    holds.count++
    let released = false
    return () => {
      if (released) return
      released = true
      if (--holds.count > 0 || holds.write === undefined) return
      const write = holds.write
      holds.write = undefined
      write()
    }
  }

  /** Runs `write` now, or when the last hold on the answer is released. */
  whenReleased(write: () => void): void {
    if (this.holds.count === 0) write()
    else this.holds.write = write
  }

  toString(): string {
    return `LeanRequest(${this.method} ${this.url})`
  }

  toJSON(): unknown {
    return { _id: "@effect/platform/HttpServerRequest", method: this.method, url: this.originalUrl }
  }

  [NodeInspectSymbol](): unknown {
    return this.toJSON()
  }
}

/**
 * Holds back the answer to `req` until the returned function is called, when the lean server serves it (it writes the
 * answer then, however the handler ended): a handler that answers at once but must not be heard before something
 * else is done (a commit of several requests' writes) needs no fiber to wait in. Undefined for any other request: the
 * handler waits itself then.
 */
export const holdAnswer = (req: HttpServerRequest.HttpServerRequest): (() => void) | undefined => (req instanceof LeanRequest ? req.hold() : undefined)

/** Records the verified caller's DID on a lean request, for the access log; other requests are left alone. */
export const noteCaller = (req: HttpServerRequest.HttpServerRequest, did: string): void => {
  if (req instanceof LeanRequest) req.caller = did
}
