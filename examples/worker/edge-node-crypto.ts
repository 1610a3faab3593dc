/**
 * What the agent's handlers use of node:crypto, on the Web Crypto API and @noble/hashes, for runtimes without
 * node:crypto (Vercel Edge): bundle with `node:crypto` aliased to this file (docs/runtimes.md, "Vercel Edge"). The
 * key functions are absent on purpose: on these runtimes `Keys.noble` signs and verifies, never `Keys.native`.
 */
import { sha256 } from "@noble/hashes/sha2.js"

const encoder = new TextEncoder()

const toText = (bytes: Uint8Array, encoding: string | undefined): string => {
  switch (encoding) {
    case "hex":
      return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
    case "base64":
    case "base64url": {
      const b64 = btoa(String.fromCharCode(...bytes))
      return encoding === "base64" ? b64 : b64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
    }
    default:
      return new TextDecoder().decode(bytes)
  }
}

/** A digest's bytes, which print as node's Buffer does (`toString("hex")`). */
class Digest extends Uint8Array {
  override toString(encoding?: string): string {
    return toText(this, encoding)
  }
}

/** `createHash("sha256")`: the one hash the handlers take. */
export const createHash = (algorithm: string) => {
  if (algorithm !== "sha256") throw new Error(`createHash: only sha256 is available here, not ${algorithm}`)
  const parts: Array<Uint8Array> = []
  const hash = {
    update: (data: string | Uint8Array) => {
      parts.push(typeof data === "string" ? encoder.encode(data) : data)
      return hash
    },
    digest: (encoding?: string): Digest | string => {
      const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
      let at = 0
      for (const p of parts) {
        all.set(p, at)
        at += p.length
      }
      const out = new Digest(sha256(all))
      return encoding === undefined ? out : out.toString(encoding)
    }
  }
  return hash
}

/** A random UUID from the platform CSPRNG. */
export const randomUUID = (): string => globalThis.crypto.randomUUID()

/** Compares two byte strings of one length in time independent of where they differ. */
export const timingSafeEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) throw new RangeError("Input buffers must have the same byte length")
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}
