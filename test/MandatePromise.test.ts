import { afterAll, assert, describe, it } from "@effect/vitest"
import * as M from "../src/promise/MandatePromise.js"

const seed = (n: number) => new Uint8Array(32).fill(n)
// Fixed seeds; the public keys are derived with node:crypto, independently of the code under test.
const alice = { did: "did:mesh:alice", seed: seed(1) }
const bob = { did: "did:mesh:bob", seed: seed(2) }
const carol = { did: "did:mesh:carol" }

afterAll(() => M.dispose())

const publicKeyOf = async (s: Uint8Array) => {
  const { createPrivateKey, createPublicKey } = await import("node:crypto")
  const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(s)])
  const jwk = createPublicKey(createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" })).export({ format: "jwk" })
  return new Uint8Array(Buffer.from(jwk.x!, "base64url"))
}

describe("MandatePromise", () => {
  it("issues, attenuates and verifies with the spec's [valid, mandate, reason] tuple", async () => {
    const alicePub = await publicKeyOf(alice.seed)
    const bobPub = await publicKeyOf(bob.seed)
    const intent = await M.issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.seed, constraints: { spendLimitUsd: 10 } })
    const [valid, mandate, reason] = await M.verifyMandate(intent.token, alicePub)
    assert.isTrue(valid)
    assert.strictEqual(mandate?.token, intent.token)
    assert.isNull(reason)
    // publicKeyB64 works as well.
    assert.isTrue((await M.verifyMandate(intent.token, Buffer.from(alicePub).toString("base64")))[0])
    assert.deepStrictEqual(await M.verifyMandate(intent.token, bobPub), [false, null, "SIGNATURE_INVALID"])
    assert.deepStrictEqual(await M.verifyMandate(intent.token, alicePub, { expectedGrantee: carol.did }), [false, null, "GRANTEE_MISMATCH"])
    const cart = await M.attenuateToCart({ parent: intent.token, granteeDid: carol.did, grantorPrivateKey: Buffer.from(bob.seed).toString("base64"), narrowed: { spendLimitUsd: 5 } })
    const keys = { [alice.did]: { publicKey: alicePub }, [bob.did]: { publicKey: Buffer.from(bobPub).toString("base64") } }
    assert.isTrue((await M.verifyMandate(cart.token, keys, { expectedGrantee: carol.did }))[0])
    assert.deepStrictEqual(await M.verifyMandate(cart.token, { ...keys, [alice.did]: { publicKey: alicePub, keyVersion: 2 } }), [false, null, "KEY_ROTATED"])
  })

  it("rejects with the typed error itself, matched on code", async () => {
    const intent = await M.issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.seed, constraints: { spendLimitUsd: 10 } })
    const err = await M.attenuateToPayment({ parent: intent, granteeDid: carol.did, grantorPrivateKey: bob.seed, amountUsd: 11, merchant: "m" }).then(() => undefined, (e: unknown) => e)
    assert.instanceOf(err, Error)
    assert.strictEqual((err as { code?: string }).code, "ATTENUATION_WIDENED")
  })

  it("verifyTaskMandate returns { valid, reason }; guards enforce through Promises", async () => {
    const alicePub = await publicKeyOf(alice.seed)
    const task = await M.issueTaskMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.seed, constraints: { allowed: ["search"], actionLimits: { search: 1 }, maxDelegationDepth: 0 } })
    assert.deepStrictEqual(await M.verifyTaskMandate(task.token, { expectedGrantee: bob.did, keys: alicePub }), { valid: true, reason: null })
    assert.deepStrictEqual(await M.verifyTaskMandate(task.token, { expectedGrantee: carol.did, keys: alicePub }), { valid: false, reason: "GRANTEE_MISMATCH" })
    const keys = { [alice.did]: { publicKey: alicePub } }
    const tasks = M.createTaskGuard({ keys })
    await tasks.check(task.token, { presenter: bob.did, capability: "search", reversible: true, sandboxed: false })
    const refused = await tasks.check(task.token, { presenter: bob.did, capability: "search", reversible: true, sandboxed: false }).then(() => undefined, (e: unknown) => e)
    assert.strictEqual((refused as { code?: string }).code, "ACTION_LIMIT_EXCEEDED")
    const intent = await M.issueIntentMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.seed, constraints: { spendLimitUsd: 0.3 } })
    const spending = M.createSpendingGuard({ keys })
    await spending.authorize(intent.token, { amountUsd: 0.1, merchant: "m", presenter: bob.did })
    await spending.authorize(intent.token, { amountUsd: 0.2, merchant: "m", presenter: bob.did })
    const over = await spending.authorize(intent.token, { amountUsd: 0.01, merchant: "m", presenter: bob.did }).then(() => undefined, (e: unknown) => e)
    assert.strictEqual((over as { code?: string }).code, "LIMIT_EXCEEDED")
    const budget = await M.issueModelBudgetMandate({ grantorDid: alice.did, granteeDid: bob.did, privateKey: alice.seed, constraints: { token_budget: 10, cost_budget_usd: 0.5, quality_threshold: 0.5, task_type: "SUMMARIZATION", expected_steps: 2 } })
    const smaller = await M.attenuateModelBudgetMandate({ parent: budget, granteeDid: carol.did, grantorPrivateKey: bob.seed, constraints: { token_budget: 5, cost_budget_usd: 0.25, quality_threshold: 0.6, task_type: "SUMMARIZATION", expected_steps: 1 } })
    assert.strictEqual(smaller.kind, "model-budget")
    const child = await M.attenuateTaskMandate({ parent: task, granteeDid: carol.did, grantorPrivateKey: bob.seed, constraints: { allowed: [], maxDelegationDepth: 0 } }).then(() => undefined, (e: unknown) => e)
    assert.strictEqual((child as { code?: string }).code, "DELEGATION_DEPTH_EXCEEDED")
  })
})
