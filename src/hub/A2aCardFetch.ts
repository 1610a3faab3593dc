/**
 * How the hub fetches an A2A agent card: a GET of an http(s) URL, no redirects (the URL registered is the URL read),
 * at most `maxBytes` of body, within `timeoutMs`; the JSON is read strictly. Whatever goes wrong is `CARD_UNREACHABLE`
 * (or `INVALID_CARD` for a body that is not JSON), never a defect: the URL is the caller's, the hub only reads it.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { InvalidCard } from "./Registry.js"
import { tryParseJsonStrict } from "../core/internal/json.js"

/** Fetch limits. */
export interface CardFetchOptions {
  /** Largest card body read, in bytes; default 64 KiB. */
  readonly maxBytes?: number
  /** Time for the whole fetch; default 5 s. */
  readonly timeoutMs?: number
}

const unreachable = (message: string) => new InvalidCard({ code: "CARD_UNREACHABLE", message })

/** Reads `response`'s body as text, refusing past `max` bytes whatever it declares. */
const boundedText = async (response: Response, max: number): Promise<string> => {
  const declared = Number(response.headers.get("content-length") ?? "0")
  if (declared > max) throw new Error(`the card is larger than ${max} bytes`)
  const reader = response.body?.getReader()
  if (reader === undefined) return ""
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > max) {
      await reader.cancel()
      throw new Error(`the card is larger than ${max} bytes`)
    }
    chunks.push(value)
  }
  return new TextDecoder().decode(Buffer.concat(chunks))
}

/** The card at `url`, as parsed JSON. */
export const fetchCard = (url: string, options: CardFetchOptions = {}): Effect.Effect<unknown, InvalidCard> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(url, { signal, redirect: "error", headers: { accept: "application/json", "a2a-version": "1.0" } })
      if (response.status !== 200) throw new Error(`${url} answered HTTP ${response.status}`)
      return boundedText(response, options.maxBytes ?? 64 * 1024)
    },
    catch: (e) => unreachable(`cannot fetch the agent card: ${e instanceof Error ? e.message : String(e)}`)
  }).pipe(
    Effect.timeoutFail({ duration: Duration.millis(options.timeoutMs ?? 5_000), onTimeout: () => unreachable(`the agent card at ${url} did not arrive in time`) }),
    Effect.flatMap((text) => {
      const parsed = tryParseJsonStrict(text)
      return parsed.ok ? Effect.succeed(parsed.value) : Effect.fail(new InvalidCard({ code: "INVALID_CARD", message: `the agent card is not JSON (${parsed.error.reason})` }))
    })
  )
