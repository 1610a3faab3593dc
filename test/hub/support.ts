/**
 * Shared set-up for hub tests: a hub on a temp SQLite file, its admin key, a client, and helpers for raw requests.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import * as Hub from "../../src/hub/Hub.js"
import * as MeshClient from "../../src/hub/MeshClient.js"
import { signMessage } from "../../src/core/Proof.js"
import { hubOrigin, registrationDocument, WRITE_PROOF_PURPOSE } from "../../src/hub/Registry.js"
import * as Http from "node:http"

/** A fresh database file in its own temp folder. */
export const tempDatabase = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-hub-")), "hub.db")

/** Starts a hub (scoped) and a client with its admin key. */
export const startHub = (options: Partial<Hub.HubOptions> = {}) =>
  Effect.gen(function* () {
    // Lag shedding measures the test runner's load, not the hub's: off here; shedding tests set their lag and limit.
    const serving = { maxEventLoopLagMs: Infinity, ...options.serving }
    const hub = yield* Hub.start({ database: options.database ?? tempDatabase(), ...options, serving })
    const adminKey = Option.getOrThrow(hub.admin).apiKey
    const client = yield* MeshClient.make({ hubUrl: hub.url, apiKey: adminKey, retry: { times: 0 } }).pipe(Effect.provide(FetchHttpClient.layer))
    return { hub, adminKey, client }
  })

/** A raw JSON request, for statuses and bodies the typed client would hide. */
export const request = (url: string, method: string, body?: unknown, apiKey?: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const res = await fetch(url, {
      method,
      headers: { "content-type": "application/json", ...(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }), ...headers },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
    })
    const text = await res.text()
    let json: Record<string, unknown> = {}
    try {
      json = JSON.parse(text)
    } catch {
      json = { text }
    }
    return { status: res.status, body: json, headers: res.headers }
  })

/** The status of `GET path` sent with a `Host` header of our choosing (fetch will not send one). */
export const statusWithHost = (url: string, host: string) =>
  Effect.async<number, Error>((resume) => {
    const req = Http.request(url, { headers: { host } }, (res) => {
      res.resume()
      resume(Effect.succeed(res.statusCode ?? 0))
    })
    req.once("error", (e) => resume(Effect.fail(e)))
    req.end()
  })

/** An agent identity registered in the hub with its own API key. */
export const registeredAgent = (client: MeshClient.MeshClientApi, name: string, endpointUrl = "http://127.0.0.1:9/agent") =>
  Effect.gen(function* () {
    const identity: MeshIdentity = yield* generateDid(name)
    const key = yield* client.createApiKey({ owner: identity.did })
    const record = yield* client.registerAgent({ manifest: { name, meshProtocolVersion: "1.0", capabilities: ["echo"] }, endpointUrl, identity, apiKey: key.apiKey })
    return { identity, apiKey: key.apiKey, record }
  })

/** A raw `POST /v1/agents` body with a registration proof by `signer` over its fields, for the hub at `hubUrl`. */
export const registrationBody = (
  fields: { readonly did: string; readonly manifestCID: string; readonly publicKeyB64: string; readonly endpointUrl: string },
  signer: MeshIdentity,
  hubUrl: string
) =>
  Effect.map(
    Effect.orDie(signMessage(registrationDocument({ ...fields, hub: hubOrigin(hubUrl) ?? hubUrl }), signer.privateKey, verificationMethodId(fields.did), { proofPurpose: WRITE_PROOF_PURPOSE })),
    (signed) => ({ ...fields, proof: signed.proof })
  )
