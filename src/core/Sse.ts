/**
 * Server-sent events (text/event-stream, WHATWG HTML §9.2), both ways, in one place: `parse` reads an SSE body with
 * a limit per event and per stream, and `encodeEvent` frames one event. A reader must be bounded because the peer
 * decides the sizes: one unterminated event would otherwise grow the reader until it dies. Past a limit the stream
 * fails with `SseLimitExceeded` as soon as the chunk that crosses it arrives, so a reader holds at most the limit
 * plus one chunk. A peer could step around those limits by answering without `text/event-stream`, so a reply that is
 * not an event stream is read by `readReply`, under one cap for the whole body, with the same rule: a declared
 * `Content-Length` over the cap is refused before a byte is read, and an undeclared body fails with
 * `ReplyTooLarge` as soon as the chunk that crosses the cap arrives. Core module: no I/O, bytes in and events out
 * (docs/agent.md §3 and §7, docs/mesh-server.md §4 and §7).
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"

/** The media type of an SSE body. */
export const CONTENT_TYPE = "text/event-stream"

/** Whether a `Content-Type` (response) or `Accept` (request) header names an event stream; media types ignore case. */
export const isEventStream = (header: string | undefined): boolean => header !== undefined && header.toLowerCase().includes(CONTENT_TYPE)

/** Response headers for an SSE body besides its type: no caching, no proxy buffering. */
export const RESPONSE_HEADERS: Readonly<Record<string, string>> = { "cache-control": "no-cache", "x-accel-buffering": "no" }

/** Default largest event a reader accepts (its field lines, in bytes). */
export const DEFAULT_MAX_EVENT_BYTES = 1024 * 1024

/** Default largest stream a reader accepts, in bytes. */
export const DEFAULT_MAX_STREAM_BYTES = 64 * 1024 * 1024

/** Default largest reply that is not an event stream, in bytes. */
export const DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024

/** How much a reader accepts. */
export interface SseLimits {
  /** Largest event, in bytes of its lines (an unterminated line counts as it grows); default 1 MiB. */
  readonly maxEventBytes?: number
  /** Largest stream, in bytes; default 64 MiB. */
  readonly maxStreamBytes?: number
}

/** One event as read: `data` lines joined by newlines; `id` is the last event id seen so far in the stream. */
export interface SseEvent {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

/** The peer sent an event or a stream larger than the reader accepts. */
export class SseLimitExceeded extends Data.TaggedError("SseLimitExceeded")<{
  readonly limit: "event" | "stream"
  readonly maxBytes: number
  readonly message: string
}> {}

const exceeded = (limit: "event" | "stream", maxBytes: number) =>
  Either.left(new SseLimitExceeded({ limit, maxBytes, message: `the event stream sent ${limit === "event" ? "an event" : "a stream"} larger than ${maxBytes} bytes` }))

/** A stateful SSE reader: `push` each chunk of bytes, get the events it completes (or the limit it crossed). */
export interface SseParser {
  readonly push: (chunk: Uint8Array) => Either.Either<ReadonlyArray<SseEvent>, SseLimitExceeded>
}

const LF = 0x0a
const CR = 0x0d

/** A parser with these limits. */
const makeParser = (limits: SseLimits = {}): SseParser => {
  const maxEvent = limits.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES
  const maxStream = limits.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES
  const decoder = new TextDecoder()
  let pieces: Array<Uint8Array> = []
  let pending = 0
  let eventBytes = 0
  let total = 0
  let skipLf = false
  let first = true
  let data: Array<string> = []
  let type = ""
  let lastId: string | undefined = undefined

  const lineOf = (tail: Uint8Array): string => {
    let bytes = tail
    if (pieces.length > 0) {
      bytes = new Uint8Array(pending + tail.length)
      let at = 0
      for (const p of pieces) {
        bytes.set(p, at)
        at += p.length
      }
      bytes.set(tail, at)
      pieces = []
    }
    pending = 0
    let text = decoder.decode(bytes)
    if (first) {
      first = false
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    return text
  }

  const line = (text: string, size: number, out: Array<SseEvent>) => {
    if (text === "") {
      if (data.length > 0) out.push({ id: lastId, event: type === "" ? "message" : type, data: data.join("\n") })
      data = []
      type = ""
      eventBytes = 0
      return
    }
    if (text.charCodeAt(0) === 0x3a) return
    const colon = text.indexOf(":")
    const field = colon < 0 ? text : text.slice(0, colon)
    let value = colon < 0 ? "" : text.slice(colon + 1)
    if (value.charCodeAt(0) === 0x20) value = value.slice(1)
    if (field === "data") {
      data.push(value)
      eventBytes += size
    } else if (field === "event") type = value
    else if (field === "id" && !value.includes("\u0000")) lastId = value
  }

  return {
    push: (chunk) => {
      total += chunk.length
      if (total > maxStream) return exceeded("stream", maxStream)
      const out: Array<SseEvent> = []
      let start = 0
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i]
        if (skipLf) {
          skipLf = false
          if (b === LF) {
            start = i + 1
            continue
          }
        }
        if (b !== LF && b !== CR) continue
        const size = pending + i - start
        line(lineOf(chunk.subarray(start, i)), size, out)
        if (eventBytes > maxEvent) return exceeded("event", maxEvent)
        skipLf = b === CR
        start = i + 1
      }
      if (start < chunk.length) {
        pieces.push(chunk.subarray(start))
        pending += chunk.length - start
      }
      // An unterminated line counts as it grows: a peer that never ends its line is stopped at the limit too.
      if (eventBytes + pending > maxEvent) return exceeded("event", maxEvent)
      return Either.right(out)
    }
  }
}

/** The events of an SSE body, failing with `SseLimitExceeded` past a limit. An unfinished last event is dropped. */
export const parse = <E>(bytes: Stream.Stream<Uint8Array, E>, limits: SseLimits = {}): Stream.Stream<SseEvent, E | SseLimitExceeded> =>
  Stream.suspend(() => {
    const parser = makeParser(limits)
    return bytes.pipe(Stream.mapEffect(parser.push), Stream.flattenIterables)
  })

/** One event as SSE text: each line of `data` on its own `data:` line, then a blank line. */
export const encodeEvent = (event: { readonly id?: string; readonly event?: string; readonly data: string }): string => {
  let text = ""
  if (event.id !== undefined) text += `id: ${event.id}\n`
  if (event.event !== undefined) text += `event: ${event.event}\n`
  for (const l of event.data.split(/\r\n|\r|\n/)) text += `data: ${l}\n`
  return `${text}\n`
}

/** The peer sent (or declared) a reply that is not an event stream and is larger than the reader accepts. */
export class ReplyTooLarge extends Data.TaggedError("ReplyTooLarge")<{
  readonly maxBytes: number
  readonly message: string
}> {}

/** What `readReply` needs besides the body. */
export interface ReplyLimit {
  /** Largest body, in bytes; default 4 MiB. */
  readonly maxBytes?: number
  /** The reply's `Content-Length` header, if any: over the cap, the body is refused unread. */
  readonly contentLength?: string | undefined
}

/**
 * A whole reply body as UTF-8 text, holding at most the cap plus one chunk: past the cap (declared or counted) it
 * fails with `ReplyTooLarge` and the body is cancelled, so the peer is not read any further.
 */
export const readReply = <E>(bytes: Stream.Stream<Uint8Array, E>, limit: ReplyLimit = {}): Effect.Effect<string, E | ReplyTooLarge> =>
  Effect.suspend(() => {
    const max = limit.maxBytes ?? DEFAULT_MAX_REPLY_BYTES
    const tooLarge = (what: string) => new ReplyTooLarge({ maxBytes: max, message: `the peer ${what} a reply larger than ${max} bytes` })
    const declared = limit.contentLength === undefined || !/^\d+$/.test(limit.contentLength.trim()) ? undefined : Number(limit.contentLength.trim())
    if (declared !== undefined && declared > max) {
      // Opening the body and interrupting it at once cancels it after at most one read: the connection is let go
      // now rather than when the response is collected, and a peer that stalls cannot hold the caller.
      return Effect.zipRight(Effect.ignore(Stream.runDrain(Stream.interruptWhen(bytes, Effect.void))), Effect.fail(tooLarge("declared")))
    }
    const pieces: Array<Uint8Array> = []
    let total = 0
    return Stream.runForEach(bytes, (chunk) => {
      total += chunk.length
      if (total > max) return Effect.fail(tooLarge("sent"))
      pieces.push(chunk)
      return Effect.void
    }).pipe(
      Effect.map(() => {
        const body = new Uint8Array(total)
        let at = 0
        for (const p of pieces) {
          body.set(p, at)
          at += p.length
        }
        return new TextDecoder().decode(body)
      })
    )
  })
