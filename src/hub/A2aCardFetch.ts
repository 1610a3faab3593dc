/**
 * How the hub fetches an A2A agent card: a GET of an http(s) URL, no redirects (the URL registered is the URL read),
 * at most `maxBytes` of body, within `timeoutMs`; the JSON is read strictly. Whatever goes wrong is `CARD_UNREACHABLE`
 * (or `INVALID_CARD` for a body that is not JSON), never a defect: the URL is the caller's, the hub only reads it.
 *
 * The URL is a key holder's, so by default the hub does not fetch from its own network: a non-public address
 * (`OutboundAddress`: loopback, private, link-local, IPv4-embedding IPv6 forms, …) is refused with
 * `CARD_UNREACHABLE`, checked in the connection's own DNS lookup on every address the name resolves to. A hub whose
 * A2A agents live on its own network sets `a2aCardUrls: "any"` (`CardFetchPolicy`).
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import { InvalidCard } from "./Registry.js"
import { tryParseJsonStrict } from "../core/internal/json.js"
import { isNonPublicAddress, notPublicError, publicOnlyLookup } from "./OutboundAddress.js"

/** Fetch limits. */
export interface CardFetchOptions {
  /** Largest card body read, in bytes; default 64 KiB. */
  readonly maxBytes?: number
  /** Time for the whole fetch; default 5 s. */
  readonly timeoutMs?: number
  /** Fetch from loopback, private and link-local addresses too; default false. */
  readonly allowPrivateAddresses?: boolean
}

/**
 * Which card URLs a hub fetches: `public` (the default) refuses addresses on the hub's own networks. `fetch`
 * replaces the node:http fetch (`fetchCard`), e.g. with a simulation's in-memory network.
 */
export class CardFetchPolicy extends Context.Reference<CardFetchPolicy>()("agent-mesh/hub/CardFetchPolicy", {
  defaultValue: (): {
    readonly allowPrivateAddresses: boolean
    readonly fetch?: (url: string, options: CardFetchOptions) => Effect.Effect<unknown, InvalidCard>
  } => ({ allowPrivateAddresses: false })
}) {}

const unreachable = (message: string) => new InvalidCard({ code: "CARD_UNREACHABLE", message })

/** GETs `url` and reads at most `max` bytes of a 200 answer, whatever the length it declares. */
const get = (url: URL, max: number, allowPrivate: boolean, signal: AbortSignal): Promise<string> =>
  new Promise((resolve, reject) => {
    // An IP literal is not looked up, so it is checked here.
    const host = url.hostname.replace(/^\[|\]$/g, "")
    if (!allowPrivate && net.isIP(host) !== 0 && isNonPublicAddress(host)) return reject(notPublicError())
    const client = url.protocol === "https:" ? https : http
    const req = client.get(url, {
      signal,
      headers: { accept: "application/json", "a2a-version": "1.0" },
      ...(allowPrivate ? {} : { lookup: publicOnlyLookup })
    }, (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        return reject(new Error(`the card's URL answered HTTP ${res.statusCode}${res.statusCode !== undefined && res.statusCode >= 300 && res.statusCode < 400 ? " (redirects are not followed)" : ""}`))
      }
      if (Number(res.headers["content-length"] ?? "0") > max) {
        res.destroy()
        return reject(new Error(`the card is larger than ${max} bytes`))
      }
      const chunks: Array<Buffer> = []
      let size = 0
      res.on("data", (chunk: Buffer) => {
        size += chunk.byteLength
        if (size > max) {
          res.destroy()
          return reject(new Error(`the card is larger than ${max} bytes`))
        }
        chunks.push(chunk)
      })
      res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
      res.on("error", reject)
    })
    req.on("error", reject)
  })

/** The card at `url`, as parsed JSON. */
export const fetchCard = (url: string, options: CardFetchOptions = {}): Effect.Effect<unknown, InvalidCard> =>
  Effect.suspend(() => {
    let parsedUrl: URL
    try {
      parsedUrl = new URL(url)
    } catch {
      return Effect.fail(unreachable("cannot fetch the agent card: the card URL is not a URL"))
    }
    if (parsedUrl.protocol !== "http:" && parsedUrl.protocol !== "https:") {
      return Effect.fail(unreachable(`cannot fetch the agent card: only http and https URLs are fetched, not ${parsedUrl.protocol}`))
    }
    return Effect.tryPromise({
      try: (signal) => get(parsedUrl, options.maxBytes ?? 64 * 1024, options.allowPrivateAddresses === true, signal),
      catch: (e) => unreachable(`cannot fetch the agent card: ${e instanceof Error ? e.message : String(e)}`)
    })
  }).pipe(
    Effect.timeoutFail({ duration: Duration.millis(options.timeoutMs ?? 5_000), onTimeout: () => unreachable("the agent card did not arrive in time") }),
    Effect.flatMap((text) => {
      const parsed = tryParseJsonStrict(text)
      return parsed.ok ? Effect.succeed(parsed.value) : Effect.fail(new InvalidCard({ code: "INVALID_CARD", message: `the agent card is not JSON (${parsed.error.reason})` }))
    })
  )
