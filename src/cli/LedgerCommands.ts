/**
 * The spending side of the `mesh` command: a paid `mesh call` booked in the hub's ledger, and `mesh ledger pools`,
 * `pool <id>`, `reconcile <poolId>` for the grantee of the pools' mandates (docs/hub.md, "Spending ledger").
 *
 * A call under a payment or cart mandate is booked the way a saga step is: the caller, grantee of the parent (intent)
 * mandate, opens the parent's pool, allocates the child under the key `<sagaId>:<step>`, asks the agent for a commit
 * token for that step, and releases the allocation with the amount the token names and the token itself, so
 * `mesh ledger reconcile` finds every charge backed by the agent's signed receipt (docs/protocol.md §13).
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as CommitToken from "../core/CommitToken.js"
import type { SpendingConstraints, PaymentConstraints } from "../core/Constraints.js"
import { randomBytes } from "../core/internal/bytes.js"
import * as Mandate from "../core/Mandate.js"
import { formatUsdString, parseUsd } from "../core/Money.js"
import * as Reconciliation from "../core/Reconciliation.js"
import type { Allocation, Pool } from "../hub/LedgerWire.js"
import * as MeshClient from "../hub/MeshClient.js"
import { CliError, meshIdentityOf, readIdentityFile } from "./Cli.js"

// Notes beside a command's answer go to stderr, so that stdout holds the answer alone.
const note = (text: string) => Effect.sync(() => void process.stderr.write(`${text}\n`))

/** A USD amount as the CLI prints it: Money's canonical decimal. */
export const usd = (amount: number | string): string => Either.match(parseUsd(amount), { onLeft: () => String(amount), onRight: formatUsdString })

/**
 * The mandate `mesh call --mandate` sends, checked before anything is sent: an empty or malformed token is refused
 * here (`INVALID_ARGUMENT`) rather than reaching the agent as no mandate at all.
 */
export const presentedMandate = (text: string): Effect.Effect<Mandate.Mandate, CliError> => {
  const token = text.trim()
  if (token.length === 0) {
    return Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: "--mandate is empty (did the command that should have made the token fail?); pass a mandate token or leave --mandate out" }))
  }
  return Either.match(Mandate.decodeUnverified(token), {
    onLeft: (e) => Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `--mandate is not a mandate token: ${e.reason}: ${e.message}` })),
    onRight: Effect.succeed
  })
}

/** The most a spending mandate lets be charged: a payment's `amountUsd`, a cart's or intent's `spendLimitUsd`. */
export const limitOf = (m: Mandate.Mandate): number =>
  m.kind === "payment" ? (m.constraints as PaymentConstraints).amountUsd : (m.constraints as SpendingConstraints).spendLimitUsd

const isSpending = (m: Mandate.Mandate): boolean => m.kind === "intent" || m.kind === "cart" || m.kind === "payment"

/** A paid call being made: the commit the agent is asked for and, when booked in the ledger, where. */
export interface PaidCall {
  readonly mandate: Mandate.Mandate
  readonly commit: { readonly sagaId: string; readonly step: string; readonly amountUsd: string }
  readonly booking: { readonly client: MeshClient.MeshClientApi; readonly identity: MeshClient.LedgerAuth; readonly pool: Pool; readonly allocation: Allocation } | undefined
}

const base32 = (bytes: Uint8Array) => Array.from(bytes, (b) => "abcdefghijklmnopqrstuvwxyz234567"[b & 31]).join("")

/**
 * Prepares a call under a spending mandate, or answers undefined for another kind. When the caller's identity is the
 * grantee of the mandate's parent, the parent's pool is opened (or found) on the hub and the mandate allocated from
 * it; otherwise the call is only receipted. Prints what is authorized.
 */
export const preparePaidCall = (args: { readonly hubUrl: string; readonly mandate: Mandate.Mandate; readonly identity: string | undefined; readonly apiKey: string | undefined }) =>
  Effect.gen(function* () {
    const m = args.mandate
    if (!isSpending(m)) return undefined
    const commit = { sagaId: `call_${base32(randomBytes(12))}`, step: "call", amountUsd: usd(limitOf(m)) }
    const parent = m.parent
    const file = args.identity === undefined ? undefined : yield* readIdentityFile(args.identity)
    const bookable = file !== undefined && args.apiKey !== undefined && parent !== undefined && (parent.kind === "intent" || parent.kind === "cart") && parent.grantee === file.did
    const booking = !bookable
      ? undefined
      : yield* Effect.gen(function* () {
        const identity = { identity: yield* meshIdentityOf(file), apiKey: args.apiKey! }
        const client = yield* MeshClient.make({ hubUrl: args.hubUrl })
        const pool = yield* client.openPool(parent.token, identity)
        const allocation = yield* client.allocate({ poolId: pool.poolId, childMandate: m.token, idempotencyKey: `${commit.sagaId}:${commit.step}`, ...identity })
        return { client, identity, pool, allocation }
      })
    if (file !== undefined && args.apiKey === undefined && parent !== undefined && parent.grantee === file.did) {
      yield* note("not booked in the hub's ledger: pass --api-key <your API key> to book paid calls in your pool")
    }
    yield* note(
      `authorized up to ${commit.amountUsd} USD under ${m.kind} mandate ${m.jti} (${m.grantor} → ${m.grantee})` +
        (booking === undefined ? "" : `; allocated from pool ${booking.pool.poolId} as ${booking.allocation.allocationId}`)
    )
    return { mandate: m, commit, booking } satisfies PaidCall
  }).pipe(Effect.provide(FetchHttpClient.layer))

/**
 * Settles a paid call with the agent's commit token: prints what was charged and, when booked, releases the allocation
 * with that amount and the token, then prints the pool. Without a token nothing is charged, and a booking is released
 * unused.
 */
export const settlePaidCall = (paid: PaidCall, commitToken: string | undefined) =>
  Effect.gen(function* () {
    const receipt = commitToken === undefined ? undefined : Either.getOrUndefined(CommitToken.decodeUnverified(commitToken))
    const charged = receipt?.amountUsd ?? "0"
    yield* note(
      receipt === undefined
        ? "charged 0 USD: the agent sent no commit token"
        : `charged ${charged} USD by ${receipt.issuer} (commit token for ${receipt.sagaId}:${receipt.step}, ${receipt.capability})`
    )
    if (paid.booking === undefined) return
    const { client, identity, allocation } = paid.booking
    const released = yield* client.release({
      allocationId: allocation.allocationId,
      usedUsd: receipt === undefined ? "0" : charged,
      ...(receipt === undefined || commitToken === undefined ? {} : { commitToken }),
      ...identity
    })
    yield* note(`pool ${released.pool.poolId}: ${usd(released.pool.allocatedUsd)} of ${usd(released.pool.limitUsd)} USD spent or held, ${usd(released.pool.remainingUsd)} USD left (mesh ledger pool ${released.pool.poolId})`)
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** Releases a booked allocation unused, after a call that failed. */
export const abandonPaidCall = (paid: PaidCall) =>
  paid.booking === undefined
    ? Effect.void
    : Effect.ignore(paid.booking.client.release({ allocationId: paid.booking.allocation.allocationId, usedUsd: "0", ...paid.booking.identity }).pipe(Effect.provide(FetchHttpClient.layer)))

/** One pool as a line of `mesh ledger pools`. */
export const formatPool = (p: Pool): string =>
  `${p.poolId}  ${p.grantor} → ${p.grantee}  limit ${usd(p.limitUsd)} USD, allocated ${usd(p.allocatedUsd)}, remaining ${usd(p.remainingUsd)}, expires ${p.expiresAt}`

/** One allocation as `mesh ledger pool` prints it, its commit token on the line below. */
export const formatAllocation = (a: Allocation): string =>
  `  ${a.allocationId}  ${a.status.padEnd(8)}  ${usd(a.amountUsd)} USD to ${a.grantee}, used ${a.usedUsd === null ? "-" : `${usd(a.usedUsd)} USD`}, key ${a.idempotencyKey}` +
  (a.commitToken === undefined ? "\n    commit token: none" : `\n    commit token: ${a.commitToken}`)

/** What every `mesh ledger` command takes: the hub, the grantee's identity and an API key of the hub's. */
export interface LedgerArgs {
  readonly hubUrl: string
  readonly identity: string
  readonly apiKey: Redacted.Redacted<string>
}

const ledgerClient = (args: LedgerArgs) =>
  Effect.gen(function* () {
    const identity = yield* meshIdentityOf(yield* readIdentityFile(args.identity))
    const client = yield* MeshClient.make({ hubUrl: args.hubUrl, identity, apiKey: Redacted.value(args.apiKey), retry: { times: 2 } })
    return { client, identity }
  })

const checkPoolId = (poolId: string): Effect.Effect<void, CliError> =>
  /^pool_[a-z2-7]+$/.test(poolId)
    ? Effect.void
    : Effect.fail(new CliError({ code: "INVALID_ARGUMENT", message: `${JSON.stringify(poolId)} is not a pool id (pool_…; mesh ledger pools lists them)` }))

/** `mesh ledger pools`: the pools whose mandate was granted to the identity. */
export const ledgerPools = (args: LedgerArgs & { readonly json: boolean }) =>
  Effect.gen(function* () {
    const { client, identity } = yield* ledgerClient(args)
    const pools = yield* client.listPools()
    if (args.json) return yield* Console.log(JSON.stringify(pools, null, 2))
    if (pools.length === 0) return yield* note(`no pools for ${identity.did} on ${args.hubUrl} (a paid mesh call under a mandate cut from yours opens one)`)
    for (const p of pools) yield* Console.log(formatPool(p))
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** `mesh ledger pool <id>`: the pool, then every allocation with its used amount and commit token. */
export const ledgerPool = (args: LedgerArgs & { readonly poolId: string; readonly json: boolean }) =>
  Effect.gen(function* () {
    yield* checkPoolId(args.poolId)
    const { client } = yield* ledgerClient(args)
    const trail = yield* client.listAllocations(args.poolId)
    if (args.json) return yield* Console.log(JSON.stringify(trail, null, 2))
    yield* Console.log(formatPool(trail.pool))
    yield* Console.log(`used ${usd(trail.usedUsd)} USD in ${trail.allocations.length} allocation${trail.allocations.length === 1 ? "" : "s"}`)
    for (const a of trail.allocations) yield* Console.log(formatAllocation(a))
    return trail
  }).pipe(Effect.provide(FetchHttpClient.layer))

/**
 * `mesh ledger reconcile <poolId>`: the pool's trail checked on this machine — each commit token's signature under its
 * agent's registered key, its step and amount against its allocation, the totals — one line per failure; exit 1 when
 * any.
 */
export const ledgerReconcile = (args: LedgerArgs & { readonly poolId: string; readonly json?: boolean }) =>
  Effect.gen(function* () {
    yield* checkPoolId(args.poolId)
    const { client } = yield* ledgerClient(args)
    const trail = yield* client.listAllocations(args.poolId)
    const report = yield* Reconciliation.verify(trail.allocations, trail.pool, client.keyResolver)
    if (args.json === true) {
      const receipts = [...report.receipts].map(([allocationId, r]) => ({ allocationId, ...r }))
      yield* Console.log(JSON.stringify({ poolId: report.poolId, ok: report.ok, usedUsd: report.usedUsd, allocatedUsd: report.allocatedUsd, receipts, failures: report.failures }, null, 2))
    } else {
      for (const [allocationId, r] of report.receipts) {
        yield* Console.log(`verified  ${allocationId}  ${r.amountUsd} USD by ${r.issuer} for ${r.sagaId}:${r.step} (${r.capability}) at ${r.at}`)
      }
      for (const f of report.failures) yield* Console.log(`FAILED    ${f.allocationId ?? args.poolId}  ${f.code}: ${f.message}`)
      yield* Console.log(
        report.ok
          ? `pool ${report.poolId} reconciles: ${report.receipts.size} receipt${report.receipts.size === 1 ? "" : "s"}, ${report.usedUsd} USD used, ${report.allocatedUsd} USD allocated`
          : `pool ${report.poolId} does not reconcile: ${report.failures.length} failure${report.failures.length === 1 ? "" : "s"}`
      )
    }
    if (!report.ok) {
      return yield* Effect.fail(new CliError({ code: "RECONCILIATION_FAILED", message: `pool ${args.poolId} does not reconcile` }))
    }
    return report
  }).pipe(Effect.provide(FetchHttpClient.layer))
