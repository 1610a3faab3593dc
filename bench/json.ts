/**
 * Strict JSON (I-JSON: no duplicate names, no `__proto__`) beside `JSON.parse` on the same text: a compact
 * envelope-like body of about 1 KB, the same pretty-printed, and a body with non-ASCII text. Target: strict parsing
 * at most 1.3× the time of `JSON.parse` (ratio of rates ≥ 1 / 1.3).
 */
import { parseJsonStrict } from "../src/core/internal/json.js"
import { measureInterleaved, report, type Row } from "./harness.js"

const envelope = (text: string) => ({
  type: "MeshRequest",
  id: "3f1c9a2e-6b7d-4e8f-9a0b-1c2d3e4f5a6b",
  from: "did:mesh:acme.alice",
  to: "did:mesh:acme.bob",
  correlationId: "c0ffee00-1234-4abc-8def-0123456789ab",
  nonce: "Kx3uK1Jd2v8QmV3c0Qe9sA",
  createdAt: "2026-06-01T00:00:00.000Z",
  expiresAt: "2026-06-01T00:05:00.000Z",
  body: {
    capability: "summarize",
    params: { text, maxWords: 120, language: "en", tags: ["news", "short"], options: { temperature: 0.2, topP: 0.9, stream: false } },
    mandate: "eyJhbGciOiJFZERTQSIsInR5cCI6Im1hbmRhdGUrand0In0.eyJpc3MiOiJkaWQ6bWVzaDphbGljZSJ9.c2lnbmF0dXJl"
  },
  proof: {
    type: "DataIntegrityProof",
    cryptosuite: "eddsa-jcs-2022",
    created: "2026-06-01T00:00:00.000Z",
    verificationMethod: "did:mesh:acme.alice#key-1",
    proofPurpose: "assertionMethod",
    proofValue: "z3FXQjecWufY46yg5abdVZsXqLhxhueuSoZgNSARiKBk4HpQ4QbrYAMoqiKFq3rgpEfWn5BbXH9ioFjrYfFWqLSW7"
  }
})

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const bodies = [
    ["1 KB envelope", JSON.stringify(envelope("The quick brown fox jumps over the lazy dog. ".repeat(5).trim()))],
    ["1 KB envelope, pretty-printed", JSON.stringify(envelope("The quick brown fox jumps over the lazy dog."), null, 2)],
    ["1 KB envelope, non-ASCII text", JSON.stringify(envelope("Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. 敏捷的棕色狐狸。"))]
  ] as const
  const rows: Array<Row> = []
  for (const [label, text] of bodies) {
    const [baseline, strict] = measureInterleaved([
      { name: `JSON.parse, ${label} (${text.length} chars)`, op: () => JSON.parse(text) },
      { name: `parseJsonStrict, ${label}`, op: () => parseJsonStrict(text) }
    ])
    rows.push({ figure: strict!, baseline: baseline!, target: Number((1 / 1.3).toFixed(3)) })
    console.log(`${label}: JSON.parse ${(1e6 / baseline!.opsPerSecond).toFixed(2)} µs, strict ${(1e6 / strict!.opsPerSecond).toFixed(2)} µs, ${(baseline!.opsPerSecond / strict!.opsPerSecond).toFixed(2)}× JSON.parse`)
  }
  report("json", rows)
}
