/**
 * A2A agent card signatures (A2A 1.0 §8.4.1): a card carries JWS signatures (`signatures: [{ protected, signature }]`,
 * EdDSA, `kid` the signer's verification method) over its canonical form. The agent server signs its card with this
 * (`A2aCard`); the hub checks it when a refreshed card names other signers than the card it holds, so a key change
 * is accepted only when the new key is the one the hub holds for the signer's DID.
 *
 * The canonical form is the card without `signatures` and without the fields A2A 0.3 clients read beside the 1.0
 * schema (`url`, `protocolVersion`, `preferredTransport`, `additionalInterfaces`), empty strings, arrays and objects
 * left out, in JCS order: the text the official SDKs canonicalize for a card whose other fields are all in the 1.0
 * schema, as ours are.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { canonicalJson } from "./Canonical.js"
import { normalizeDid } from "./Did.js"
import { Keys } from "./Keys.js"
import { fromBase64Url, toBase64Url, utf8 } from "./internal/bytes.js"
import { isRecord } from "./internal/record.js"
import { tryParseJsonStrict } from "./internal/json.js"

/** The fields of a card that only A2A 0.3 clients read; a 1.0 signature does not cover them. */
export const A2A_0_3_FIELDS: ReadonlyArray<string> = ["url", "protocolVersion", "preferredTransport", "additionalInterfaces"]

const cleanEmpty = (v: unknown): unknown => {
  if (v === "" || v === null || v === undefined) return undefined
  if (Array.isArray(v)) {
    const kept = v.map(cleanEmpty).filter((x) => x !== undefined)
    return kept.length > 0 ? kept : undefined
  }
  if (isRecord(v)) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) {
      const c = cleanEmpty(x)
      if (c !== undefined) out[k] = c
    }
    return Object.keys(out).length > 0 ? out : undefined
  }
  return v
}

/** The text a card's signature covers (see the module header); undefined for a card JCS cannot write. */
export const cardSigningInput = (card: Readonly<Record<string, unknown>>): string | undefined => {
  const rest: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(card)) if (k !== "signatures" && !A2A_0_3_FIELDS.includes(k)) rest[k] = v
  return Either.getOrUndefined(canonicalJson(cleanEmpty(rest) ?? {}))
}

/** One signature of a card: its protected header as sent, the DID its `kid` names (lower case), the signature. */
interface CardSignature {
  readonly protected: string
  readonly signer: string | undefined
  readonly signature: string
}

const signaturesOf = (card: unknown): ReadonlyArray<CardSignature> => {
  if (!isRecord(card) || !Array.isArray(card.signatures)) return []
  return card.signatures.flatMap((s: unknown): ReadonlyArray<CardSignature> => {
    if (!isRecord(s) || typeof s.protected !== "string" || typeof s.signature !== "string") return []
    let header: unknown
    try {
      const parsed = tryParseJsonStrict(new TextDecoder().decode(fromBase64Url(s.protected)))
      header = parsed.ok ? parsed.value : undefined
    } catch {
      header = undefined
    }
    const kid = isRecord(header) && typeof header.kid === "string" ? header.kid : undefined
    const signer = kid === undefined ? undefined : normalizeDid(kid.split("#")[0] ?? "")
    return [{ protected: s.protected, signer, signature: s.signature }]
  })
}

/** The DIDs that signed a card (from their `kid`s), sorted, each once; none for an unsigned card. */
export const cardSigners = (card: unknown): ReadonlyArray<string> =>
  [...new Set(signaturesOf(card).flatMap((s) => (s.signer === undefined ? [] : [s.signer])))].sort()

/** Signs a card as `kid` (EdDSA): the `signatures` entry to add. */
export const signCard = (card: Readonly<Record<string, unknown>>, kid: string, privateKey: Parameters<Keys["Type"]["sign"]>[0]) =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const header = toBase64Url(utf8(JSON.stringify({ alg: "EdDSA", typ: "JOSE", kid })))
    const input = cardSigningInput(card)
    if (input === undefined) return yield* Effect.dieMessage("the card cannot be canonicalized")
    const signature = toBase64Url(yield* keys.sign(privateKey, utf8(`${header}.${toBase64Url(utf8(input))}`)))
    return { protected: header, signature }
  })

/** Whether one of the card's signatures by `signer` verifies under `publicKey`. */
export const verifyCardSigner = (card: Readonly<Record<string, unknown>>, signer: string, publicKey: Uint8Array): Effect.Effect<boolean, never, Keys> =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const input = cardSigningInput(card)
    if (input === undefined) return false
    const payload = toBase64Url(utf8(input))
    for (const s of signaturesOf(card)) {
      if (s.signer !== signer) continue
      let signature: Uint8Array
      try {
        signature = fromBase64Url(s.signature)
      } catch {
        continue
      }
      const ok = yield* Effect.orElseSucceed(keys.verify(publicKey, utf8(`${s.protected}.${payload}`), signature), () => false)
      if (ok) return true
    }
    return false
  })
