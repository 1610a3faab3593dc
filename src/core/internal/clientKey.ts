/**
 * The key a per-client limit counts under, from a socket's remote address. An IPv4 address is its own key (an
 * IPv4-mapped IPv6 address, `::ffff:a.b.c.d`, is the IPv4 one). An IPv6 address counts by its /64: one subscriber is
 * routinely handed a whole /64, so keying by the full address would give one party 2^64 separate budgets.
 *
 * Floor: core (docs/architecture.md §3).
 */

const MAPPED_V4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i

/** Expands an IPv6 address (no zone) to its eight 16-bit groups, or undefined when it is not one. */
const groupsOf = (address: string): Array<string> | undefined => {
  const halves = address.split("::")
  if (halves.length > 2) return undefined
  const head = halves[0] === "" ? [] : halves[0]!.split(":")
  const tail = halves.length === 2 ? (halves[1] === "" ? [] : halves[1]!.split(":")) : []
  // An embedded IPv4 tail (`::1.2.3.4`) takes two groups.
  const last = tail.length > 0 ? tail[tail.length - 1]! : head[head.length - 1]
  const v4 = last !== undefined && last.includes(".") ? 1 : 0
  const missing = 8 - head.length - tail.length - v4
  if (halves.length === 1 ? missing !== 0 : missing < 0) return undefined
  const groups = [...head, ...Array.from({ length: halves.length === 2 ? missing : 0 }, () => "0"), ...tail]
  if (groups.some((g) => !/^[0-9a-f]{1,4}$/i.test(g) && !g.includes("."))) return undefined
  return groups
}

/** The limit key of `address`: IPv4 as is, IPv4-mapped as IPv4, IPv6 as its /64 (`2001:db8:1:2::/64`). */
export const clientKey = (address: string): string => {
  const mapped = MAPPED_V4.exec(address)
  if (mapped) return mapped[1]!
  if (!address.includes(":")) return address
  const groups = groupsOf(address.split("%")[0]!)
  if (groups === undefined) return address
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(":")}::/64`
}
