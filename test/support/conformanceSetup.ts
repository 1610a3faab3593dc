/**
 * Vitest setup for the hub and agent suites: every response their tests receive through `fetch` (raw requests and
 * the typed clients, which fetch through the global) from one of our servers is checked against the `/openapi.json`
 * that server serves. A test whose responses contradict the document fails after it ran, listing each contradiction.
 *
 * Our servers are recognised by the `X-Correlation-Id` every response of theirs carries; the document is fetched
 * from the same origin once per file (and again when a check fails, in case the port now belongs to another
 * server). An origin without a document (a test double, a MeshServer) is not checked.
 */
import { afterEach, expect } from "vitest"
import type { Check } from "./openApiConformance.js"

/** The test files whose responses are checked. */
export const CHECKED_FILES = /[\\/]test[\\/](hub|agent|saga)[\\/]|[\\/]test[\\/]OpenApiConformance\.test\.ts$/

/**
 * What the recorder did in this file: responses checked, and contradictions not yet reported (a test that provokes
 * some on purpose takes them out with `splice`).
 */
export const tally = { checked: 0, violations: [] as Array<string> }

const original = globalThis.fetch
const documents = new Map<string, Promise<{ readonly text: string; readonly check: Check } | undefined>>()

const loadDocument = (origin: string) =>
  original(`${origin}/openapi.json`).then(
    async (res) => {
      if (res.status !== 200 || !(res.headers.get("content-type") ?? "").includes("json")) return undefined
      const text = await res.text()
      // Loaded on first use: files that are not checked do not pay for ajv.
      const { checkerFor } = await import("./openApiConformance.js")
      return { text, check: checkerFor(JSON.parse(text)) }
    },
    () => undefined
  )

const documentOf = (origin: string, fresh: boolean) => {
  let doc = documents.get(origin)
  if (doc === undefined || fresh) documents.set(origin, (doc = loadDocument(origin)))
  return doc
}

const record = async (method: string, url: URL, res: Response): Promise<void> => {
  if (!res.headers.has("x-correlation-id") || !["127.0.0.1", "localhost", "[::1]"].includes(url.hostname)) return
  const contentType = res.headers.get("content-type")
  // A stream is checked for its status and media type only; reading it would wait for its end.
  const body = (contentType ?? "").includes("text/event-stream") ? undefined : await res.clone().text()
  const observed = { method, path: url.pathname, status: res.status, contentType, body }
  const doc = await documentOf(url.origin, false)
  if (doc === undefined) return
  let problems = doc.check(observed)
  if (problems.length > 0) {
    const again = await documentOf(url.origin, true)
    if (again !== undefined && again.text !== doc.text) problems = again.check(observed)
  }
  tally.checked++
  tally.violations.push(...problems)
}

// The check runs before the response is handed over, so it is complete when the test sees the response (and the
// server is still up to serve its document). The request is not rebuilt: its body may be a one-shot stream.
const recording: typeof globalThis.fetch = async (input, init) => {
  const res = await original(input, init)
  const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase()
  const url = new URL(input instanceof Request ? input.url : String(input))
  await record(method, url, res).catch((e: unknown) => void tally.violations.push(`recorder failed on ${method} ${url.href}: ${String(e)}`))
  return res
}

if (CHECKED_FILES.test(expect.getState().testPath ?? "")) {
  globalThis.fetch = recording
  afterEach(() => {
    const fresh = tally.violations.splice(0)
    if (fresh.length > 0) throw new Error(`responses contradict /openapi.json:\n${fresh.join("\n")}`)
  })
}
