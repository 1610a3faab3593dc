/**
 * A fake OpenAI-compatible server (Chat Completions only) on 127.0.0.1, for tests that need a real HTTP peer:
 * it checks the bearer key, answers from the last user message, streams SSE deltas when `stream: true` (with a usage
 * chunk when `stream_options.include_usage`), and can be switched to fail the way real providers do.
 *
 * Answers are shaped like Ollama's (no `refusal`, no `logprobs`), the leanest of the compatible servers, so a
 * client that reads them reads the others too.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { deltas, type FakeRequest, sendJson, startFakeHttp, words } from "./fakeHttp.js"

/**
 * How the fake answers the next requests:
 * `ok`; `unauthorized` (401, also what a wrong key gets); `forbidden` (403); `rate-limited` (429 with Retry-After);
 * `bad-request` (400, as for an unknown model); `server-error` (500); `garbage` (200 with a body that is not JSON,
 * or SSE frames that are not JSON and no `[DONE]`); `wrong-shape` (200 with JSON that is not a completion, or
 * chunks without choices); `truncated` (a stream that stops after two deltas, no finish reason); `stream-error`
 * (one delta, then an `{error}` frame); `stall` (headers and one delta for a stream, nothing for a chat, then silence);
 * `no-usage` (a good answer without usage, as older llama.cpp builds give).
 */
export type FakeMode =
  | "ok"
  | "unauthorized"
  | "forbidden"
  | "rate-limited"
  | "bad-request"
  | "server-error"
  | "garbage"
  | "wrong-shape"
  | "truncated"
  | "stream-error"
  | "stall"
  | "no-usage"

/** Options of the fake. */
export interface FakeOpenAiOptions {
  /** The bearer key it accepts; absent means it checks none (like Ollama). */
  readonly apiKey?: string
  /** The reply to a conversation whose last user message is `text`; default `You said: <text>`. */
  readonly reply?: (text: string) => string
}

/** A running fake. */
export interface FakeOpenAi {
  /** The API root to give a provider as `baseUrl`, ending in `/v1`. */
  readonly url: string
  /** Every request received, in order (a live view). */
  readonly requests: ReadonlyArray<FakeRequest>
  /** Switches how the following requests are answered; `retryAfter` is the 429's Retry-After (default `7`). */
  readonly setMode: (mode: FakeMode, options?: { readonly retryAfter?: string }) => Effect.Effect<void>
  /** Waits until at least `count` requests have arrived (to move a `TestClock` only once a call is in flight). */
  readonly received: (count: number) => Effect.Effect<void>
}

interface WireMessage {
  readonly role?: unknown
  readonly content?: unknown
}

const lastUserText = (body: unknown): string => {
  const messages = typeof body === "object" && body !== null && "messages" in body && Array.isArray(body.messages)
    ? (body.messages as ReadonlyArray<WireMessage>)
    : []
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role === "user" && typeof m.content === "string") return m.content
  }
  return ""
}

const promptWords = (body: unknown): number =>
  typeof body === "object" && body !== null && "messages" in body && Array.isArray(body.messages)
    ? (body.messages as ReadonlyArray<WireMessage>).reduce((n, m) => n + (typeof m.content === "string" ? words(m.content) : 0), 0)
    : 0

const field = (body: unknown, key: string): unknown =>
  typeof body === "object" && body !== null ? (body as Record<string, unknown>)[key] : undefined

const errorBody = (message: string, type: string, code: string | null) => ({ error: { message, type, param: null, code } })

/** Starts the fake on 127.0.0.1 with a free port; it stops (dropping any open connection) when the scope closes. */
export const startFakeOpenAi = (options: FakeOpenAiOptions = {}): Effect.Effect<FakeOpenAi, never, Scope.Scope> =>
  Effect.gen(function* () {
    const reply = options.reply ?? ((text: string) => `You said: ${text}`)
    let mode: FakeMode = "ok"
    let retryAfter = "7"

    const server = yield* startFakeHttp((req, res, body, count) => {
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        return sendJson(res, 404, errorBody(`no route ${req.method} ${req.url}`, "invalid_request_error", null))
      }
      const presented = /^Bearer (.*)$/.exec(req.headers.authorization ?? "")?.[1]
      if (mode === "unauthorized" || (options.apiKey !== undefined && presented !== options.apiKey)) {
        // Like OpenAI, quote the key that was presented: the client must not pass it on.
        return sendJson(res, 401, errorBody(`Incorrect API key provided: ${presented ?? "(none)"}`, "invalid_request_error", "invalid_api_key"))
      }
      const stream = field(body, "stream") === true
      const model = typeof field(body, "model") === "string" ? (field(body, "model") as string) : "unknown"
      switch (mode) {
        case "forbidden":
          return sendJson(res, 403, errorBody("This key may not use this model", "invalid_request_error", "model_not_allowed"))
        case "rate-limited":
          return sendJson(res, 429, errorBody("Rate limit reached, slow down", "requests", "rate_limit_exceeded"), { "retry-after": retryAfter })
        case "bad-request":
          return sendJson(res, 400, errorBody(`The model \`${model}\` does not exist`, "invalid_request_error", "model_not_found"))
        case "server-error":
          return sendJson(res, 500, errorBody("The server had an error while processing your request", "server_error", null))
        default:
          break
      }
      if (!stream) {
        if (mode === "stall") return
        if (mode === "garbage") {
          res.writeHead(200, { "content-type": "application/json" })
          return res.end("<html>this is not json {")
        }
        if (mode === "wrong-shape") return sendJson(res, 200, { object: "chat.completion", result: "no choices here" })
        const text = reply(lastUserText(body))
        return sendJson(res, 200, {
          id: `chatcmpl-${count}`,
          object: "chat.completion",
          created: 1_700_000_000,
          model,
          system_fingerprint: "fp_fake",
          choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
          ...(mode === "no-usage"
            ? {}
            : { usage: { prompt_tokens: promptWords(body), completion_tokens: words(text), total_tokens: promptWords(body) + words(text) } })
        })
      }

      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
      const send = (data: unknown) => res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`)
      const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
        id: `chatcmpl-${count}`,
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, delta, finish_reason: finish }]
      })
      const text = reply(lastUserText(body))
      const parts = deltas(text)
      if (mode === "garbage") {
        send("this is not json")
        send("{ neither is this")
        return res.end()
      }
      if (mode === "wrong-shape") {
        send({ object: "chat.completion.chunk", result: "no choices here" })
        send("[DONE]")
        return res.end()
      }
      send(chunk({ role: "assistant", content: "" }, null))
      if (mode === "stall") return send(chunk({ content: parts[0] ?? "" }, null))
      if (mode === "stream-error") {
        send(chunk({ content: parts[0] ?? "" }, null))
        send(errorBody("The model crashed mid-answer", "server_error", null))
        return res.end()
      }
      const shown = mode === "truncated" ? parts.slice(0, 2) : parts
      for (const part of shown) send(chunk({ content: part }, null))
      if (mode === "truncated") return res.end()
      send(chunk({}, "stop"))
      const streamOptions = field(body, "stream_options")
      if (field(streamOptions, "include_usage") === true && mode !== "no-usage") {
        send({
          id: `chatcmpl-${count}`,
          object: "chat.completion.chunk",
          created: 1_700_000_000,
          model,
          choices: [],
          usage: { prompt_tokens: promptWords(body), completion_tokens: words(text), total_tokens: promptWords(body) + words(text) }
        })
      }
      send("[DONE]")
      res.end()
    })

    return {
      url: `http://127.0.0.1:${server.port}/v1`,
      requests: server.requests,
      setMode: (next, opts = {}) =>
        Effect.sync(() => {
          mode = next
          retryAfter = opts.retryAfter ?? "7"
        }),
      received: server.received
    }
  })
