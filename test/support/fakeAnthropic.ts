/**
 * A fake Anthropic Messages API (`POST /v1/messages`) on 127.0.0.1, for tests that need a real HTTP peer: it checks
 * `x-api-key` and `anthropic-version`, answers from the last user message, streams the documented SSE events
 * (`message_start` with the input usage, `content_block_start`, `ping`, `content_block_delta`s, `content_block_stop`,
 * `message_delta` with the stop reason and output usage, `message_stop`) when `stream: true`, and can be switched to
 * fail the way the real API does (error bodies `{type:"error", error:{type, message}}`).
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { deltas, type FakeRequest, sendJson, startFakeHttp, words } from "./fakeHttp.js"

/**
 * How the fake answers the next requests:
 * `ok`; `unauthorized` (401, also what a wrong key gets); `rate-limited` (429 with Retry-After); `bad-request` (400);
 * `server-error` (500); `overloaded` (529); `garbage` (200 with a body, or an SSE frame, that is not JSON);
 * `wrong-shape` (200 with JSON that is not a message, or a stream event without a `type`); `truncated` (a stream that stops after two deltas, no
 * `message_stop`); `stream-error` (one delta, then an `error` event of type `overloaded_error`); `stall` (nothing for
 * a chat; for a stream `message_start` then silence); `unknown-events` (a good stream with event types and content
 * blocks this client has never heard of); `cached` (a good answer whose input usage is partly cache reads and writes).
 */
export type FakeAnthropicMode =
  | "ok"
  | "unauthorized"
  | "rate-limited"
  | "bad-request"
  | "server-error"
  | "overloaded"
  | "garbage"
  | "wrong-shape"
  | "truncated"
  | "stream-error"
  | "stall"
  | "unknown-events"
  | "cached"

/** A running fake. */
export interface FakeAnthropic {
  /** The API root to give a provider as `baseUrl` (without `/v1`). */
  readonly url: string
  /** Every request received, in order (a live view). */
  readonly requests: ReadonlyArray<FakeRequest>
  /** Switches how the following requests are answered; `retryAfter` is the 429's Retry-After (default `7`). */
  readonly setMode: (mode: FakeAnthropicMode, options?: { readonly retryAfter?: string }) => Effect.Effect<void>
  /** Waits until at least `count` requests have arrived. */
  readonly received: (count: number) => Effect.Effect<void>
}

const record = (body: unknown): Record<string, unknown> => (typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {})

const turns = (body: unknown): ReadonlyArray<{ readonly role?: unknown; readonly content?: unknown }> => {
  const messages = record(body).messages
  return Array.isArray(messages) ? messages : []
}

const lastUserText = (body: unknown): string => {
  const all = turns(body)
  for (let i = all.length - 1; i >= 0; i--) {
    const m = all[i]
    if (m?.role === "user" && typeof m.content === "string") return m.content
  }
  return ""
}

/** Input tokens: words of the system prompt and of every turn. */
const promptWords = (body: unknown): number => {
  const system = record(body).system
  return turns(body).reduce((n, m) => n + (typeof m.content === "string" ? words(m.content) : 0), typeof system === "string" ? words(system) : 0)
}

const errorBody = (type: string, message: string) => ({ type: "error", error: { type, message } })

/** Starts the fake on 127.0.0.1 with a free port; it stops (dropping open connections) when the scope closes. */
export const startFakeAnthropic = (
  options: { readonly apiKey?: string; readonly reply?: (text: string) => string } = {}
): Effect.Effect<FakeAnthropic, never, Scope.Scope> =>
  Effect.gen(function* () {
    const reply = options.reply ?? ((text: string) => `You said: ${text}`)
    let mode: FakeAnthropicMode = "ok"
    let retryAfter = "7"

    const server = yield* startFakeHttp((req, res, body, count) => {
      if (req.method !== "POST" || req.url !== "/v1/messages") return sendJson(res, 404, errorBody("not_found_error", `Not found: ${req.url}`))
      const presented = req.headers["x-api-key"]
      if (mode === "unauthorized" || (options.apiKey !== undefined && presented !== options.apiKey)) {
        // Quote the key presented, as some gateways do: the client must not pass it on.
        return sendJson(res, 401, errorBody("authentication_error", `invalid x-api-key: ${String(presented)}`))
      }
      if (req.headers["anthropic-version"] === undefined) return sendJson(res, 400, errorBody("invalid_request_error", "anthropic-version header is required"))
      const fields = record(body)
      const model = typeof fields.model === "string" ? fields.model : "unknown"
      if (typeof fields.max_tokens !== "number") return sendJson(res, 400, errorBody("invalid_request_error", "max_tokens: Field required"))
      switch (mode) {
        case "rate-limited":
          return sendJson(res, 429, errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), {
            "retry-after": retryAfter
          })
        case "bad-request":
          return sendJson(res, 400, errorBody("invalid_request_error", `model: ${model} is not a valid model`))
        case "server-error":
          return sendJson(res, 500, errorBody("api_error", "Internal server error"))
        case "overloaded":
          return sendJson(res, 529, errorBody("overloaded_error", "Overloaded"))
        default:
          break
      }
      const text = reply(lastUserText(body))
      const input = promptWords(body)
      const output = words(text)
      const usage =
        mode === "cached"
          ? { input_tokens: 3, cache_creation_input_tokens: 10, cache_read_input_tokens: 20, output_tokens: output }
          : { input_tokens: input, output_tokens: output }
      const id = `msg_${count}`
      if (fields.stream !== true) {
        if (mode === "stall") return
        if (mode === "garbage") {
          res.writeHead(200, { "content-type": "application/json" })
          return res.end("<html>this is not json {")
        }
        if (mode === "wrong-shape") return sendJson(res, 200, { type: "message", result: "no content here" })
        return sendJson(res, 200, {
          id,
          type: "message",
          role: "assistant",
          model,
          content: [{ type: "text", text }],
          stop_reason: "end_turn",
          stop_sequence: null,
          usage
        })
      }

      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
      const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`)
      if (mode === "garbage") {
        send("message_start", "this is not json")
        return res.end()
      }
      if (mode === "wrong-shape") {
        send("message_start", { result: "no type here" })
        return res.end()
      }
      send("message_start", {
        type: "message_start",
        message: {
          id,
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usage, output_tokens: 1 }
        }
      })
      if (mode === "stall") return
      send("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })
      send("ping", { type: "ping" })
      const parts = deltas(text)
      const delta = (part: string) => send("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: part } })
      if (mode === "stream-error") {
        delta(parts[0] ?? "")
        send("error", errorBody("overloaded_error", "Overloaded mid-answer"))
        return res.end()
      }
      if (mode === "unknown-events") {
        send("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "telepathy_delta", thought: "…" } })
        send("brand_new_event", { type: "brand_new_event", anything: [1, 2, 3] })
      }
      const shown = mode === "truncated" ? parts.slice(0, 2) : parts
      for (const part of shown) delta(part)
      if (mode === "truncated") return res.end()
      send("content_block_stop", { type: "content_block_stop", index: 0 })
      // Newer API versions repeat the input count here, without the cache counts message_start gave.
      const deltaUsage = mode === "cached" ? { input_tokens: 3, output_tokens: output } : { output_tokens: output }
      send("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: deltaUsage })
      send("message_stop", { type: "message_stop" })
      res.end()
    })

    return {
      url: `http://127.0.0.1:${server.port}`,
      requests: server.requests,
      setMode: (next, opts = {}) =>
        Effect.sync(() => {
          mode = next
          retryAfter = opts.retryAfter ?? "7"
        }),
      received: server.received
    }
  })
