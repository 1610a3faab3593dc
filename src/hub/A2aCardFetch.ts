/**
 * How the hub fetches an A2A agent card: a GET of an http(s) URL, no redirects (the URL registered is the URL read),
 * at most `maxBytes` of body, within `timeoutMs`; the JSON is read strictly. Whatever goes wrong is `CARD_UNREACHABLE`
 * (or `INVALID_CARD` for a body that is not JSON), never a defect: the URL is the caller's, the hub only reads it.
 *
 * The URL is a key holder's, so by default the hub does not fetch from its own network: an address that is loopback,
 * private, link-local, shared (CGN), unspecified or multicast is refused with `CARD_UNREACHABLE`. The check runs in
 * the connection's own DNS lookup, on every address the name resolves to, so a name that resolves to a public
 * address when checked and a private one when connected (DNS rebinding) cannot slip through. A hub whose A2A agents
 * live on its own network sets `a2aCardUrls: "any"` (`CardFetchPolicy`).
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as dns from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import { InvalidCard } from "./Registry.js"
import { tryParseJsonStrict } from "../core/internal/json.js"

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

// Not the public internet: RFC 6890's special-purpose ranges that a server-side fetch must not reach.
const notPublic = new net.BlockList()
for (const [prefix, bits] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["224.0.0.0", 4], ["240.0.0.0", 4]
] as const) notPublic.addSubnet(prefix, bits, "ipv4")
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is checked against the IPv4 ranges by BlockList itself.
for (const [prefix, bits] of [["::", 128], ["::1", 128], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8]] as const) {
  notPublic.addSubnet(prefix, bits, "ipv6")
}

/** True for an address a hub must not fetch from by default (loopback, private, link-local, …). */
export const isNonPublicAddress = (address: string): boolean => {
  const family = net.isIP(address)
  if (family === 0) return true
  return notPublic.check(address, family === 4 ? "ipv4" : "ipv6")
}

/** A DNS lookup for node:http that fails when any address the name resolves to is not public. */
const publicOnlyLookup: net.LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, "", 4)
    const list = addresses as unknown as ReadonlyArray<dns.LookupAddress>
    const blocked = list.find((a) => isNonPublicAddress(a.address))
    if (blocked !== undefined || list.length === 0) {
      return callback(Object.assign(new Error(`${hostname} resolves to ${blocked?.address ?? "no address"}, not a public address`), { code: "ENOTPUBLIC" }), "", 4)
    }
    // node:http asks with all: true since Node 20 (happy eyeballs), else for one address.
    if ((options as { readonly all?: boolean }).all === true) return (callback as unknown as (e: null, a: ReadonlyArray<dns.LookupAddress>) => void)(null, list)
    callback(null, list[0]!.address, list[0]!.family)
  })
}

/** GETs `url` and reads at most `max` bytes of a 200 answer, whatever the length it declares. */
const get = (url: URL, max: number, allowPrivate: boolean, signal: AbortSignal): Promise<string> =>
  new Promise((resolve, reject) => {
    // An IP literal is not looked up, so it is checked here.
    const host = url.hostname.replace(/^\[|\]$/g, "")
    if (!allowPrivate && net.isIP(host) !== 0 && isNonPublicAddress(host)) return reject(new Error(`${host} is not a public address`))
    const client = url.protocol === "https:" ? https : http
    const req = client.get(url, {
      signal,
      headers: { accept: "application/json", "a2a-version": "1.0" },
      ...(allowPrivate ? {} : { lookup: publicOnlyLookup })
    }, (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        return reject(new Error(`${url.href} answered HTTP ${res.statusCode}${res.statusCode !== undefined && res.statusCode >= 300 && res.statusCode < 400 ? " (redirects are not followed)" : ""}`))
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
      return Effect.fail(unreachable(`cannot fetch the agent card: ${JSON.stringify(url)} is not a URL`))
    }
    if (parsedUrl.protocol !== "http:" && parsedUrl.protocol !== "https:") {
      return Effect.fail(unreachable(`cannot fetch the agent card: only http and https URLs are fetched, not ${parsedUrl.protocol}`))
    }
    return Effect.tryPromise({
      try: (signal) => get(parsedUrl, options.maxBytes ?? 64 * 1024, options.allowPrivateAddresses === true, signal),
      catch: (e) => unreachable(`cannot fetch the agent card: ${e instanceof Error ? e.message : String(e)}`)
    })
  }).pipe(
    Effect.timeoutFail({ duration: Duration.millis(options.timeoutMs ?? 5_000), onTimeout: () => unreachable(`the agent card at ${url} did not arrive in time`) }),
    Effect.flatMap((text) => {
      const parsed = tryParseJsonStrict(text)
      return parsed.ok ? Effect.succeed(parsed.value) : Effect.fail(new InvalidCard({ code: "INVALID_CARD", message: `the agent card is not JSON (${parsed.error.reason})` }))
    })
  )
