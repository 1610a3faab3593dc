/**
 * Writes test/vectors/commit-tokens.json from fixed seeds and fixed receipts. The committed file is what the tests
 * read; rerun this only when the token format changes on purpose (`npx tsx scripts/gen-commit-token-vectors.ts`).
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { digestResult, sign, verify } from "../src/core/CommitToken.js"
import { Keys } from "../src/core/Keys.js"
import { fromHex, toBase64Url, toHex, utf8 } from "../src/core/internal/bytes.js"

const agent = { did: "did:mesh:travel.flights", seedHex: "0303030303030303030303030303030303030303030303030303030303030303" }

const cases = [
  { name: "flight booked", result: "booked flight LH123, seat 14C", receipt: { sagaId: "saga_01", step: "flight", capability: "book-flight", amountUsd: "412.50" } },
  { name: "nothing charged", result: "", receipt: { sagaId: "saga_01", step: "hotel-cancel", capability: "cancel-hotel", amountUsd: "0.00" } },
  { name: "micro amount, unicode result", result: "réservé ✓", receipt: { sagaId: "saga é/2", step: "car", capability: "rent-car", amountUsd: "0.000001" } }
]

const program = Effect.gen(function* () {
  const keys = yield* Keys
  const key = yield* keys.importPrivateKey(fromHex(agent.seedHex))
  const tokens = []
  for (const c of cases) {
    const resultDigest = yield* digestResult(c.result)
    const receipt = { ...c.receipt, resultDigest, at: "2026-01-01T12:00:00.000Z", issuer: agent.did }
    const token = yield* sign(receipt, key)
    // `signed` is the receipt as verification returns it: the amount in Money's canonical form.
    tokens.push({ name: c.name, result: c.result, receipt, token, signed: yield* verify(token, key.publicKey) })
  }
  const [h, p, s] = tokens[0]!.token.split(".") as [string, string, string]
  const forged = JSON.parse(Buffer.from(p, "base64url").toString("utf8")) as Record<string, unknown>
  const invalid = [
    { name: "amount raised after signing", token: `${h}.${toBase64Url(utf8(JSON.stringify({ ...forged, amountUsd: "4125" })))}.${s}`, expect: "SIGNATURE_INVALID" },
    { name: "padded signature", token: `${h}.${p}.${s}=`, expect: "MALFORMED_TOKEN" },
    { name: "mandate typ", token: `${toBase64Url(utf8(JSON.stringify({ alg: "EdDSA", typ: "mandate+jwt", kid: `${agent.did}#key-1` })))}.${p}.${s}`, expect: "MALFORMED_TOKEN" }
  ]
  const out = {
    description: "Commit tokens (docs/protocol.md §13): JWS EdDSA over the JCS receipt; fixed seed and time.",
    issuer: { did: agent.did, seedHex: agent.seedHex, publicKeyHex: toHex(key.publicKey) },
    tokens,
    invalid
  }
  fs.writeFileSync("test/vectors/commit-tokens.json", JSON.stringify(out, null, 2) + "\n")
})

Effect.runPromise(Effect.provide(program, Keys.noble)).catch((e) => {
  console.error(e)
  process.exit(1)
})
