/**
 * A `HttpServerRequest` over a fetch `Request` whose body has already been read (and, for JSON, parsed): what
 * HttpApi's route handlers see behind `WebHandler`. The web twin of `LeanRequest`; it names no Node API, so it runs
 * on Workers and Edge runtimes.
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

const decoder = new TextDecoder()

/** A read request: its method, path with query, headers (lower-case names), raw body and parsed JSON. */
export class WebRequest implements HttpServerRequest.HttpServerRequest {
  readonly [HttpServerRequest.TypeId]: HttpServerRequest.TypeId = HttpServerRequest.TypeId
  readonly [IncomingMessage.TypeId]: IncomingMessage.TypeId = IncomingMessage.TypeId
  /** The caller's DID once an auth step verified one. */
  caller: string | undefined = undefined

  constructor(
    readonly source: Request,
    readonly method: HttpMethod,
    readonly url: string,
    readonly headers: Headers.Headers,
    readonly body: Uint8Array,
    readonly parsedJson: unknown,
    private readonly address: string | undefined
  ) {}

  get originalUrl(): string {
    return this.source.url
  }

  get remoteAddress(): Option.Option<string> {
    return Option.fromNullable(this.address)
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
    return Effect.sync(() => decoder.decode(this.body))
  }

  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpServerError.RequestError> {
    return Effect.sync(() => UrlParams.fromInput(new URLSearchParams(decoder.decode(this.body))))
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
    return Effect.dieMessage("multipart bodies are not supported by the web handler")
  }

  get multipartStream(): Stream.Stream<Multipart.Part, Multipart.MultipartError> {
    return Stream.dieMessage("multipart bodies are not supported by the web handler")
  }

  get upgrade(): Effect.Effect<Socket.Socket, HttpServerError.RequestError> {
    return Effect.fail(new HttpServerError.RequestError({ request: this, reason: "Decode", description: "not an upgradeable request" }))
  }

  modify(options: { readonly url?: string; readonly headers?: Headers.Headers; readonly remoteAddress?: string }): WebRequest {
    return new WebRequest(
      this.source,
      this.method,
      options.url ?? this.url,
      options.headers ?? this.headers,
      this.body,
      this.parsedJson,
      options.remoteAddress ?? this.address
    )
  }

  toString(): string {
    return `WebRequest(${this.method} ${this.url})`
  }

  toJSON(): unknown {
    return { _id: "@effect/platform/HttpServerRequest", method: this.method, url: this.originalUrl }
  }

  [NodeInspectSymbol](): unknown {
    return this.toJSON()
  }
}
