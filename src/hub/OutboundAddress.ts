/**
 * Where the hub may connect: every call it makes to a URL a key holder registered (an A2A card, a saga step's agent
 * endpoint) goes to the public internet only, unless the operator says its agents live on its own network
 * (`mesh hub --outbound-urls any`). Otherwise a registered URL would make the hub a proxy into the networks it sits
 * on — a loopback admin port, a cloud metadata address — with the answer shown back to whoever registered it.
 *
 * The rule is applied when a connection is made, on every address a name resolves to (a name that resolves to a
 * public address when checked and to a private one when connected, DNS rebinding, cannot slip through), and to IP
 * literals, which are never looked up. Non-public: RFC 6890's special-purpose ranges, and every IPv6 form that embeds
 * an IPv4 address (IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16`, Teredo
 * `2001::/32`), since the hub cannot know where a gateway sends them; IPv4-mapped `::ffff:a.b.c.d` is judged by its
 * IPv4 address.
 *
 * A refusal names neither the host nor what it resolved to: the hub's network is not the caller's to map.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as dns from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import type * as stream from "node:stream"

/** Which URLs the hub's outbound calls may reach: `public` (the default) or `any` (agents on the hub's own networks). */
export type OutboundUrls = "public" | "any"

const notPublic = new net.BlockList()
for (const [prefix, bits] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24], ["203.0.113.0", 24],
  ["224.0.0.0", 4], ["240.0.0.0", 4]
] as const) notPublic.addSubnet(prefix, bits, "ipv4")
// BlockList judges an IPv4-mapped address (::ffff:a.b.c.d) by the IPv4 ranges itself.
for (const [prefix, bits] of [
  ["::", 96], // unspecified, loopback and IPv4-compatible (::a.b.c.d, deprecated)
  ["::ffff:0:0:0", 96], // IPv4-translated (RFC 2765)
  ["64:ff9b::", 96], // NAT64, well-known prefix
  ["64:ff9b:1::", 48], // NAT64, local use
  ["100::", 64], // discard-only
  ["2001::", 32], // Teredo (embeds an IPv4 address, obfuscated)
  ["2001:10::", 28], // ORCHID
  ["2001:db8::", 32], // documentation
  ["2002::", 16], // 6to4
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated, still routed on some networks)
  ["ff00::", 8] // multicast
] as const) notPublic.addSubnet(prefix, bits, "ipv6")

/** True for an address the hub must not connect to by default (loopback, private, link-local, IPv4-embedding, …). */
export const isNonPublicAddress = (address: string): boolean => {
  const family = net.isIP(address)
  if (family === 0) return true
  return notPublic.check(address, family === 4 ? "ipv4" : "ipv6")
}

/** The refusal of a non-public destination, saying nothing of the address. */
export const notPublicError = (): Error => Object.assign(new Error("not a public address; the hub connects only to public addresses"), { code: "ENOTPUBLIC" })

/** A DNS lookup for node:http and node:net that fails when any address the name resolves to is not public. */
export const publicOnlyLookup: net.LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, "", 4)
    const list = addresses as unknown as ReadonlyArray<dns.LookupAddress>
    if (list.length === 0 || list.some((a) => isNonPublicAddress(a.address))) return callback(notPublicError(), "", 4)
    // node:http asks with all: true since Node 20 (happy eyeballs), else for one address.
    if ((options as { readonly all?: boolean }).all === true) return (callback as unknown as (e: null, a: ReadonlyArray<dns.LookupAddress>) => void)(null, list)
    callback(null, list[0]!.address, list[0]!.family)
  })
}

type CreateConnection = (options: http.ClientRequestArgs, callback?: (err: Error | null, stream: stream.Duplex) => void) => stream.Duplex | null | undefined

/** `agent`, made to connect only to public addresses: IP literals checked here, names through `publicOnlyLookup`. */
const publicOnly = <A extends http.Agent>(agent: A): A => {
  const create: CreateConnection = agent.createConnection.bind(agent)
  agent.createConnection = (options, callback) => {
    const host = (options.host ?? options.hostname ?? "").replace(/^\[|\]$/g, "")
    if (net.isIP(host) !== 0 && isNonPublicAddress(host)) {
      // Asynchronously, as a failed connect would: the agent waits for the callback when nothing is returned.
      process.nextTick(() => callback?.(notPublicError(), undefined as unknown as stream.Duplex))
      return undefined
    }
    return create({ ...options, lookup: publicOnlyLookup }, callback)
  }
  return agent
}

/** An http and an https agent for outbound calls under `urls`. */
export const agents = (urls: OutboundUrls): { readonly http: http.Agent; readonly https: https.Agent } =>
  urls === "any"
    ? { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) }
    : { http: publicOnly(new http.Agent({ keepAlive: true })), https: publicOnly(new https.Agent({ keepAlive: true })) }

/** The `HttpClient` of the hub's calls to registered URLs (node:http, under `urls`); its agents close with the layer. */
export const layerHttpClient = (urls: OutboundUrls): Layer.Layer<HttpClient.HttpClient> =>
  NodeHttpClient.layerWithoutAgent.pipe(
    Layer.provide(
      Layer.scoped(
        NodeHttpClient.HttpAgent,
        Effect.acquireRelease(
          Effect.sync(() => ({ [NodeHttpClient.HttpAgentTypeId]: NodeHttpClient.HttpAgentTypeId, ...agents(urls) }) as NodeHttpClient.HttpAgent),
          (a) => Effect.sync(() => {
            a.http.destroy()
            a.https.destroy()
          })
        )
      )
    )
  )
