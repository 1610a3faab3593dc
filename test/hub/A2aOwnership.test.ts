import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { signCard } from "../../src/core/A2aCardSignature.js"
import { generateDid, type MeshIdentity, verificationMethodId } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { registeredAgent, startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** A card host whose card can be swapped; it counts the fetches that reached it (scoped). */
const cardHost = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly set: (card: unknown) => void; readonly fetches: () => number; readonly server: http.Server }>((resume) => {
    let card: unknown = {}
    let fetches = 0
    const server = http.createServer((_, res) => {
      fetches++
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify(card))
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/card.json`, set: (c) => void (card = c), fetches: () => fetches, server }))
    )
  }),
  (h) => Effect.async<void>((resume) => void h.server.close(() => resume(Effect.void)))
)

const baseCard = (name: string) => ({
  name,
  description: "books trips",
  version: "1.0.0",
  supportedInterfaces: [{ url: "http://127.0.0.1:9/", protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
  skills: [{ id: "book", name: "book", description: "book", tags: ["book"] }]
})

/** The card signed as `kid` with `key` (an impostor signs with its own key under another DID's kid). */
const signed = (card: Record<string, unknown>, kid: string, key: MeshIdentity["privateKey"]) =>
  Effect.map(signCard(card, kid, key), (signature) => ({ ...card, signatures: [signature] }))

describe("A2A entries: ownership and signing keys on refresh", () => {
  it.live("only the registering key (or the admin) refreshes an entry; a card whose signer changed is kept only when the new signature verifies under the hub's key for that DID", () =>
    provide(
      Effect.gen(function* () {
        const host = yield* cardHost
        const { client } = yield* startHub({ a2aCardUrls: "any" })
        const travel = yield* registeredAgent(client, "travel")
        const other = yield* registeredAgent(client, "other")
        const mallory = yield* registeredAgent(client, "mallory")
        const card = baseCard("trips")
        host.set(yield* signed(card, verificationMethodId(travel.identity.did), travel.identity.privateKey))
        const entry = yield* client.registerA2a({ cardUrl: host.url, did: `${travel.identity.did}.trips`, apiKey: travel.apiKey })
        const fetched = host.fetches()

        // Another key: refused before anything is fetched, the entry unchanged.
        host.set(yield* signed({ ...card, description: "mallory's" }, verificationMethodId(mallory.identity.did), mallory.identity.privateKey))
        const foreign = yield* Effect.flip(client.refreshA2a(entry.didHash, mallory.apiKey))
        assert.strictEqual(foreign.code, "NOT_OWNER")
        assert.strictEqual(host.fetches(), fetched)

        // The owner refreshes, but the card now claims the travel DID with a key the hub does not hold for it.
        const impostor = yield* generateDid("impostor")
        host.set(yield* signed({ ...card, description: "swapped" }, verificationMethodId(other.identity.did), impostor.privateKey))
        const unproven = yield* Effect.flip(client.refreshA2a(entry.didHash, travel.apiKey))
        assert.strictEqual(unproven.code, "INVALID_CARD")
        // The stored signer's header copied onto another card: the hub holds the travel DID's key, so it checks.
        const stored = (yield* client.resolveA2a(entry.didHash)).card as { signatures: ReadonlyArray<unknown> }
        host.set({ ...card, description: "copied header", signatures: stored.signatures })
        assert.strictEqual((yield* Effect.flip(client.refreshA2a(entry.didHash, travel.apiKey))).code, "INVALID_CARD")
        host.set({ ...card, description: "unsigned now" })
        const unsigned = yield* Effect.flip(client.refreshA2a(entry.didHash, travel.apiKey))
        assert.strictEqual(unsigned.code, "INVALID_CARD")
        assert.strictEqual(((yield* client.resolveA2a(entry.didHash)).card as { description: string }).description, "books trips")

        // A new signer whose key the hub holds: proven, kept. The same signer again: kept; the admin may refresh too.
        host.set(yield* signed({ ...card, description: "moved to other" }, verificationMethodId(other.identity.did), other.identity.privateKey))
        assert.strictEqual(((yield* client.refreshA2a(entry.didHash, travel.apiKey)).card as { description: string }).description, "moved to other")
        host.set(yield* signed({ ...card, description: "admin refresh" }, verificationMethodId(other.identity.did), other.identity.privateKey))
        assert.strictEqual(((yield* client.refreshA2a(entry.didHash)).card as { description: string }).description, "admin refresh")
      })
    ))
})
