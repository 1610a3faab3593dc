/**
 * Checks HTTP responses against an OpenAPI 3.1 document with a JSON Schema validator (ajv, 2020-12 dialect).
 *
 * Everything comes from the document: the operation is found from the method and the path templates, the status
 * must be one the operation lists, the media type one that status lists, and a JSON body must validate against
 * that media type's schema. A response to a route the document does not have must carry a status some operation
 * lists (the serving layer's api-wide errors, such as 404 ROUTE_NOT_FOUND) and validate against one of those
 * schemas. Schemas are compiled once per document and per response.
 */
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js"
import formats from "ajv-formats"

// ajv-formats is CommonJS; its plugin is also its `default` property, which is what the types describe.
const addFormats = formats.default

/** One response as a client saw it. */
export interface Observed {
  readonly method: string
  /** The URL path, without query. */
  readonly path: string
  readonly status: number
  readonly contentType: string | null
  /** The body text; `undefined` when not read (a stream). */
  readonly body: string | undefined
}

/** A function returning what is wrong with a response (nothing when it conforms). */
export type Check = (observed: Observed) => ReadonlyArray<string>

type JsonObject = Record<string, unknown>

interface Media {
  readonly type: string
  readonly json: boolean
  readonly validate: () => ValidateFunction
}

interface Operation {
  readonly name: string
  readonly method: string
  readonly pattern: RegExp
  readonly literals: number
  /** Status → media types; `[]` when the status has no body. */
  readonly responses: ReadonlyMap<string, ReadonlyArray<Media>>
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

const isObject = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u)

const baseType = (contentType: string): string => contentType.split(";")[0]!.trim().toLowerCase()

const isJson = (type: string): boolean => type === "application/json" || type.endsWith("+json")

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

// `{name}` matches one path segment; literal segments are counted so that `/a/b` wins over `/a/{x}`.
const compilePath = (template: string): { pattern: RegExp; literals: number } => {
  const segments = template.split("/")
  const source = segments.map((s) => (/^\{[^}]+\}$/.test(s) ? "[^/]+" : escapeRegExp(s))).join("/")
  return { pattern: new RegExp(`^${source}$`), literals: segments.filter((s) => !s.startsWith("{")).length }
}

let documents = 0
const cache = new Map<string, Check>()

/** The check for `document` (an OpenAPI 3.1 object); built once per distinct document. */
export const checkerFor = (document: unknown): Check => {
  const key = JSON.stringify(document)
  const cached = cache.get(key)
  if (cached !== undefined) return cached
  const check = build(document)
  cache.set(key, check)
  return check
}

const build = (document: unknown): Check => {
  if (!isObject(document) || !isObject(document.paths)) throw new Error("not an OpenAPI document")
  const id = `urn:agent-mesh:openapi:${++documents}`
  const schemas: Array<unknown> = []
  const ajv = new Ajv2020({ allErrors: true, strict: false })
  addFormats(ajv)
  const operations: Array<Operation> = []
  for (const [template, item] of Object.entries(document.paths)) {
    if (!isObject(item)) continue
    const { pattern, literals } = compilePath(template)
    for (const method of METHODS) {
      const operation = item[method]
      if (!isObject(operation) || !isObject(operation.responses)) continue
      const responses = new Map<string, ReadonlyArray<Media>>()
      for (const [status, response] of Object.entries(operation.responses)) {
        const content = isObject(response) && isObject(response.content) ? response.content : {}
        responses.set(
          status,
          Object.entries(content).map(([type, media]) => {
            const index = schemas.push(isObject(media) && media.schema !== undefined ? media.schema : {}) - 1
            let validate: ValidateFunction | undefined
            return {
              type: baseType(type),
              json: isJson(baseType(type)),
              validate: () => (validate ??= ajv.getSchema(`${id}#/responses/${index}`)!)
            }
          })
        )
      }
      operations.push({ name: `${method.toUpperCase()} ${template}`, method: method.toUpperCase(), pattern, literals, responses })
    }
  }
  // One root holds the components and every response schema, so `#/components/schemas/…` resolves inside it.
  ajv.addSchema({ $id: id, components: document.components ?? {}, responses: schemas })

  const find = (method: string, path: string): Operation | undefined => {
    let best: Operation | undefined
    for (const op of operations) {
      if (op.method === method && op.pattern.test(path) && (best === undefined || op.literals > best.literals)) best = op
    }
    return best
  }

  const problemsWith = (medias: ReadonlyArray<Media>, observed: Observed): ReadonlyArray<string> => {
    const text = observed.body ?? ""
    if (medias.length === 0) return text.length === 0 ? [] : [`a body where the document lists none: ${text.slice(0, 200)}`]
    const type = observed.contentType === null ? undefined : baseType(observed.contentType)
    const media = medias.find((m) => m.type === type)
    if (media === undefined) return [`content-type ${observed.contentType} is not listed (listed: ${medias.map((m) => m.type).join(", ")})`]
    if (!media.json || observed.body === undefined) return []
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      return [`the body is not JSON: ${text.slice(0, 200)}`]
    }
    const validate = media.validate()
    if (validate(value)) return []
    return [`${ajv.errorsText(validate.errors, { dataVar: "body" })} in ${text.slice(0, 300)}`]
  }

  return (observed) => {
    const status = String(observed.status)
    const at = `${observed.method} ${observed.path} → ${status}`
    const op = find(observed.method.toUpperCase(), observed.path)
    if (op !== undefined) {
      const medias = op.responses.get(status)
      if (medias === undefined) return [`${at}: status not documented for ${op.name} (documented: ${[...op.responses.keys()].join(" ")})`]
      return problemsWith(medias, observed).map((p) => `${at} (${op.name}): ${p}`)
    }
    const listed = operations.flatMap((o) => {
      const medias = o.responses.get(status)
      return medias === undefined ? [] : [medias]
    })
    if (listed.length === 0) return [`${at}: no such operation, and no operation documents status ${status}`]
    const problems = listed.map((medias) => problemsWith(medias, observed))
    return problems.some((p) => p.length === 0) ? [] : [`${at} (no such operation): ${problems[0]!.join("; ")}`]
  }
}
