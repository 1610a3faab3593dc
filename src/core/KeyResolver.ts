/**
 * DID → current public key and key version, as mandate verification needs it: every link of a chain is checked
 * against its grantor's *current* key, so a mandate signed before a rotation stops verifying (KEY_ROTATED).
 *
 * The static layer serves a fixed map (tests, offline verifiers, pinned peers). The hub adds a registry-backed
 * layer later; it is also where mandate revocation plugs in, through `isMandateRevoked`.
 *
 * Every layer answers only keys that pass `isAcceptablePublicKey` (docs/protocol.md §2): a small-order or
 * non-canonical key is answered as KEY_NOT_FOUND, because a stock verifier would accept a forgery under it.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { KeyRevoked } from "./Did.js"
import { isAcceptablePublicKey } from "./internal/ed25519.js"

/** A grantor's current key: raw 32-byte Ed25519 public key and its version (1, 2, … on each rotation). */
export interface ResolvedKey {
  readonly publicKey: Uint8Array
  readonly keyVersion: number
}

/** The resolver knows no key for the DID. */
export class KeyNotFound extends Schema.TaggedError<KeyNotFound>()("KeyNotFound", {
  code: Schema.Literal("KEY_NOT_FOUND"),
  message: Schema.String,
  did: Schema.String
}) {}

/** The resolver could not answer (its registry or database is down); the mandate may be fine: retry later. */
export class KeyResolverUnavailable extends Schema.TaggedError<KeyResolverUnavailable>()("KeyResolverUnavailable", {
  code: Schema.Literal("RESOLVER_UNAVAILABLE"),
  message: Schema.String,
  did: Schema.String
}) {}

/** The operations of a key resolver. */
export interface KeyResolverApi {
  /** The DID's current key; `KeyRevoked` when its key was revoked without a replacement. */
  readonly resolve: (did: string) => Effect.Effect<ResolvedKey, KeyNotFound | KeyRevoked | KeyResolverUnavailable>
  /**
   * Seam for mandate revocation (the hub's registry will implement it): true when the mandate with this `jti`,
   * issued by `issuer`, was revoked. Absent means nothing is ever revoked.
   */
  readonly isMandateRevoked?: (jti: string, issuer: string) => Effect.Effect<boolean>
}

/** The `KeyResolver` service. */
export class KeyResolver extends Context.Tag("agent-mesh/KeyResolver")<KeyResolver, KeyResolverApi>() {
  /** A resolver over a fixed map from DID to its current key. */
  static readonly layerStatic = (
    keys: ReadonlyMap<string, ResolvedKey> | Readonly<Record<string, ResolvedKey>>
  ): Layer.Layer<KeyResolver> => Layer.succeed(KeyResolver, makeStatic(keys))
}

/** A resolver over a fixed map from DID (any case) to its current key; never reports a revoked mandate. */
export const makeStatic = (keys: ReadonlyMap<string, ResolvedKey> | Readonly<Record<string, ResolvedKey>>): KeyResolverApi => {
  const entries: Iterable<readonly [string, ResolvedKey]> = keys instanceof Map ? keys.entries() : Object.entries(keys)
  const map = new Map<string, ResolvedKey>()
  const refused = new Set<string>()
  for (const [did, key] of entries) {
    map.set(did.toLowerCase(), key)
    if (!isAcceptablePublicKey(key.publicKey)) refused.add(did.toLowerCase())
  }
  return {
    resolve: (did) => {
      const key = map.get(did)
      if (key === undefined) return Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `no key known for ${did}`, did }))
      return !refused.has(did)
        ? Effect.succeed(key)
        : Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `INVALID_PUBLIC_KEY: the key configured for ${did} is a small-order point or not canonically encoded`, did }))
    }
  }
}

/** A resolver over a fixed map. */
export const layerStatic = KeyResolver.layerStatic
