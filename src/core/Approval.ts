/**
 * Signed human approvals for tasks paused at a human gate (docs/protocol.md, human gates).
 *
 * An approval is a small JSON object `{ type: "MeshApproval", taskId, capability, decision, expiresAt }` with an
 * eddsa-jcs-2022 proof (`signMessage`) by the grantor's `#key-1`. Verification checks, in this order, shape,
 * presence of a proof, the signer, the task and capability, the time window, the grantor's current key, and only
 * then the signature, each failure with one `ApprovalError` code.
 *
 * A valid approval can be presented any number of times until it expires: nothing here remembers it. That a task
 * resumes exactly once is the task store's job (`TaskStore.claim`, one winner), and since every pause has its own
 * `taskId`, an approval opens at most one pause. `resumeTask` puts the two together in the right order.
 *
 * Floor: core (docs/architecture.md §3).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type InvalidDid, invalidDid, normalizeDid, verificationMethodId } from "./Did.js"
import { Timestamp } from "./Envelope.js"
import { parseUtcTimestamp } from "./internal/timestamp.js"
import { Keys, type MalformedKey, type PrivateKeyInput } from "./Keys.js"
import type { KeyResolverApi } from "./KeyResolver.js"
import { CRYPTOSUITE, signMessage, toDateTimeSeconds, verifyMessage } from "./Proof.js"
import { type PausedTask, TaskNotPaused, TaskStore, type TaskStoreUnavailable } from "./TaskStore.js"

/** The `type` of every approval. */
export const APPROVAL_TYPE = "MeshApproval"
/** Default lifetime of a signed approval. */
export const DEFAULT_APPROVAL_TTL_SECONDS = 900
/** Longest lifetime an approval may have (`expiresAt` − `proof.created`). */
export const MAX_APPROVAL_TTL_SECONDS = 86_400
/** Default allowance for clock skew between the approver and the verifier, both ways. */
export const DEFAULT_APPROVAL_CLOCK_TOLERANCE_MS = 30_000

/** What a grantor decides about a gated action. */
export const ApprovalDecision = Schema.Literal("approve", "deny")
/** What a grantor decides about a gated action. */
export type ApprovalDecision = typeof ApprovalDecision.Type

const Bounded = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))

/** The proof an approval carries: eddsa-jcs-2022, `created` required (it bounds the lifetime), purpose assertionMethod. */
export const ApprovalProof = Schema.Struct({
  type: Schema.Literal("DataIntegrityProof"),
  cryptosuite: Schema.Literal(CRYPTOSUITE),
  created: Timestamp,
  verificationMethod: Schema.String.pipe(Schema.maxLength(512)),
  proofPurpose: Schema.Literal("assertionMethod"),
  proofValue: Schema.String.pipe(Schema.startsWith("z"), Schema.maxLength(128))
})

/** The unsigned members of an approval; every one is covered by the proof. */
export const ApprovalFields = Schema.Struct({
  type: Schema.Literal(APPROVAL_TYPE),
  taskId: Bounded,
  capability: Bounded,
  decision: ApprovalDecision,
  /** RFC 3339 UTC: written `2026-01-01T00:15:00.000Z`, read in any UTC form (`Z`, `z`, `+00:00`, `-00:00`). */
  expiresAt: Timestamp
})
/** The unsigned members of an approval. */
export type ApprovalFields = typeof ApprovalFields.Type

/**
 * A signed approval as it travels (for OpenAPI and typed clients). A server should take the body member as
 * `Schema.Unknown` and let `verifyApproval` judge it, so a refused approval gets its `ApprovalError` code.
 */
export const SignedApproval = Schema.Struct({ ...ApprovalFields.fields, proof: ApprovalProof })
/** A signed approval as it travels. */
export type SignedApproval = typeof SignedApproval.Type

/** What a grantor signs. */
export interface ApprovalInput {
  readonly taskId: string
  readonly capability: string
  /** Default `approve`. */
  readonly decision?: ApprovalDecision
  /** Whole seconds; default 900, at most 86 400. */
  readonly ttlSeconds?: number
}

/** Why an approval was refused (or could not be signed: APPROVAL_MALFORMED). */
export const ApprovalErrorCode = Schema.Literal(
  "APPROVAL_MALFORMED",
  "APPROVAL_UNSIGNED",
  "APPROVAL_WRONG_SIGNER",
  "APPROVAL_INVALID",
  "APPROVAL_MISMATCH",
  "APPROVAL_EXPIRED",
  "RESOLVER_UNAVAILABLE"
)
/** Why an approval was refused. */
export type ApprovalErrorCode = typeof ApprovalErrorCode.Type

/** An approval that was refused, or could not be signed; `code` says why. */
export class ApprovalError extends Schema.TaggedError<ApprovalError>()("ApprovalError", {
  code: ApprovalErrorCode,
  message: Schema.String
}) {}

const refuse = (code: ApprovalErrorCode, message: string) => new ApprovalError({ code, message })

/** Signs an approval as the grantor (signMessage over { type, taskId, capability, decision, expiresAt }, proof by `${did}#key-1`). */
export const signApproval = (
  input: ApprovalInput,
  grantorDid: string,
  privateKey: PrivateKeyInput
): Effect.Effect<SignedApproval, ApprovalError | MalformedKey | InvalidDid, Keys> =>
  Effect.gen(function* () {
    const did = normalizeDid(grantorDid)
    if (did === undefined) return yield* Effect.fail(invalidDid(grantorDid))
    const ttl = input.ttlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS
    if (!Number.isSafeInteger(ttl) || ttl <= 0 || ttl > MAX_APPROVAL_TTL_SECONDS) {
      return yield* Effect.fail(refuse("APPROVAL_MALFORMED", `ttlSeconds must be a whole number in [1, ${MAX_APPROVAL_TTL_SECONDS}], got ${ttl}`))
    }
    // `created` has whole seconds, so count the lifetime from that second: otherwise a full-day approval would be
    // up to a second longer than a verifier allows.
    const createdMs = Math.floor((yield* Clock.currentTimeMillis) / 1000) * 1000
    const fields = {
      type: APPROVAL_TYPE,
      taskId: input.taskId,
      capability: input.capability,
      decision: input.decision ?? "approve",
      expiresAt: new Date(createdMs + ttl * 1000).toISOString()
    } as const
    const checked = Schema.decodeUnknownEither(ApprovalFields)(fields)
    if (Either.isLeft(checked)) {
      return yield* Effect.fail(refuse("APPROVAL_MALFORMED", ParseResult.TreeFormatter.formatErrorSync(checked.left)))
    }
    const signed = yield* signMessage(fields, privateKey, verificationMethodId(did), { created: toDateTimeSeconds(createdMs) }).pipe(
      Effect.catchTag("NotCanonicalizable", (e) => Effect.fail(refuse("APPROVAL_MALFORMED", e.message)))
    )
    return signed as SignedApproval
  })

/** Options of `verifyApproval`. */
export interface VerifyApprovalOptions {
  /** Allowed clock skew in ms, both ways; default 30 000. */
  readonly clockToleranceMs?: number
}

/** What the approval is expected to be about: the paused task's id, its gated capability and its grantor. */
export interface ApprovalExpectation {
  readonly taskId: string
  readonly capability: string
  readonly grantor: string
}

/** A verified approval: the grantor's decision and when the approval expires (epoch ms). */
export interface VerifiedApproval {
  readonly decision: ApprovalDecision
  readonly expiresAt: number
}

// The proof is decoded apart from the rest, so a missing one reads as unsigned rather than malformed.
const decodeFields = Schema.decodeUnknownEither(Schema.Struct({ ...ApprovalFields.fields, proof: Schema.optional(Schema.Unknown) }), {
  onExcessProperty: "error"
})
const decodeProof = Schema.decodeUnknownEither(ApprovalProof, { onExcessProperty: "error" })

/** Checks that `approval` is for this task and capability, unexpired, and signed by `grantor`'s current key (via the resolver). */
export const verifyApproval = (
  approval: unknown,
  expected: ApprovalExpectation,
  resolver: KeyResolverApi,
  options: VerifyApprovalOptions = {}
): Effect.Effect<VerifiedApproval, ApprovalError, Keys> =>
  Effect.gen(function* () {
    // 1. shape
    const decoded = decodeFields(approval)
    if (Either.isLeft(decoded)) return yield* Effect.fail(refuse("APPROVAL_MALFORMED", ParseResult.TreeFormatter.formatErrorSync(decoded.left)))
    const a = decoded.right

    // 2. a proof, itself well formed
    if (a.proof === undefined || a.proof === null) return yield* Effect.fail(refuse("APPROVAL_UNSIGNED", "the approval carries no proof"))
    const proof = decodeProof(a.proof)
    if (Either.isLeft(proof)) return yield* Effect.fail(refuse("APPROVAL_MALFORMED", `proof: ${ParseResult.TreeFormatter.formatErrorSync(proof.left)}`))
    const { created, verificationMethod } = proof.right
    // Both decoded as a Timestamp, which holds only strings parseUtcTimestamp reads.
    const createdMs = parseUtcTimestamp(created)!
    const expiresMs = parseUtcTimestamp(a.expiresAt)!

    // 3. the signer: the grantor's own method, whatever key it claims
    const grantor = normalizeDid(expected.grantor) ?? expected.grantor
    const method = verificationMethodId(grantor)
    if (verificationMethod !== method) {
      return yield* Effect.fail(refuse("APPROVAL_WRONG_SIGNER", `signed by ${verificationMethod}; the approval must come from ${method}`))
    }

    // 4. this task and this capability
    if (a.taskId !== expected.taskId) return yield* Effect.fail(refuse("APPROVAL_MISMATCH", `the approval is for task ${a.taskId}`))
    if (a.capability !== expected.capability) {
      return yield* Effect.fail(refuse("APPROVAL_MISMATCH", `the approval is for ${a.capability}, the task waits for ${expected.capability}`))
    }

    // 5. time: a created far ahead would otherwise stretch the lifetime bound as far as the signer likes
    const tolerance = options.clockToleranceMs ?? DEFAULT_APPROVAL_CLOCK_TOLERANCE_MS
    const now = yield* Clock.currentTimeMillis
    if (expiresMs <= now - tolerance) return yield* Effect.fail(refuse("APPROVAL_EXPIRED", `expired at ${a.expiresAt}`))
    if (createdMs > now + tolerance) return yield* Effect.fail(refuse("APPROVAL_EXPIRED", `created at ${created}, in the future`))
    if (!(expiresMs > createdMs) || expiresMs - createdMs > MAX_APPROVAL_TTL_SECONDS * 1000) {
      return yield* Effect.fail(refuse("APPROVAL_EXPIRED", `lifetime must be in (0, ${MAX_APPROVAL_TTL_SECONDS}] seconds`))
    }

    // 6. the grantor's current key; no key (unknown, revoked) means no signature of theirs can be valid
    const resolved = yield* resolver.resolve(grantor).pipe(
      Effect.mapError((e) =>
        e._tag === "KeyResolverUnavailable"
          ? refuse("RESOLVER_UNAVAILABLE", e.message)
          : refuse("APPROVAL_INVALID", `${grantor} has no current key: ${e.message}`)
      )
    )

    // 7. the signature, over every member as received (the method and the purpose were checked above)
    yield* verifyMessage(approval as Record<string, unknown>, resolved.publicKey).pipe(
      Effect.mapError((e) => refuse("APPROVAL_INVALID", e._tag === "ProofInvalid" ? `${e.code}: ${e.message}` : e.message))
    )
    return { decision: a.decision, expiresAt: expiresMs }
  })

/** What `resumeTask` takes: the task named in the request, the agent serving it, and the approval as received. */
export interface ResumeRequest {
  readonly taskId: string
  /** The agent DID of this server; a task paused by another agent on a shared database is not found. */
  readonly owner: string
  readonly approval: unknown
}

/** The outcome of a resume: the task as paused, and whether it is to run (`approve`, now `resumed`) or not (`cancelled`). */
export interface Resumed {
  readonly task: PausedTask
  readonly decision: ApprovalDecision
}

const sameDid = (did: string) => normalizeDid(did) ?? did

/**
 * The one call behind `POST /v1/resume`: finds the task, verifies the approval against its stored grantor and
 * capability, and only then claims it (`resumed` on approve, `cancelled` on deny), so a forged or mismatched
 * approval never uses up the task and of two resumes with one approval exactly one wins.
 */
export const resumeTask = (
  request: ResumeRequest,
  resolver: KeyResolverApi,
  options: VerifyApprovalOptions = {}
): Effect.Effect<Resumed, ApprovalError | TaskNotPaused | TaskStoreUnavailable, Keys | TaskStore> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const found = yield* store.paused(request.taskId)
    if (Option.isNone(found) || sameDid(found.value.owner) !== sameDid(request.owner)) {
      return yield* Effect.fail(new TaskNotPaused({ code: "TASK_NOT_FOUND", message: `no paused task ${request.taskId}`, taskId: request.taskId }))
    }
    const task = found.value
    const verified = yield* verifyApproval(request.approval, task, resolver, options)
    const claimed = yield* store.claim(task.taskId, verified.decision === "approve" ? "resumed" : "cancelled")
    return { task: claimed, decision: verified.decision }
  })
