/**
 * Mandate verification: chains of 1, 3 and 5 links (1, 3 and 5 signatures; "depth" in the issue's bench wording)
 * verified end to end through `verifyMandate` on `KeysNative.layer` with a static `KeyResolver`, each beside one raw
 * node:crypto Ed25519 verify (cached KeyObject, same bytes as the one-link mandate) measured in alternation with it.
 */
import * as crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { Keys, type PrivateKey } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { makeStatic, type ResolvedKey } from "../src/core/KeyResolver.js"
import { attenuateTaskMandate, issueTaskMandate, type Mandate, verifyMandate } from "../src/core/Mandate.js"
import { type Measurement, measureSync, median, report, type Row } from "./harness.js"

const seed = (i: number) => new Uint8Array(32).fill(i + 1)

/** Builds `count` distinct task chains of `links` mandates, each link granted to the next DID. */
const buildChains = (links: number, count: number) =>
  Effect.gen(function* () {
    const keys = yield* Keys
    const ids = Array.from({ length: links + 1 }, (_, i) => `did:mesh:bench-agent-${i}`)
    const privateKeys = yield* Effect.forEach(ids, (_, i) => keys.importPrivateKey(seed(i)))
    const resolver: Record<string, ResolvedKey> = {}
    ids.forEach((id, i) => (resolver[id] = { publicKey: privateKeys[i]!.publicKey, keyVersion: 1 }))
    const tokens = yield* Effect.forEach(Array.from({ length: count }), () => chainToken(links, ids, privateKeys))
    return { tokens, resolver: makeStatic(resolver), grantee: ids[links]! }
  })

const chainToken = (links: number, ids: ReadonlyArray<string>, privateKeys: ReadonlyArray<PrivateKey>) =>
  Effect.gen(function* () {
    let m: Mandate = yield* issueTaskMandate({
      grantorDid: ids[0]!,
      granteeDid: ids[1]!,
      privateKey: privateKeys[0]!,
      constraints: {
        allowed: ["search", "summarize", "send_email"],
        blocked: ["delete"],
        humanGates: ["send_email"],
        actionLimits: { send_email: 10 },
        computeLimit: { llmTokens: 100_000, webRequests: 50 },
        dataAccess: ["crm:read"],
        maxDelegationDepth: 7
      }
    })
    for (let i = 1; i < links; i++) {
      m = yield* attenuateTaskMandate({
        parent: m,
        granteeDid: ids[i + 1]!,
        grantorPrivateKey: privateKeys[i]!,
        constraints: { ...(m.constraints as Mandate<"task">["constraints"]), maxDelegationDepth: 7 - i }
      })
    }
    return m.token
  })

/** Measures and reports the mandate suite. */
export const run = async (): Promise<void> => {
  const runtime = ManagedRuntime.make(KeysNative.layer)
  try {
    // More distinct chains than the verifier's parse cache holds, so "fresh" rows never hit it.
    const FRESH = 600
    const chains = []
    for (const links of [1, 3, 5] as const) chains.push({ links, ...(await runtime.runPromise(buildChains(links, FRESH))) })
    // Baseline: one raw Ed25519 verify with a cached KeyObject, over the same bytes as the one-link mandate.
    const one = chains[0]!.tokens[0]!
    const cut = one.lastIndexOf(".")
    const message = Buffer.from(one.slice(0, cut), "latin1")
    const signature = Buffer.from(one.slice(cut + 1), "base64url")
    const privateKey = crypto.createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(seed(0))]), format: "der", type: "pkcs8" })
    const publicKey = crypto.createPublicKey(privateKey)
    if (!crypto.verify(null, message, publicKey, signature)) throw new Error("baseline signature does not verify")
    const rawOp = () => crypto.verify(null, message, publicKey, signature)

    /**
     * Baseline and figure measured in alternating short bursts and summarized by their medians, so a load change
     * on the machine during the run hits both sides alike instead of skewing one of them.
     */
    const paired = (name: string, op: () => unknown): { readonly figure: Measurement; readonly baseline: Measurement } => {
      const figures: Array<number> = []
      const baselines: Array<number> = []
      for (let i = 0; i < 7; i++) {
        baselines.push(measureSync("raw", rawOp, { rounds: 3, roundMs: 100 }).opsPerSecond)
        figures.push(measureSync(name, op, { rounds: 3, roundMs: 100 }).opsPerSecond)
      }
      return {
        figure: { name, opsPerSecond: median(figures) },
        baseline: { name: "raw node:crypto verify (cached KeyObject)", opsPerSecond: median(baselines) }
      }
    }

    const rows: Array<Row> = []
    for (const chain of chains) {
      const target = chain.links === 1 ? 0.75 : chain.links === 3 ? 0.25 : undefined
      const verifications = chain.tokens.map((t) => verifyMandate(t, chain.resolver, { expectedGrantee: chain.grantee }))
      // Check that they all verify, so no figure is a fast failure.
      for (const v of verifications) runtime.runSync(v)
      // The same mandate presented again and again (as a guard sees it, once per action): parsing is cached,
      // every signature, key version and time check still runs.
      const same = verifications[0]!
      const repeated = paired(`verifyMandate, chain of ${chain.links} (${chain.links} sig), same token`, () => runtime.runSync(same))
      rows.push(target === undefined ? repeated : { ...repeated, target })
      // A different token every time: nothing cached but keys.
      let i = 0
      const fresh = paired(`verifyMandate, chain of ${chain.links} (${chain.links} sig), fresh tokens`, () => runtime.runSync(verifications[i++ % FRESH]!))
      rows.push(target === undefined ? fresh : { ...fresh, target })
    }
    report("mandate", rows)
  } finally {
    await runtime.dispose()
  }
}
