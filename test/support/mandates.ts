/**
 * Fixtures for mandate tests: parties from fixed seeds, static resolvers, and raw signing of arbitrary headers and
 * payloads (to build tokens our issuing functions refuse to make, as a compromised or careless grantor might).
 */
import * as Effect from "effect/Effect"
import { Keys, type PrivateKey } from "../../src/core/Keys.js"
import { type KeyResolverApi, makeStatic, type ResolvedKey } from "../../src/core/KeyResolver.js"
import { toBase64Url, utf8 } from "../../src/core/internal/bytes.js"

/** A DID with its key. */
export interface Party {
  readonly did: string
  readonly key: PrivateKey
}

/** A 32-byte seed filled with `n`. */
export const seedOf = (n: number): Uint8Array => new Uint8Array(32).fill(n)

/** The party `did:mesh:<name>` with the key from seed `n`. */
export const party = (name: string, n: number) =>
  Effect.flatMap(Keys, (k) => Effect.map(k.importPrivateKey(seedOf(n)), (key): Party => ({ did: `did:mesh:${name}`, key })))

/** The usual cast: alice grants bob, bob grants carol, carol grants dave, dave grants erin. */
export const cast = Effect.all({
  alice: party("alice", 1),
  bob: party("bob", 2),
  carol: party("carol", 3),
  dave: party("dave", 4),
  erin: party("erin", 5),
  mallory: party("mallory", 9)
})

/** A static resolver for the parties, each at key version 1 unless `versions` says otherwise. */
export const resolverFor = (parties: ReadonlyArray<Party>, versions: Readonly<Record<string, number>> = {}): KeyResolverApi => {
  const map: Record<string, ResolvedKey> = {}
  for (const p of parties) map[p.did] = { publicKey: p.key.publicKey, keyVersion: versions[p.did] ?? 1 }
  return makeStatic(map)
}

/** Signs any header and payload as a JWS compact token, exactly as given. */
export const signRaw = (header: unknown, payload: unknown, key: PrivateKey) =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const input = `${toBase64Url(utf8(JSON.stringify(header)))}.${toBase64Url(utf8(JSON.stringify(payload)))}`
    const sig = yield* keys.sign(key, utf8(input))
    return `${input}.${toBase64Url(sig)}`
  })

/** The standard header for a grantor. */
export const headerFor = (did: string) => ({ alg: "EdDSA", typ: "mandate+jwt", kid: `${did}#key-1` })

/** The decoded payload of a token (no checks). */
export const payloadOf = (token: string): Record<string, unknown> =>
  JSON.parse(new TextDecoder().decode(Buffer.from(token.split(".")[1]!, "base64url"))) as Record<string, unknown>
