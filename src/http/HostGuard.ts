/**
 * Which `Host` and `Origin` a server answers, decided from sets built once at start (no per-request parsing beyond
 * slicing the header).
 *
 * Host (DNS rebinding): a page on `evil.example` whose name is re-pointed at 127.0.0.1 or a LAN address reaches the
 * server as "same origin" to the browser, but its requests still say `Host: evil.example`. So a Host that is a DNS
 * name must be one the server was told it answers to: `localhost`, or an entry of `allowedHosts` (a public URL's
 * host is added by the hub and agent servers). A Host that is an IP literal (or absent, HTTP/1.0) is always
 * accepted: rebinding needs a name, and a browser only sends an IP literal to the server at that IP. `"*"` in
 * `allowedHosts` turns the check off (behind a proxy that already checks Host).
 *
 * Origin (cross-site requests): browsers send `Origin` on cross-origin fetches and on form posts. A request whose
 * `Origin` authority is not its own `Host` is served only when the origin is in `allowedOrigins` (`"*"`: any);
 * `Origin: null` (sandboxed frames, files) is never same-origin. Requests without `Origin` (non-browser clients,
 * same-origin GETs) pass.
 *
 * Floor: http (docs/architecture.md §3).
 */

/** The verdicts a server acts on. */
export interface HostGuard {
  /** True when `host` (the raw header value) is one this server answers to. */
  readonly hostAllowed: (host: string | undefined) => boolean
  /** "same" for a same-origin request, "allowed" for an allowed cross origin, "refused" otherwise. */
  readonly origin: (origin: string, host: string | undefined) => "same" | "allowed" | "refused"
}

const IPV4 = /^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/

// The host name of a `Host` value: lower case, port removed, IPv6 brackets kept.
const hostName = (host: string): string => {
  const h = host.toLowerCase()
  if (h.startsWith("[")) {
    const end = h.indexOf("]")
    return end < 0 ? h : h.slice(0, end + 1)
  }
  const colon = h.lastIndexOf(":")
  return colon < 0 ? h : h.slice(0, colon)
}

const isIpLiteral = (name: string): boolean => name.startsWith("[") || IPV4.test(name)

/** Builds the guard for `allowedHosts` (`name` or `name:port`, `"*"`) and `allowedOrigins` (`scheme://host[:port]`, `"*"`). */
export const make = (allowedHosts: ReadonlyArray<string> = [], allowedOrigins: ReadonlyArray<string> = []): HostGuard => {
  const anyHost = allowedHosts.includes("*")
  // Entries with a port match the whole header value; entries without one match the name at any port.
  const names = new Set<string>(["localhost"])
  const exact = new Set<string>()
  for (const entry of allowedHosts) {
    const e = entry.trim().toLowerCase()
    if (e === "" || e === "*") continue
    if (hostName(e) === e) names.add(e)
    else exact.add(e)
  }
  const anyOrigin = allowedOrigins.includes("*")
  const origins = new Set(allowedOrigins.map((o) => o.trim().toLowerCase().replace(/\/+$/, "")))

  // Clients send the same Host on every request: the last verdict answers most of them without slicing.
  let lastHost = ""
  let lastVerdict = false
  const hostAllowed = (host: string | undefined): boolean => {
    if (anyHost || host === undefined) return true
    if (host === lastHost) return lastVerdict
    const name = hostName(host)
    const verdict = names.has(name) || isIpLiteral(name) || exact.has(host.toLowerCase())
    lastHost = host
    lastVerdict = verdict
    return verdict
  }

  const origin = (value: string, host: string | undefined): "same" | "allowed" | "refused" => {
    const o = value.toLowerCase()
    const sep = o.indexOf("://")
    // Authority against Host only: behind a TLS proxy the page is https while this hop is http.
    if (sep > 0 && host !== undefined && o.slice(sep + 3) === host.toLowerCase()) return "same"
    return anyOrigin || origins.has(o) ? "allowed" : "refused"
  }

  return { hostAllowed, origin }
}

/** The host (`name[:port]`) of a URL, for adding a public URL to `allowedHosts`; undefined when it does not parse. */
export const hostOfUrl = (url: string | undefined): string | undefined => {
  if (url === undefined) return undefined
  try {
    return new URL(url).host || undefined
  } catch {
    return undefined
  }
}

/** `hosts` with the host of `publicUrl` (when it parses) added: callers reach a server by its public name. */
export const withHostOf = (hosts: ReadonlyArray<string> | undefined, publicUrl: string | undefined): ReadonlyArray<string> => {
  const host = hostOfUrl(publicUrl)
  return host === undefined ? (hosts ?? []) : [...(hosts ?? []), host]
}
