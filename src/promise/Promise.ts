/**
 * The Promise facade: the core operations for callers that do not use Effect. Runs on node:crypto keys.
 * Failures reject with the same typed errors (match on `code`); validation answers `[valid, reason]`.
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Did from "../core/Did.js"
import * as Database from "../sql/Database.js"
import * as Envelope from "../core/Envelope.js"
import { Keys, type PrivateKey, type PrivateKeyInput } from "../core/Keys.js"
import * as NonceStore from "../core/NonceStore.js"
import * as NonceStoreSql from "../sql/NonceStoreSql.js"
import * as Proof from "../core/Proof.js"
import { runPromise, runWithKeys } from "../node/internal/promiseRuntime.js"

const run = runWithKeys

/** A new Ed25519 key from the platform CSPRNG. */
export const generateKey = (): Promise<PrivateKey> => run(Effect.flatMap(Keys, (k) => k.generate))

/** Reads a key given as a seed, PKCS#8 DER, base64 of either, or a node `KeyObject`. */
export const importPrivateKey = (input: PrivateKeyInput): Promise<PrivateKey> =>
  run(Effect.flatMap(Keys, (k) => k.importPrivateKey(input)))

/** A new identity `did:mesh:[<namespace>.]<name>`. */
export const generateDid = (name: string, baseAddress?: string, namespace?: string): Promise<Did.MeshIdentity> =>
  run(Did.generateDid(name, baseAddress, namespace))

/** The raw public key of a DID document; rejects with `KeyRevoked` or `MalformedDidDocument`. */
export const extractPublicKey = (document: unknown, methodId?: string): Promise<Uint8Array> =>
  run(Did.extractPublicKey(document, methodId))

/** `didHash` of a DID (any case); throws `InvalidDid`. */
export const didHash = (did: string): string =>
  Either.getOrThrowWith(Either.map(Effect.runSync(Effect.either(Did.parseDid(did))), Did.didHash), (e) => e)

/** Adds an eddsa-jcs-2022 proof to a JSON object. */
export const signMessage = <T extends Record<string, unknown>>(
  message: T,
  privateKey: PrivateKeyInput,
  verificationMethodId: string,
  options?: Proof.SignOptions
): Promise<Proof.Signed<Omit<T, "proof">>> => run(Proof.signMessage(message, privateKey, verificationMethodId, options))

/** True when the message's proof verifies under the public key (and, if given, was made by that method). */
export const verifyMessage = (
  message: Record<string, unknown>,
  publicKey: Uint8Array,
  options?: { readonly verificationMethod?: string }
): Promise<boolean> =>
  run(
    Proof.verifyMessage(message, publicKey, options).pipe(
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
  )

/** A fresh correlation id. */
export const newCorrelationId = Envelope.newCorrelationId

/** Builds and signs an envelope. */
export const buildEnvelope = (input: Envelope.BuildEnvelopeInput): Promise<Envelope.Envelope> => run(Envelope.buildEnvelope(input))

/** Validates an envelope: `[true, null]`, or `[false, code]` with a code from `EnvelopeErrorCode`. */
export const validateEnvelope = (
  envelope: unknown,
  senderPublicKey: Uint8Array | string,
  myDid: string,
  nonceStore: NonceStore.NonceStoreApi,
  options?: Envelope.ValidateOptions
): Promise<[boolean, Envelope.EnvelopeErrorCode | null]> =>
  run(
    Envelope.validateEnvelope(envelope, senderPublicKey, myDid, nonceStore, options).pipe(
      Effect.map((): [boolean, Envelope.EnvelopeErrorCode | null] => [true, null]),
      Effect.catchTag("EnvelopeError", (e) => Effect.succeed<[boolean, Envelope.EnvelopeErrorCode | null]>([false, e.code]))
    )
  )

/** A bounded in-memory nonce store. */
export const createMemoryNonceStore = (options?: { readonly capacity?: number }): NonceStore.NonceStoreApi =>
  NonceStore.makeMemory(options)

/** A nonce store in a SQLite file that survives restarts; `close()` releases the database. Rejects with `DatabaseError`. */
export const openSqliteNonceStore = async (
  filename: string
): Promise<NonceStore.NonceStoreApi & { readonly close: () => Promise<void> }> => {
  const layer = NonceStoreSql.layer.pipe(Layer.provide(Database.layerSqlite(filename)))
  const scope = Effect.runSync(Scope.make())
  const close = () => runPromise(Scope.close(scope, Exit.void))
  const built = await runPromise(Layer.buildWithScope(layer, scope)).catch(async (e: unknown) => {
    await close()
    throw e
  })
  const store = Context.get(built, NonceStore.NonceStore)
  return { record: store.record, close }
}
