/**
 * What mandate verification remembers between calls, as one explicit, bounded object instead of module state.
 *
 * Parsing a token is a pure function of its exact string, and a mandate is presented many times (once per guarded
 * action), so the parsed chain is kept; signatures, keys, key versions, revocation and time are still checked on
 * every verification. Header segments repeat (one per grantor), so each checked header's `kid` is kept too. Both are
 * least-recently-used maps with a stated maximum, and only well-formed tokens up to `maxTokenLength` characters are
 * kept, so garbage cannot grow them.
 *
 * Every runtime gets its own: the `Keys` layers (`Keys.noble`, `KeysNative.layer`) provide a fresh `MandateCache`
 * beside the keys, so two runtimes, or two tests, never share entries. `MandateCache.layer` and `make` give one
 * explicitly; `VerifyOptions.cache` hands one to a single call. With none, verification parses every time.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import { Lru } from "./internal/lru.js"
import type { Mandate, MandateInvalid } from "./Mandate.js"

/** Most header segments remembered (one per grantor in practice). */
export const DEFAULT_HEADER_ENTRIES = 1024
/** Most parsed chains remembered. */
export const DEFAULT_CHAIN_ENTRIES = 512
/** Longest token whose parsed chain is remembered, in characters; longer ones are parsed on every call. */
export const DEFAULT_MAX_CACHED_TOKEN_LENGTH = 16_384

/** A mandate with what its signature covers, as parsed from a token. */
export interface MandateLink {
  readonly mandate: Mandate
  /** The ASCII bytes of `header.payload`, exactly as received: what the signature covers. Never mutated. */
  readonly signingInput: Uint8Array
  readonly signature: Uint8Array
  /** Why `cns` is not valid for the kind, if it is not: found while parsing, reported after the leaf's signature. */
  readonly cnsProblem: string | undefined
}

/**
 * A parsed chain, root first. `constraints` is the first link's `cns` problem (list sizes included), found at parse
 * time because it is cheap but reported only after the leaf's signature. `structural` holds the verdict of the
 * checks between links (a pure function of the chain), computed once and only after every signature verified.
 */
export interface ParsedChain {
  readonly links: ReadonlyArray<MandateLink>
  readonly constraints: MandateInvalid | undefined
  structural?: MandateInvalid | null
}

/** Sizes of a `MandateCache`; each defaults to the constant of the same name. */
export interface MandateCacheOptions {
  readonly headerEntries?: number
  readonly chainEntries?: number
  readonly maxTokenLength?: number
}

/** The caches of mandate verification. */
export interface MandateCacheApi {
  /** The `kid` of each valid header segment seen. */
  readonly headers: Lru<string, string>
  /** Parsed chains by exact token. */
  readonly chains: Lru<string, ParsedChain>
  /** Tokens longer than this are not kept in `chains`. */
  readonly maxTokenLength: number
}

/** A fresh, empty cache. */
export const make = (options: MandateCacheOptions = {}): MandateCacheApi => ({
  headers: new Lru(options.headerEntries ?? DEFAULT_HEADER_ENTRIES),
  chains: new Lru(options.chainEntries ?? DEFAULT_CHAIN_ENTRIES),
  maxTokenLength: options.maxTokenLength ?? DEFAULT_MAX_CACHED_TOKEN_LENGTH
})

/** The mandate verification cache of a runtime; optional: verification without one parses every time. */
export class MandateCache extends Context.Tag("agent-mesh/MandateCache")<MandateCache, MandateCacheApi>() {
  /** A fresh cache of the default sizes per build of the layer. */
  static readonly layer: Layer.Layer<MandateCache> = Layer.sync(MandateCache, () => make())
}

/** A fresh cache of the default sizes per build of the layer. */
export const layer = MandateCache.layer
