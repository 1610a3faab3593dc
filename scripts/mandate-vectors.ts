/**
 * Builds test/vectors/mandates.json: mandates from fixed seeds, fixed times and fixed `jti`s (signed directly, so
 * the file is byte-for-byte reproducible; Ed25519 signatures are deterministic), each with the verdict a
 * conforming verifier must reach. The committed file is what test/MandateVectors.test.ts reads; that test also
 * rebuilds the vectors and compares, so a change of encoding cannot slip in unnoticed. Rerun only when the
 * protocol changes on purpose: `npx tsx scripts/mandate-vectors.ts`.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Keys, type PrivateKey } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { fromHex, toBase64Url, toHex, utf8 } from "../src/core/internal/bytes.js"

/** Where the vectors live. */
export const VECTORS_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "test", "vectors", "mandates.json")

const T0 = 1_767_225_600 // 2026-01-01T00:00:00Z
const names = ["alice", "bob", "carol", "dave", "mallory"] as const
type Name = (typeof names)[number]
const seedHex = (i: number) => toHex(new Uint8Array(32).fill(i + 1))

/** The vectors file, as a JSON value. */
export const buildVectors = Effect.gen(function* () {
  const keys = yield* Keys
  const key: Record<string, PrivateKey> = {}
  const did = (n: Name) => `did:mesh:${n}`
  for (const [i, n] of names.entries()) key[n] = yield* keys.importPrivateKey(fromHex(seedHex(i)))

  const sign = (signer: Name, payload: Record<string, unknown>, header: Record<string, unknown> = {}) =>
    Effect.gen(function* () {
      const h = { alg: "EdDSA", typ: "mandate+jwt", kid: `${payload.iss as string}#key-1`, ...header }
      const input = `${toBase64Url(utf8(JSON.stringify(h)))}.${toBase64Url(utf8(JSON.stringify(payload)))}`
      return `${input}.${toBase64Url(yield* keys.sign(key[signer]!, utf8(input)))}`
    })
  const claims = (iss: Name, aud: Name, jti: string, kind: string, cns: unknown, extra: Record<string, unknown> = {}) => ({
    iss: did(iss), aud: did(aud), iat: T0, nbf: T0, exp: T0 + 3600, jti, kv: 1, kind, cns, ...extra
  })

  const intent = yield* sign("alice", claims("alice", "bob", "v-intent", "intent", { spendLimitUsd: 100, allowedMerchants: ["shop.example", "books.example"] }))
  const cart = yield* sign("bob", claims("bob", "carol", "v-cart", "cart", { spendLimitUsd: 60.5, allowedMerchants: ["shop.example"] }, { prf: intent }))
  const payment = yield* sign("carol", claims("carol", "dave", "v-payment", "payment", { amountUsd: 42.25, merchant: "shop.example" }, { prf: cart }))
  const taskCns = {
    allowed: ["search", "send_email"], blocked: ["delete"], reversibleOnly: false, humanGates: ["send_email"],
    actionLimits: { send_email: 10 }, computeLimit: { llmTokens: 100000, webRequests: 50 }, dataAccess: ["crm:read"],
    sandbox: true, maxDelegationDepth: 1
  }
  const task = yield* sign("alice", claims("alice", "bob", "v-task", "task", taskCns))
  const taskChild = yield* sign("bob", claims("bob", "carol", "v-task-child", "task", { ...taskCns, allowed: ["search"], actionLimits: { send_email: 2 }, maxDelegationDepth: 0 }, { prf: task }))
  const budget = yield* sign("alice", claims("alice", "bob", "v-budget", "model-budget", { token_budget: 20000, cost_budget_usd: 1.5, quality_threshold: 0.8, task_type: "REASONING", expected_steps: 4 }))

  const [ih, ip, is] = intent.split(".") as [string, string, string]
  const lastChar = is.at(-1)!
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

  const vectors = [
    { name: "intent mandate", token: intent, expectedGrantee: did("bob"), valid: true },
    { name: "intent → cart → payment chain", token: payment, expectedGrantee: did("dave"), valid: true },
    { name: "task mandate attenuated once", token: taskChild, expectedGrantee: did("carol"), valid: true },
    { name: "model-budget mandate", token: budget, valid: true },
    { name: "expired: verifier clock at exp", token: intent, time: T0 + 3600, valid: false, reason: "EXPIRED" },
    { name: "expired parent inside a valid-looking chain", token: yield* sign("bob", claims("bob", "carol", "v-cart-2", "cart", { spendLimitUsd: 1 }, { prf: yield* sign("alice", claims("alice", "bob", "v-short", "intent", { spendLimitUsd: 5 }, { exp: T0 + 60 })), exp: T0 + 60 })), time: T0 + 60, valid: false, reason: "EXPIRED" },
    { name: "not yet valid: nbf an hour ahead", token: yield* sign("alice", claims("alice", "bob", "v-nbf", "intent", { spendLimitUsd: 1 }, { nbf: T0 + 3600, exp: T0 + 7200 })), valid: false, reason: "NOT_YET_VALID" },
    { name: "presented by someone other than the grantee", token: intent, expectedGrantee: did("mallory"), valid: false, reason: "GRANTEE_MISMATCH" },
    { name: "grantor rotated to key version 2", token: intent, keyVersions: { [did("alice")]: 2 }, valid: false, reason: "KEY_ROTATED" },
    { name: "grantor unknown to the resolver", token: yield* sign("mallory", claims("mallory", "bob", "v-unknown", "intent", { spendLimitUsd: 1 })), omitKeys: [did("mallory")], valid: false, reason: "KEY_NOT_FOUND" },
    { name: "signed by another key under alice's name", token: yield* sign("mallory", claims("alice", "bob", "v-forged", "intent", { spendLimitUsd: 1000 })), valid: false, reason: "SIGNATURE_INVALID" },
    { name: "payload edited after signing", token: `${ih}.${toBase64Url(utf8(JSON.stringify({ ...claims("alice", "bob", "v-intent", "intent", { spendLimitUsd: 1000, allowedMerchants: ["shop.example", "books.example"] }) })))}.${is}`, valid: false, reason: "SIGNATURE_INVALID" },
    { name: "signature re-encoded with non-zero trailing bits", token: `${ih}.${ip}.${is.slice(0, -1)}${alphabet[alphabet.indexOf(lastChar) + 1]}`, valid: false, reason: "MALFORMED" },
    { name: "padding added", token: `${ih}.${ip}.${is}==`, valid: false, reason: "MALFORMED" },
    { name: "unknown claim", token: yield* sign("alice", claims("alice", "bob", "v-claim", "intent", { spendLimitUsd: 1 }, { scope: "all" })), valid: false, reason: "MALFORMED" },
    { name: "unknown constraint member", token: yield* sign("alice", claims("alice", "bob", "v-cns", "intent", { spendLimitUsd: 1, currency: "EUR" })), valid: false, reason: "MALFORMED" },
    { name: "more than six decimals", token: yield* sign("alice", claims("alice", "bob", "v-dec", "intent", { spendLimitUsd: 0.30000000000000004 })), valid: false, reason: "MALFORMED" },
    { name: "alg none", token: yield* sign("alice", claims("alice", "bob", "v-none", "intent", { spendLimitUsd: 1 }), { alg: "none" }), valid: false, reason: "MALFORMED" },
    { name: "cart granted by someone who is not the intent's grantee", token: yield* sign("mallory", claims("mallory", "carol", "v-stolen", "cart", { spendLimitUsd: 10 }, { prf: intent })), valid: false, reason: "CHAIN_BROKEN" },
    { name: "cart wider than its intent, signed by the legitimate grantee", token: yield* sign("bob", claims("bob", "carol", "v-wide", "cart", { spendLimitUsd: 100.000001, allowedMerchants: ["shop.example"] }, { prf: intent })), valid: false, reason: "ATTENUATION_WIDENED" },
    { name: "cart outliving its intent", token: yield* sign("bob", claims("bob", "carol", "v-long", "cart", { spendLimitUsd: 1, allowedMerchants: ["shop.example"] }, { prf: intent, exp: T0 + 3601 })), valid: false, reason: "ATTENUATION_WIDENED" },
    { name: "task delegated below maxDelegationDepth 0", token: yield* sign("carol", claims("carol", "dave", "v-deep", "task", { ...taskCns, allowed: ["search"], actionLimits: { send_email: 2 }, maxDelegationDepth: 0 }, { prf: taskChild })), valid: false, reason: "DEPTH_EXCEEDED" }
  ]

  return {
    description:
      "Mandate vectors (docs/protocol.md §9). For each vector: resolve every grantor through `keys` (publicKeyHex at keyVersion 1, unless `keyVersions` overrides it or `omitKeys` removes it), set the verifier clock to `time` (default `defaultTime`), use a 30 s nbf tolerance, check `expectedGrantee` when given, and expect `valid` or the `reason`.",
    defaultTime: T0 + 10,
    keys: Object.fromEntries(names.map((n, i) => [did(n), { seedHex: seedHex(i), publicKeyHex: toHex(key[n]!.publicKey), jwk: { kty: "OKP", crv: "Ed25519", x: toBase64Url(key[n]!.publicKey) } }])),
    vectors
  }
})

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) {
  const file = Effect.runSync(Effect.provide(buildVectors, KeysNative.layer))
  fs.writeFileSync(VECTORS_PATH, JSON.stringify(file, null, 2) + "\n")
  console.log(`wrote ${file.vectors.length} vectors to ${VECTORS_PATH}`)
}
