/**
 * The docs' error tables are the one list a client reads: every status and `code` the hub (registry and platform)
 * and the agent server can answer, taken from their HttpApi declarations (the OpenAPI documents they serve, so the
 * serving layer's own refusals are included), must appear in docs/hub.md "Errors" and docs/agent.md "All codes"
 * on the row of that status. A row may name a group by section (`mesh-sig codes (§4)`): then the code must appear
 * in that section of the same page.
 */
import { assert, describe, it } from "@effect/vitest"
import * as OpenApi from "@effect/platform/OpenApi"
import * as fs from "node:fs"
import * as path from "node:path"
import { AgentApi } from "../src/agent/AgentApi.js"
import { HubApi, PlatformApi } from "../src/hub/HubApi.js"
import { HubWithoutSagasApi } from "../src/hub/SagasDisabled.js"

type Json = Record<string, unknown>

/** Every (status, code) an OpenAPI document's error responses can carry, from the `code` enums of their schemas. */
const answered = (doc: Json): Map<number, Set<string>> => {
  const schemas = ((doc.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>
  const codesOf = (schema: Json | undefined, seen: Set<string>): Array<string> => {
    if (schema === undefined) return []
    const ref = schema.$ref
    if (typeof ref === "string") {
      const name = ref.replace("#/components/schemas/", "")
      if (seen.has(name)) return []
      return codesOf(schemas[name], new Set([...seen, name]))
    }
    const nested = [...((schema.anyOf ?? []) as Array<Json>), ...((schema.oneOf ?? []) as Array<Json>), ...((schema.allOf ?? []) as Array<Json>)]
    const code = (schema.properties as Record<string, Json> | undefined)?.code
    const own = code === undefined ? [] : [...((code.enum ?? []) as Array<string>), ...(typeof code.const === "string" ? [code.const] : [])]
    return [...own, ...nested.flatMap((s) => codesOf(s, seen))]
  }
  const out = new Map<number, Set<string>>()
  for (const item of Object.values(doc.paths as Record<string, Record<string, Json>>)) {
    for (const op of Object.values(item)) {
      for (const [status, response] of Object.entries((op.responses ?? {}) as Record<string, Json>)) {
        if (Number(status) < 400) continue
        const content = (response.content ?? {}) as Record<string, Json>
        for (const media of Object.values(content)) {
          for (const c of codesOf(media.schema as Json | undefined, new Set())) {
            const set = out.get(Number(status)) ?? new Set<string>()
            set.add(c)
            out.set(Number(status), set)
          }
        }
      }
    }
  }
  return out
}

/** A page of docs/ with its error table (the first table under `heading`) as status → the text of its rows. */
const page = (file: string, heading: string) => {
  const text = fs.readFileSync(path.resolve("docs", file), "utf8")
  const start = text.indexOf(`\n${heading}\n`)
  assert.isAtLeast(start, 0, `${file} has no "${heading}"`)
  const rows = new Map<number, string>()
  let inTable = false
  for (const line of text.slice(start + heading.length + 2).split("\n")) {
    const m = /^\| (\d{3}) \|(.*)$/.exec(line)
    if (m !== null) {
      rows.set(Number(m[1]), `${rows.get(Number(m[1])) ?? ""} ${m[2]}`)
      inTable = true
    } else if (inTable && !line.startsWith("|")) break
  }
  /** The text of section `n` (`## n. …`) of the page. */
  const section = (n: string) => {
    const at = text.indexOf(`\n## ${n}. `)
    if (at < 0) return ""
    const next = text.indexOf("\n## ", at + 1)
    return text.slice(at, next < 0 ? undefined : next)
  }
  return { rows, section }
}

/** What the page's table misses of what the documents answer, one line each. */
const missing = (docs: Array<Json>, file: string, heading: string) => {
  const { rows, section } = page(file, heading)
  const gaps: Array<string> = []
  for (const doc of docs) {
    for (const [status, codes] of answered(doc)) {
      for (const code of codes) {
        const row = rows.get(status)
        if (row === undefined) {
          gaps.push(`${status} ${code}: no row for ${status}`)
          continue
        }
        if (row.includes(`\`${code}\``)) continue
        const cited = [...row.matchAll(/§(\d+)/g)].some((m) => section(m[1]!).includes(`\`${code}\``))
        if (!cited) gaps.push(`${status} ${code}`)
      }
    }
  }
  return [...new Set(gaps)].sort()
}

describe("the docs' error tables", () => {
  it("the answers of OpenAPI documents are read (the check sees what it checks)", () => {
    const hub = answered(OpenApi.fromApi(HubApi) as unknown as Json)
    assert.isTrue(hub.get(401)?.has("SIGNATURE_INVALID"))
    assert.isTrue(hub.get(421)?.has("HOST_NOT_ALLOWED"))
    assert.isTrue(answered(OpenApi.fromApi(AgentApi) as unknown as Json).get(403)?.has("CALLER_NOT_ALLOWED"))
  })

  it("docs/hub.md \"Errors\" lists every status and code of the hub's registry, ledger and platform", () => {
    assert.deepStrictEqual(missing([OpenApi.fromApi(HubApi) as unknown as Json, OpenApi.fromApi(HubWithoutSagasApi) as unknown as Json, OpenApi.fromApi(PlatformApi) as unknown as Json], "hub.md", "## Errors"), [])
  })

  it("docs/agent.md \"All codes\" lists every status and code of the agent server", () => {
    assert.deepStrictEqual(missing([OpenApi.fromApi(AgentApi) as unknown as Json], "agent.md", "## 8. All codes"), [])
  })
})
