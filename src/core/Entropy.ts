/**
 * Where the mesh's randomness comes from, outside Effect's `Random` (which stays for sampling, e.g. the model
 * learner): key seeds, API keys, challenges, nonces, mandate ids, envelope and correlation ids, allocation and saga
 * ids. Secrets and public ids alike are read from this one service, so a simulation that provides a seeded
 * generator replays a run bit for bit (docs/architecture.md, "Randomness").
 *
 * A `Context.Reference` whose default is the platform CSPRNG: production provides nothing and gets the CSPRNG, and
 * no requirement type changes. A seeded generator only exists where a caller asks for one (`seeded`, `layerSeeded`);
 * everything that listens on a real socket or runs the `mesh` CLI calls `requireCsprng` at start and dies on a
 * seeded one, so a seeded layer left in a production assembly stops it rather than mint predictable keys.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomBytes, randomNonceBytes } from "./internal/bytes.js"

/** A source of random bytes and UUIDs. */
export interface EntropyApi {
  /** `csprng` in production; `seeded` only in tests and simulations, and refused by `requireCsprng`. */
  readonly kind: "csprng" | "seeded"
  /** Fresh random bytes, for secrets (key seeds, API keys, challenges). */
  readonly bytes: (n: number) => Uint8Array
  /** Random bytes for public, single-use values (nonces, ids); the CSPRNG draws them from a pool. Never for keys. */
  readonly nonceBytes: (n: number) => Uint8Array
  /** A random (version 4) UUID. */
  readonly uuid: () => string
}

/** The platform CSPRNG (`globalThis.crypto`): the default. */
export const csprng: EntropyApi = {
  kind: "csprng",
  bytes: randomBytes,
  nonceBytes: randomNonceBytes,
  uuid: () => crypto.randomUUID()
}

/** The `Entropy` service: read it where randomness is needed; the CSPRNG unless a layer says otherwise. */
export class Entropy extends Context.Reference<Entropy>()("agent-mesh/Entropy", { defaultValue: (): EntropyApi => csprng }) {}

const rotl = (x: number, k: number): number => (x << k) | (x >>> (32 - k))

// SplitMix32 step: spreads a seed over the generator's state so nearby seeds give unrelated streams.
const splitMix32 = (z: number): number => {
  let x = z
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b)
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35)
  return (x ^ (x >>> 16)) >>> 0
}

/**
 * xoshiro128** (Blackman and Vigna) over a 4-word state: a next-32-bit-word function. Exported for its reference
 * vector test; not a CSPRNG.
 */
export const xoshiro128ss = (state: readonly [number, number, number, number]): (() => number) => {
  let [s0, s1, s2, s3] = state
  return () => {
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0
    const t = s1 << 9
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = rotl(s3, 11)
    return result
  }
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))

/** 16 bytes in the UUID text form. */
const hexUuid = (b: Uint8Array): string => {
  let s = ""
  for (let i = 0; i < 16; i++) s += (i === 4 || i === 6 || i === 8 || i === 10 ? "-" : "") + HEX[b[i]!]
  return s
}

/** Formats 16 bytes as a version 4 UUID (RFC 9562 §5.4), setting the version and variant bits. */
const uuidOf = (b: Uint8Array): string => {
  b[6] = (b[6]! & 0x0f) | 0x40
  b[8] = (b[8]! & 0x3f) | 0x80
  return hexUuid(b)
}

/**
 * A version 7 UUID (RFC 9562 §5.7): the 48-bit Unix time `ms`, then 74 bits of `entropy`'s id bytes. Ids made later
 * sort after earlier ones, so as database keys they are appended to their index rather than written all over it.
 */
export const uuidV7 = (ms: number, entropy: EntropyApi): string => {
  const b = entropy.nonceBytes(16)
  let t = Math.max(0, Math.floor(ms))
  for (let i = 5; i >= 0; i--) {
    b[i] = t % 256
    t = Math.floor(t / 256)
  }
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  return hexUuid(b)
}

/**
 * A seeded, reproducible generator (xoshiro128**): the same seed gives the same bytes and UUIDs in the same order.
 * For tests and simulations only: anything it makes (keys included) is predictable from the seed. `seed` is a safe
 * integer; both its low and high 32 bits count.
 */
export const seeded = (seed: number): EntropyApi => {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`an entropy seed must be a safe integer, got ${seed}`)
  const lo = seed >>> 0
  const hi = Math.floor(seed / 0x1_0000_0000) >>> 0
  let z = lo ^ Math.imul(hi, 0x9e3779b9)
  const word = (): number => {
    z = (z + 0x9e3779b9) | 0
    return splitMix32(z)
  }
  const next = xoshiro128ss([word(), word(), word(), word() | 1])
  const bytes = (n: number): Uint8Array => {
    const out = new Uint8Array(n)
    for (let i = 0; i < n; i += 4) {
      const w = next()
      out[i] = w
      if (i + 1 < n) out[i + 1] = w >>> 8
      if (i + 2 < n) out[i + 2] = w >>> 16
      if (i + 3 < n) out[i + 3] = w >>> 24
    }
    return out
  }
  return { kind: "seeded", bytes, nonceBytes: bytes, uuid: () => uuidOf(bytes(16)) }
}

/** A layer providing a fresh seeded generator per build: for tests and simulations, never production. */
export const layerSeeded = (seed: number): Layer.Layer<Entropy> => Layer.sync(Entropy, () => seeded(seed))

/** A seeded `Entropy` reached something that serves real traffic or runs the CLI. */
export class SeededEntropyRefused extends Data.TaggedError("SeededEntropyRefused")<{ readonly where: string }> {
  override get message() {
    return `${this.where} refuses a seeded Entropy: its keys, API keys and nonces would be predictable from the seed. Provide none (the CSPRNG is the default).`
  }
}

/** Dies with `SeededEntropyRefused` unless the provided `Entropy` is the CSPRNG; `where` names the caller. */
export const requireCsprng = (where: string): Effect.Effect<void> =>
  Effect.flatMap(Entropy, (e) => (e.kind === "csprng" ? Effect.void : Effect.die(new SeededEntropyRefused({ where }))))
