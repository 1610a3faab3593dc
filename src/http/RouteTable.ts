/**
 * Method + path matching for the routes an HttpApi declares (`/v1/agents/:didHash`), built once at start.
 * Static paths are one map lookup; parameterized paths are matched segment by segment.
 *
 * Floor: http (docs/architecture.md §3).
 */

/** A match: the route and its decoded path parameters. */
export interface Match<A> {
  readonly route: A
  readonly params: Readonly<Record<string, string | undefined>>
}

interface Compiled<A> {
  readonly route: A
  readonly segments: ReadonlyArray<string>
  // Index → parameter name for `:name` segments; literal segments are compared as they are.
  readonly names: ReadonlyArray<string | undefined>
  readonly rest: string | undefined
}

const NO_PARAMS: Readonly<Record<string, string | undefined>> = Object.freeze({})

/** A route table keyed by method. */
export class RouteTable<A> {
  private readonly statics = new Map<string, A>()
  private readonly dynamic = new Map<string, Array<Compiled<A>>>()

  /** Adds a route; the first route added wins when several match. */
  add(method: string, path: string, route: A): void {
    if (!path.includes(":") && !path.includes("*")) {
      const key = `${method} ${path}`
      if (!this.statics.has(key)) this.statics.set(key, route)
      return
    }
    const segments = path.split("/")
    let rest: string | undefined
    if (segments[segments.length - 1] === "*") {
      segments.pop()
      rest = "*"
    }
    const names = segments.map((s) => (s.startsWith(":") ? s.slice(1).replace(/\?$/, "") : undefined))
    const list = this.dynamic.get(method) ?? []
    list.push({ route, segments, names, rest })
    this.dynamic.set(method, list)
  }

  /** The route for `method` and `path` (path without the query string), or undefined. */
  find(method: string, path: string): Match<A> | undefined {
    const hit = this.statics.get(`${method} ${path}`)
    if (hit !== undefined) return { route: hit, params: NO_PARAMS }
    const list = this.dynamic.get(method)
    if (list === undefined) return undefined
    const parts = path.split("/")
    // Literal segments are compared first, so parameters are decoded only for the route that matches.
    outer: for (const c of list) {
      if (c.rest === undefined ? parts.length !== c.segments.length : parts.length < c.segments.length) continue
      for (let i = 0; i < c.segments.length; i++) {
        const name = c.names[i]
        if (name === undefined ? parts[i] !== c.segments[i] : parts[i] === "") continue outer
      }
      const params: Record<string, string | undefined> = {}
      for (let i = 0; i < c.segments.length; i++) {
        const name = c.names[i]
        if (name === undefined) continue
        const part = parts[i]!
        if (!part.includes("%")) {
          params[name] = part
          continue
        }
        try {
          params[name] = decodeURIComponent(part)
        } catch {
          continue outer
        }
      }
      if (c.rest !== undefined) params["*"] = parts.slice(c.segments.length).join("/")
      return { route: c.route, params }
    }
    return undefined
  }
}
