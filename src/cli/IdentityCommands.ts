/**
 * The `mesh` commands about one's own identity on a hub: `register` (a DID and its key with no endpoint, for an
 * identity that only calls, signs and grants mandates), `whoami`, and `agents rm`. A caller's key must be on the hub
 * before an agent with mesh-sig, a mandate verifier or a saga can resolve it; registering it needs no running agent.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { type Did, didHash } from "../core/Did.js"
import { MESH_PROTOCOL_VERSION } from "../core/Version.js"
import * as MeshClient from "../hub/MeshClient.js"
import type { AgentRecord } from "../hub/RegistryWire.js"
import { agentNotFound, CliError, didHashArg, meshIdentityOf, printResult, readIdentityFile } from "./Cli.js"

/** The manifest of a caller-only identity: its name, and that it serves nothing. */
export const callerManifest = (did: string): Readonly<Record<string, unknown>> => ({
  name: did,
  meshProtocolVersion: MESH_PROTOCOL_VERSION,
  role: "caller",
  capabilities: []
})

/** What `mesh register` did. */
export type CallerRegistration = "registered" | "unchanged"

const resolveOrNone = (client: MeshClient.MeshClientApi, h: string) =>
  client.resolveAgent(h).pipe(
    Effect.map(Option.some<AgentRecord>),
    Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeedNone)
  )

/**
 * `mesh register`: registers the identity's DID and key on the hub with no endpoint (proof by that key, the API key
 * owning the record). A record already holding the same key is left as it is; one holding another key is refused.
 */
export const registerCaller = (args: { readonly hubUrl: string; readonly identity: string; readonly apiKey: Redacted.Redacted<string>; readonly json?: boolean }) =>
  Effect.gen(function* () {
    const file = yield* readIdentityFile(args.identity)
    const identity = yield* meshIdentityOf(file)
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    const h = didHash(file.did as Did)
    const existing = yield* resolveOrNone(client, h)
    if (Option.isSome(existing)) {
      if (existing.value.publicKeyB64 !== file.publicKeyB64) {
        return yield* Effect.fail(new CliError({ code: "IDENTITY_INVALID", message: `${file.did} is registered on ${args.hubUrl} with another key (key version ${existing.value.keyVersion}); rotate it, or register another DID` }))
      }
      const unchanged = { action: "unchanged" as CallerRegistration, hub: args.hubUrl, record: existing.value }
      yield* printResult(args.json === true, unchanged, () => `${h}  ${file.did}  already registered on ${args.hubUrl} with this key`)
      return unchanged
    }
    const record = yield* client.registerAgent({ manifest: callerManifest(file.did), identity, apiKey: Redacted.value(args.apiKey) })
    const registered = { action: "registered" as CallerRegistration, hub: args.hubUrl, record }
    yield* printResult(args.json === true, registered, () => `${h}  ${file.did}  registered on ${args.hubUrl} (a caller: no endpoint)`)
    return registered
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** What `mesh whoami` tells about an identity: on the hub, `registered` with this key, with `another-key`, or `not-registered`. */
export interface Whoami {
  readonly did: string
  readonly didHash: string
  readonly publicKeyB64: string
  readonly hub: string
  readonly registration: "registered" | "another-key" | "not-registered"
  readonly keyVersion: number | null
  readonly endpointUrl: string | null
}

/** `mesh whoami`: the identity file's DID, didHash and key, and whether the hub holds that key for the DID. */
export const whoami = (args: { readonly hubUrl: string; readonly identity: string; readonly json: boolean }) =>
  Effect.gen(function* () {
    const file = yield* readIdentityFile(args.identity)
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    const h = didHash(file.did as Did)
    const record = yield* resolveOrNone(client, h)
    const shown: Whoami = {
      did: file.did,
      didHash: h,
      publicKeyB64: file.publicKeyB64,
      hub: args.hubUrl,
      registration: Option.isNone(record) ? "not-registered" : record.value.publicKeyB64 === file.publicKeyB64 ? "registered" : "another-key",
      keyVersion: Option.isNone(record) ? null : record.value.keyVersion,
      endpointUrl: Option.isNone(record) || record.value.endpointUrl === "" ? null : record.value.endpointUrl
    }
    if (args.json) {
      yield* Console.log(JSON.stringify(shown, null, 2))
      return shown
    }
    const on = shown.registration === "not-registered"
      ? `not registered on ${args.hubUrl} (mesh register --identity ${args.identity} --hub ${args.hubUrl} --api-key mk_…)`
      : shown.registration === "another-key"
        ? `registered on ${args.hubUrl} with ANOTHER key (key version ${shown.keyVersion}): this file's key is not the DID's`
        : `registered on ${args.hubUrl}, key version ${shown.keyVersion}, ${shown.endpointUrl === null ? "a caller (no endpoint)" : `endpoint ${shown.endpointUrl}`}`
    yield* Console.log(`did      ${shown.did}\ndidHash  ${shown.didHash}\nkey      ${shown.publicKeyB64}\nhub      ${on}`)
    return shown
  }).pipe(Effect.provide(FetchHttpClient.layer))

/**
 * `mesh agents rm <didHash>`: deletes the record with the API key that registered it (or the admin's), signed by the
 * DID's current key when an identity is given (the hub requires it of every key but the admin's).
 */
export const removeAgent = (args: {
  readonly hubUrl: string
  readonly didHash: string
  readonly identity: Option.Option<string>
  readonly apiKey: Redacted.Redacted<string>
  readonly json?: boolean
}) =>
  Effect.gen(function* () {
    const h = yield* didHashArg(args.didHash)
    const file = Option.isNone(args.identity) ? undefined : yield* readIdentityFile(args.identity.value)
    if (file !== undefined && didHash(file.did as Did) !== h) {
      return yield* Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `${args.identity.pipe(Option.getOrElse(() => ""))} is ${file.did} (didHash ${didHash(file.did as Did)}), not ${h}` }))
    }
    const identity = file === undefined ? undefined : yield* meshIdentityOf(file)
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, retry: { times: 2 } })
    yield* client.deleteAgent(h, { apiKey: Redacted.value(args.apiKey), ...(identity === undefined ? {} : { identity }) }).pipe(
      Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.fail(agentNotFound(h, args.hubUrl)))
    )
    yield* printResult(args.json === true, { removed: h, hub: args.hubUrl }, () => `removed ${h} from ${args.hubUrl}`)
  }).pipe(Effect.provide(FetchHttpClient.layer))
