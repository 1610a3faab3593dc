/**
 * The part of node's `Buffer` the agent's handlers use (lengths and bytes of UTF-8 text), for runtimes without it
 * (Vercel Edge): injected by the bundler where `Buffer` is named (docs/runtimes.md, "Vercel Edge").
 */
const encoder = new TextEncoder()

/** `Buffer.byteLength` and `Buffer.from` of a string. */
export const Buffer = {
  byteLength: (s: string | Uint8Array): number => (typeof s === "string" ? encoder.encode(s).length : s.byteLength),
  from: (s: string | Uint8Array): Uint8Array => (typeof s === "string" ? encoder.encode(s) : s)
}
