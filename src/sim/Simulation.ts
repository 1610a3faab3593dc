/**
 * A whole mesh in one process, run on a simulated clock (`SimClock`) over the in-memory `Network`: a hub with a saga runner (its
 * registry, ledger and saga store on one SQLite file, and its saga engine's journal, outliving a crash of the hub), agents served by their fetch
 * handlers over stores that outlive a crash of the agent, and a model session over scripted providers. A run takes
 * a workload (sagas, signed calls, model turns, calls behind a human gate) and a fault schedule (network faults by request number, crashes and
 * restarts, clock jumps, provider errors), runs the workload one action at a time, and checks the invariants after
 * every action:
 *
 * - `ledger`: no pool allocates more than its mandate's limit, no allocation uses more than it was given, and what a
 *   pool reports allocated is what its allocations add up to;
 * - `replay`: a signed request runs its handler at most once, however often the network delivers it;
 * - `saga`: every saga ends committed, compensated or compensation_failed (a hub crash mid-saga included), runs each
 *   committed or compensated step's work exactly once (others at most once) and is charged at most one allocation
 *   per step; its pool, once its sagas ended, balances to the micro-dollar;
 * - `gate`: a capability behind a human gate runs no more often than its grantor approved it (never when the
 *   approval was denied, forged or withheld);
 * - `model-budget`: a model session never spends more tokens or dollars than its mandate grants.
 *
 * The run is a function of the mesh, the workload and the schedule: fibers are scheduled on microtasks only, the
 * clock moves only when the mesh is exactly idle (a turn of the event loop found the microtask queue empty and no
 * counted outside work is pending; then it moves to the earliest wake-up), nothing waits on real time, and
 * identities and randomness come from seeds. The trace (each request with its faults and outcome, each action with its outcome) is hashed into a
 * digest, so two runs of one schedule can be compared. Finding the shortest failing schedule (shrinking) is the
 * caller's: `shrink` drops events one at a time, and `scripts/simulate.ts` and the tests use it.
 *
 * Starting a hub and its agents costs about a quarter of a run, so they are started once per process and mesh (the
 * residents) and serve every run that leaves them at rest: what they hold of a run is the run's (its stores, journal
 * and network, reached through the run in progress; its clock, randomness and rate limits, through the section's
 * objects below) or reset before the next (the database, from the prepared snapshot). A crash within a run still
 * closes the process and starts another over its durable stores.
 *
 * Floor: sim (docs/architecture.md §3).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import BetterSqlite3 from "better-sqlite3"
import { createHash } from "node:crypto"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Runtime from "effect/Runtime"
import * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"
import { PCGRandom } from "effect/Utils"
import * as AgentClient from "../agent/AgentClient.js"
import type { Handler, RunInput } from "../agent/Handler.js"
import * as AgentWeb from "../agent/AgentWeb.js"
import * as AgentMemory from "../core/AgentMemory.js"
import * as Entropy from "../core/Entropy.js"
import { extractPublicKey, importIdentity, type MeshIdentity, verificationMethodId } from "../core/Did.js"
import * as IdempotencyStore from "../core/IdempotencyStore.js"
import { KeyNotFound, KeyResolver, type KeyResolverApi, KeyResolverUnavailable, type ResolvedKey } from "../core/KeyResolver.js"
import { Keys } from "../core/Keys.js"
import { signApproval } from "../core/Approval.js"
import { issueIntentMandate, issueModelBudgetMandate, issueTaskMandate } from "../core/Mandate.js"
import { ModelError, type ModelErrorCode, type ScriptStep } from "../core/ModelProvider.js"
import * as NonceStore from "../core/NonceStore.js"
import * as TaskStore from "../core/TaskStore.js"
import * as WebHandler from "../http/WebHandler.js"
import * as Hub from "../hub/Hub.js"
import { HubPublicUrl } from "../hub/HubHttp.js"
import { Ledger } from "../hub/Ledger.js"
import * as MeshClient from "../hub/MeshClient.js"
import * as RateLimiter from "../hub/RateLimiter.js"
import * as Registry from "../hub/Registry.js"
import { fromSpecs } from "../model/ModelCatalogue.js"
import * as ModelRouter from "../model/ModelRouter.js"
import * as ModelSession from "../model/ModelSession.js"
import { SagaHubApi } from "../saga/SagaApi.js"
import { SagaHubHandlers } from "../saga/SagaHttp.js"
import type { SagaResult } from "../saga/Saga.js"
import * as SagaScheduler from "../saga/SagaScheduler.js"
import * as SagaStore from "../saga/SagaStore.js"
import * as KeysNative from "../node/KeysNative.js"
import * as MandateCache from "../core/MandateCache.js"
import * as JournalEngine from "./JournalEngine.js"
import * as Network from "./Network.js"
import * as SimClock from "./SimClock.js"

// ---------------------------------------------------------------------------------------------------------------
// What a simulation is given

/**
 * A planted flaw of an agent, for showing that the simulation finds such bugs: `ignores-nonces` accepts every
 * signed request however often it is replayed, `forgets-replies` runs a repeated Idempotency-Key again,
 * `skips-gates` runs a gated capability without asking the task guard (so without pausing for a human).
 */
export type Flaw = "ignores-nonces" | "forgets-replies" | "skips-gates"

/** An agent of the mesh: its name (also its DID's and origin's), the capabilities that always fail, a flaw. */
export interface AgentSpec {
  readonly name: string
  /**
   * The agent's own logic, as `AgentServer` takes it; default one that answers `<name> did <capability>`. Either
   * way the simulation counts each run per saga step or call (the `saga` and `replay` invariants).
   */
  readonly handler?: Handler
  /** Capabilities that always fail (the handler throws before it runs). */
  readonly failing?: ReadonlyArray<string>
  readonly flaws?: ReadonlyArray<Flaw>
}

/** A step of a saga in a workload: the agent, the capability (`undo-<capability>` compensates it), budget and cost. */
export interface StepSpec {
  readonly agent: string
  readonly capability: string
  readonly budgetUsd: number
  readonly costUsd: number
}

/** One action of the workload. */
export type Action =
  | { readonly _tag: "Saga"; readonly spendLimitUsd: number; readonly steps: ReadonlyArray<StepSpec> }
  | { readonly _tag: "Call"; readonly agent: string; readonly capability: string }
  | { readonly _tag: "Chat"; readonly prompt: string }
  | {
    readonly _tag: "Gated"
    readonly agent: string
    readonly capability: string
    /**
     * What the human does with the approval request: `approve` and `deny` sign that decision as the grantor,
     * `forged` signs an approval as someone who is not the grantor, `withheld` never answers.
     */
    readonly approval: "approve" | "deny" | "forged" | "withheld"
  }

/** The mesh and what it does. */
export interface MeshSpec {
  readonly agents: ReadonlyArray<AgentSpec>
  readonly workload: ReadonlyArray<Action>
  /** The model session's mandate: tokens and dollars. */
  readonly modelBudget: { readonly tokens: number; readonly usd: number }
}

/** One event of a fault schedule. */
export type FaultEvent =
  /** A network fault on the workload's `request`-th request (counted from 0 once the mesh is set up). */
  | { readonly _tag: "Net"; readonly request: number; readonly fault: Network.Fault }
  /** The hub or an agent crashes before action `before` and comes back on its durable stores. */
  | { readonly _tag: "Crash"; readonly target: string; readonly before: number }
  /**
   * The hub or an agent crashes as the workload's `request`-th request is sent (in the middle of an action: a hub
   * mid-saga) and comes back at once on its durable stores; the request goes on to the restarted process, or dies with
   * its sender.
   */
  | { readonly _tag: "CrashDuring"; readonly target: string; readonly request: number }
  /** The clock jumps forward before action `before`. */
  | { readonly _tag: "ClockJump"; readonly before: number; readonly millis: number }
  /** The model provider's `call`-th call fails with `code`. */
  | { readonly _tag: "ProviderError"; readonly call: number; readonly code: ModelErrorCode }

/** A fault schedule. */
export type Schedule = ReadonlyArray<FaultEvent>

/** The invariants a run checks. */
export type Invariant = "ledger" | "replay" | "saga" | "gate" | "model-budget" | "progress"

/** An invariant that did not hold, after which action. */
export interface Violation {
  readonly invariant: Invariant
  readonly action: number
  readonly message: string
}

/** What a run did. */
export interface Report {
  /** One line per action: what it was and how it ended. */
  readonly actions: ReadonlyArray<string>
  readonly network: ReadonlyArray<Network.TraceLine>
  /** One line per crash in the middle of an action: which process, on which request, and the sagas it left in flight. */
  readonly crashes: ReadonlyArray<string>
  /** The first violation; the run stops there. */
  readonly violation: Violation | undefined
  /** SHA-256 of the actions and the network trace: equal for two runs of one schedule. */
  readonly digest: string
}

// ---------------------------------------------------------------------------------------------------------------
// The example mesh

/**
 * The example mesh: a shop and a bank, two sagas (one commits, one compensates), signed calls, model turns, and two
 * capabilities behind a human gate (one approved, one answered with a forged approval).
 */
export const exampleMesh: MeshSpec = {
  agents: [{ name: "shop" }, { name: "bank", failing: ["decline"] }],
  workload: [
    {
      _tag: "Saga",
      spendLimitUsd: 20,
      steps: [
        { agent: "shop", capability: "reserve", budgetUsd: 5, costUsd: 3 },
        { agent: "bank", capability: "pay", budgetUsd: 10, costUsd: 10 }
      ]
    },
    { _tag: "Call", agent: "shop", capability: "quote" },
    { _tag: "Chat", prompt: "plan the trip" },
    {
      _tag: "Saga",
      spendLimitUsd: 12,
      steps: [
        { agent: "shop", capability: "reserve", budgetUsd: 5, costUsd: 2 },
        { agent: "bank", capability: "decline", budgetUsd: 5, costUsd: 1 }
      ]
    },
    { _tag: "Call", agent: "bank", capability: "balance" },
    { _tag: "Chat", prompt: "summarise the bookings" },
    { _tag: "Gated", agent: "bank", capability: "wire", approval: "approve" },
    { _tag: "Gated", agent: "shop", capability: "refund", approval: "forged" }
  ],
  modelBudget: { tokens: 2_000, usd: 0.01 }
}

// ---------------------------------------------------------------------------------------------------------------
// Schedules from seeds

/** The kinds of network fault a generated schedule draws from. */
const netFault = (rng: PCGRandom): Network.Fault => {
  switch (rng.integer(5)) {
    case 0:
      return { _tag: "DropRequest" }
    case 1:
      return { _tag: "DropResponse" }
    case 2:
      return { _tag: "Duplicate" }
    default:
      return { _tag: "Delay", millis: [10, 500, 5_000][rng.integer(3)]! }
  }
}

/** Bounds of generated schedules. */
export interface ScheduleBounds {
  /** Events at most. Default 8. */
  readonly maxEvents?: number
  /** Requests a run sends at most (faults land below it). Default 120. */
  readonly requests?: number
  /** Provider calls at most. Default 8. */
  readonly providerCalls?: number
}

const PROVIDER_CODES: ReadonlyArray<ModelErrorCode> = ["PROVIDER_UNAVAILABLE", "PROVIDER_RATE_LIMITED", "PROVIDER_BAD_RESPONSE"]

/**
 * One event drawn from `rng`: mostly network faults, some crashes (between actions, or of the hub as a request goes
 * out, which lands in a saga about half the time), clock jumps and provider errors.
 */
export const drawEvent = (rng: PCGRandom, spec: MeshSpec, bounds: ScheduleBounds = {}): FaultEvent => {
  const actions = spec.workload.length
  const kind = rng.integer(10)
  if (kind < 5) return { _tag: "Net", request: rng.integer(bounds.requests ?? 120), fault: netFault(rng) }
  if (kind < 7) {
    const targets = ["hub", ...spec.agents.map((a) => a.name)]
    return { _tag: "Crash", target: targets[rng.integer(targets.length)]!, before: rng.integer(actions) }
  }
  if (kind < 8) return { _tag: "CrashDuring", target: "hub", request: rng.integer(bounds.requests ?? 120) }
  if (kind < 9) return { _tag: "ClockJump", before: rng.integer(actions), millis: [1_000, 60_000, 600_000, 7_200_000][rng.integer(4)]! }
  return { _tag: "ProviderError", call: rng.integer(bounds.providerCalls ?? 8), code: PROVIDER_CODES[rng.integer(PROVIDER_CODES.length)]! }
}

/** The schedule of a seed: the same seed gives the same schedule. */
export const scheduleOf = (seed: number, spec: MeshSpec, bounds: ScheduleBounds = {}): Schedule => {
  const rng = new PCGRandom(seed)
  const n = rng.integer((bounds.maxEvents ?? 8) + 1)
  return Array.from({ length: n }, () => drawEvent(rng, spec, bounds))
}

/** A schedule as one line per event, for reports and for pasting into a test. */
export const describeSchedule = (schedule: Schedule): string =>
  schedule.length === 0 ? "(no faults)" : schedule.map(describeEvent).join("\n")

/** One event as text. */
export const describeEvent = (e: FaultEvent): string => {
  switch (e._tag) {
    case "Net":
      return `request ${e.request}: ${Network.faultName(e.fault)}`
    case "Crash":
      return `before action ${e.before}: crash and restart ${e.target}`
    case "CrashDuring":
      return `request ${e.request}: ${e.target} crashes as it is sent, and restarts`
    case "ClockJump":
      return `before action ${e.before}: clock jumps ${e.millis} ms`
    case "ProviderError":
      return `provider call ${e.call}: ${e.code}`
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Running on the simulated clock

/** How many times an action may move the clock before the driver calls it stuck. */
const MAX_JUMPS = 10_000

/**
 * Fibers scheduled on microtasks only, never on timers: so once a turn of the event loop comes round, every fiber
 * that could run has run, in an order that does not depend on how fast the machine is.
 */
const microtaskScheduler = new Scheduler.MixedScheduler(Number.MAX_SAFE_INTEGER)

/**
 * Work of a run that finishes outside any fiber and outside the microtask queue (a native call on the thread pool):
 * each is counted from its start until it settles, and the mesh is not idle while any is.
 */
export interface Outside {
  readonly pending: Set<Promise<void>>
}

/** Counts `work` as outside work of the run until it settles. */
const track = <A>(outside: Outside, work: Promise<A>): Promise<A> => {
  const settled: Promise<void> = work.then(
    () => void outside.pending.delete(settled),
    () => void outside.pending.delete(settled)
  )
  outside.pending.add(settled)
  return work
}

/** What drives a run: its clock and its outside work. */
export interface Driver {
  readonly clock: SimClock.SimClock
  readonly outside: Outside
}

/** One turn of the event loop: by the time it comes round, the microtask queue (and so every fiber) has run dry. */
const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Waits until the mesh is idle: every fiber that can run has run (a turn of the event loop found the microtask
 * queue empty) and no outside work is pending (waited for by its promise, not by the time it takes).
 */
const quiesce = (outside: Outside): Effect.Effect<void> =>
  Effect.promise(async () => {
    for (;;) {
      await turn()
      if (outside.pending.size === 0) return
      await Promise.race(outside.pending)
    }
  })

/**
 * Runs `effect` to its end, moving the clock to the next wake-up only when the mesh is idle: every fiber is waiting
 * (on the clock, or on another fiber that is) and no outside work is pending. Whether and when the clock moves
 * depends on what the fibers do, never on how long it takes. Answers `stuck` when the mesh is idle, the effect has
 * not ended and nothing waits on the clock.
 */
export const drive = <A, E, R>(effect: Effect.Effect<A, E, R>, driver: Driver): Effect.Effect<Exit.Exit<A, E> | "stuck", never, R> =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(effect)
    for (let jumps = 0; jumps < MAX_JUMPS; jumps++) {
      yield* quiesce(driver.outside)
      const exit = yield* Fiber.poll(fiber)
      if (Option.isSome(exit)) return exit.value
      if (!driver.clock.advance()) break
    }
    yield* Fiber.interrupt(fiber)
    return "stuck" as const
  })

/**
 * The platform's `crypto.subtle.digest` (the workflow engine hashes execution ids with it) runs on the thread pool:
 * for the run it is counted as outside work, and restored afterwards.
 */
const withTrackedDigest = <A, E, R>(outside: Outside, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const subtle = globalThis.crypto.subtle
      const digest = subtle.digest.bind(subtle)
      Object.defineProperty(subtle, "digest", { configurable: true, writable: true, value: (...args: Parameters<SubtleCrypto["digest"]>) => track(outside, digest(...args)) })
      return subtle
    }),
    () => effect,
    (subtle) => Effect.sync(() => void delete (subtle as { digest?: unknown }).digest)
  )

// ---------------------------------------------------------------------------------------------------------------
// The clock, randomness and caches of the section in progress

/**
 * What a section of simulated work (a run, the preparation, a start of the residents) gives every fiber in it. The
 * hub and the agents are started once and serve many runs, and what they took when started (their runtime's `Clock`
 * and `Random`, their `Entropy`, their caches and rate limiters) is one of the process-wide objects below, each of
 * which acts as the section's in progress: so a resident keeps time by the run's clock and draws from the run's seed,
 * as a process started for the run would.
 */
interface Section {
  readonly clock: SimClock.SimClock
  readonly random: Random.Random
  readonly entropy: Entropy.EntropyApi
  /** The buckets of each rate limiter the hubs made, by limiter: empty at the start of the section. */
  readonly limiters: Map<symbol, RateLimiter.RateLimiter>
}

let section: Section | undefined = undefined

/** The section in progress; throws outside one (a resident's fiber still at work between runs would be a bug). */
const inSection = (): Section => {
  if (section === undefined) throw new Error("the simulated clock or randomness was used outside a simulation run")
  return section
}

/** The Clock of every simulated fiber: the section's. */
const sectionClock: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => inSection().clock.unsafeCurrentTimeMillis(),
  currentTimeMillis: Effect.sync(() => inSection().clock.unsafeCurrentTimeMillis()),
  unsafeCurrentTimeNanos: () => inSection().clock.unsafeCurrentTimeNanos(),
  currentTimeNanos: Effect.sync(() => inSection().clock.unsafeCurrentTimeNanos()),
  sleep: (duration) => Effect.suspend(() => inSection().clock.sleep(duration))
}

/** Effect's `Random` of every simulated fiber: the section's. */
const sectionRandom: Random.Random = {
  [Random.RandomTypeId]: Random.RandomTypeId,
  next: Effect.suspend(() => inSection().random.next),
  nextBoolean: Effect.suspend(() => inSection().random.nextBoolean),
  nextInt: Effect.suspend(() => inSection().random.nextInt),
  nextRange: (min, max) => Effect.suspend(() => inSection().random.nextRange(min, max)),
  nextIntBetween: (min, max) => Effect.suspend(() => inSection().random.nextIntBetween(min, max)),
  shuffle: (elements) => Effect.suspend(() => inSection().random.shuffle(elements))
}

/** The `Entropy` of every simulated fiber: the section's seeded generator. */
const sectionEntropy: Entropy.EntropyApi = {
  kind: "seeded",
  bytes: (n) => inSection().entropy.bytes(n),
  nonceBytes: (n) => inSection().entropy.nonceBytes(n),
  uuid: () => inSection().entropy.uuid()
}

/** The mandate cache of every simulated fiber, emptied as each section starts: every run parses the same tokens. */
const sectionMandates = MandateCache.make()

/**
 * The hubs' rate limits, kept in memory as a SQLite hub keeps them, in buckets of the section's: each limiter a hub
 * makes starts every section with no bucket, as the limiter of a hub started for the run would (and a hub started
 * again after a crash makes new limiters, whose buckets are empty).
 */
const sectionRateLimits: RateLimiter.SharedRateLimits["Type"] = {
  make: (_name, options) => {
    const id = Symbol("limiter")
    return {
      take: (key) =>
        Effect.suspend(() => {
          const { limiters } = inSection()
          let limiter = limiters.get(id)
          if (limiter === undefined) {
            limiter = RateLimiter.make(options)
            limiters.set(id, limiter)
          }
          return limiter.take(key)
        })
    }
  }
}

/** The process's `Keys`: OpenSSL key objects of the mesh's fixed identities, made once (the preparation signs with each). */
const sharedKeys = KeysNative.makeNative()

/** The services every simulated fiber has. */
type SimulationServices = Entropy.Entropy | Keys | MandateCache.MandateCache

/**
 * Every id, nonce and key outside Effect's Random from one seeded generator (the same requests in every run); the
 * keys' caches (key objects by key bytes), which are pure and shared by every run of the process, so a run does not
 * import the mesh's fixed keys again; the mandate cache, emptied for each section, so every run parses the same tokens.
 */
const simulationServices: Context.Context<SimulationServices> = Context.make(Entropy.Entropy, sectionEntropy).pipe(
  Context.add(Keys, sharedKeys),
  Context.add(MandateCache.MandateCache, sectionMandates)
)

/** Gives `effect` the simulation's clock, randomness, scheduler and services: what every simulated fiber runs with. */
const inSimulation = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, SimulationServices>> =>
  effect.pipe(
    // Effect's own randomness (retry jitter, the router's draws) seeded, so retries wait the same from run to run.
    Effect.withRandom(sectionRandom),
    Effect.withClock(sectionClock),
    Effect.withScheduler(microtaskScheduler),
    // An agent's failing handler logs at ERROR; thousands of runs would drown what the run reports.
    Logger.withMinimumLogLevel(LogLevel.None),
    Effect.provide(simulationServices)
  )

let processRuntime: Runtime.Runtime<SimulationServices> | undefined = undefined

/**
 * Runs `effect` (starting a process of the mesh) in a fiber of its own, started afresh in the simulation rather than
 * forked from the fiber that starts the process. A process keeps the fiber refs it was started with (its runtime's),
 * and a forked fiber's refs stack its parent's: a process started from a fiber of another (a crash set off by a
 * request) would carry that fiber's refs, the other process's context among them, and a resident would carry them
 * into every later run, each restart's stacked on the last's.
 */
const asProcess = <A, E>(effect: Effect.Effect<A, E, SimulationServices>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    processRuntime ??= Effect.runSync(inSimulation(Effect.runtime<SimulationServices>()))
    const fiber = Runtime.runFork(processRuntime)(effect)
    // Awaited, not joined: the caller takes nothing of the process's refs either.
    return Effect.onInterrupt(Effect.flatten(Fiber.await(fiber)), () => Fiber.interrupt(fiber))
  })

/** Runs `effect` as the section `next`: the process-wide clock, randomness and caches act as its while it runs. */
const withSection = (next: Section) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      section = next
      sectionMandates.headers.clear()
      sectionMandates.chains.clear()
    }),
    () => effect,
    () => Effect.sync(() => void (section = undefined))
  )

// ---------------------------------------------------------------------------------------------------------------
// The mesh

const HUB = "http://hub.sim"
const DAY = 86_400_000
const originOf = (name: string) => `http://${name}.sim`

/** A 32-byte seed for the `n`-th identity of a run: identities are fixed, so requests are the same from run to run. */
const keySeed = (n: number): Uint8Array => new Uint8Array(32).fill(n + 1)

/** What the agents' handlers did: `${key}|${capability}` → runs. */
type Effects = Map<string, number>

/** A nonce store that accepts every nonce: an agent with it accepts replayed requests. */
const ignoringNonces: NonceStore.NonceStoreApi = { record: () => Effect.void }

/** An idempotency store that remembers nothing: an agent with it runs a repeated key's request again. */
const forgettingReplies: IdempotencyStore.IdempotencyStoreApi = {
  claim: () => Effect.succeed({ _tag: "Claimed" }),
  complete: () => Effect.void,
  release: () => Effect.void
}

/** The handler of an agent of the simulation: counts what it did per saga step or call, fails what it is told to. */
const handlerOf = (spec: AgentSpec, effects: Effects): Handler => (input: RunInput) => {
  const capability = input.capability ?? input.message
  if (spec.failing?.includes(capability) === true) throw new Error(`${spec.name} cannot ${capability}`)
  const ctx = input.context as {
    readonly sagaId?: string
    readonly step?: string
    readonly callId?: string
    readonly gateId?: string
    readonly params?: { readonly costUsd?: number }
  }
  if (ctx.gateId !== undefined) {
    // Counted only once past the guard: what the `gate` invariant holds against the approvals given. A gated call
    // runs this work, not the agent's own handler: the guard must come first, and a handler need not call it.
    const gated = async () => {
      if (spec.flaws?.includes("skips-gates") !== true) await input.guard(capability)
      effects.set(`gate:${ctx.gateId}|${capability}`, (effects.get(`gate:${ctx.gateId}|${capability}`) ?? 0) + 1)
      return `${spec.name} did ${capability}`
    }
    return gated()
  }
  const key = ctx.callId !== undefined ? `call:${ctx.callId}` : `${ctx.sagaId}:${ctx.step}`
  effects.set(`${key}|${capability}`, (effects.get(`${key}|${capability}`) ?? 0) + 1)
  if (ctx.params?.costUsd !== undefined && input.commit !== undefined) input.reportCost(ctx.params.costUsd)
  return spec.handler === undefined ? `${spec.name} did ${capability}` : spec.handler(input)
}

/** What an agent process of a run reaches through its resident: the run's stores (they outlive its crashes) and handler. */
interface RunAgent {
  readonly spec: AgentSpec
  readonly identity: MeshIdentity
  readonly stores: Context.Context<RunStores>
  readonly handler: Handler
}

/** The stores an agent keeps in a run, made for each run (its nonce, idempotency and task stores, and caller keys). */
type RunStores = TaskStore.TaskStore | NonceStore.NonceStore | IdempotencyStore.IdempotencyStore | KeyResolver

/** A run's pieces that outlive crashes. */
interface World {
  readonly network: Network.NetworkApi
  readonly http: HttpClient.HttpClient
  readonly runner: MeshIdentity
  readonly buyer: MeshIdentity
  readonly chatter: MeshIdentity
  readonly agents: ReadonlyMap<string, RunAgent>
  readonly effects: Effects
  /** Gated calls by id → approvals signed by their grantor and sent to the agent. */
  readonly approvals: Map<string, number>
  /** The saga engine's journal: the hub's durable workflow state, which a crash of the hub keeps. */
  readonly journal: JournalEngine.Journal
}

/**
 * A process of the mesh: its scope, closed when it crashes, and the handler it serves. `fibers` are the workflows it
 * runs (the hub's): with none, and no request in flight at `handler`, it is at rest.
 */
interface Process<A> {
  readonly scope: Scope.CloseableScope
  readonly handler: Network.Handler
  readonly fibers: JournalEngine.Fibers
  readonly value: A
}

/** The journal a hub reads outside any run (while it is built): none of its executions. */
const noJournal: JournalEngine.Journal = JournalEngine.makeJournal()

/** Where the residents find the run in progress: set for the run, cleared after it. */
interface Current {
  world: World | undefined
}

/** The run in progress; dies outside one. */
const worldOf = (current: Current): World => {
  const world = current.world
  if (world === undefined) throw new Error("a process of the simulated mesh was used outside a run")
  return world
}

/** An `HttpClient` over the network of the run in progress. */
const routedTo = (current: Current): HttpClient.HttpClient => HttpClient.make((request, url) => Effect.suspend(() => worldOf(current).network.send(request, url)))

/** The journal of the run in progress, or none outside a run (a resident being started). */
const journalOf = (current: Current) => (): JournalEngine.Journal => current.world?.journal ?? noJournal

/**
 * The hub's services, scheduler and handler in a scope of their own, over the mesh's database and the run's network
 * and journal; `serveHub` puts it on a network. What it keeps must not hold a run's network or anything of a run
 * (a resident outlives them), so it takes the run in progress only through `prepared.current`.
 */
const startHub = (prepared: Prepared) =>
  asProcess(Effect.gen(function* () {
    const scope = yield* Scope.make()
    const runner = { did: prepared.runner.did, privateKey: prepared.runner.privateKey }
    // The hub's purges a day apart: every wake-up is a step of the driver, and a run spans minutes to hours.
    const services = Hub.layerServicesWithDatabase({ database: prepared.database, nonces: { purgeIntervalMs: DAY }, challengePurge: { intervalMs: DAY } })
    // The engine's journal is the run's, so a saga in flight when the hub crashed resumes in the next hub.
    const fibers: JournalEngine.Fibers = new Set()
    const scheduler = SagaScheduler.layerOn({ runner }).pipe(
      Layer.provideMerge(JournalEngine.layer(journalOf(prepared.current), fibers)),
      Layer.provide(Layer.mergeAll(SagaScheduler.layerAgentsFromRegistry, AgentClient.layer().pipe(Layer.provide(Layer.succeed(HttpClient.HttpClient, prepared.http))))),
      Layer.provideMerge(services)
    )
    // The hub's rate limits in memory, as on SQLite, but the run's: a resident hub starts each run with none spent.
    const context = yield* Layer.buildWithScope(scheduler, scope).pipe(Effect.provideService(RateLimiter.SharedRateLimits, sectionRateLimits))
    const handler = yield* WebHandler.make(SagaHubApi, SagaHubHandlers, { allowedHosts: ["hub.sim"], clientAddress: () => "10.0.0.1" }).pipe(
      Effect.provide(context),
      Effect.provideService(HubPublicUrl, HUB),
      Scope.extend(scope)
    )
    return { scope, handler, fibers, value: { context } } satisfies Process<unknown>
  }))

type HubProcess = Effect.Effect.Success<ReturnType<typeof startHub>>

/**
 * Puts a started hub on `network`, makes the admin credential on a database's first start, and then, as a durable
 * engine's runner picks up its workflows on start, resumes every saga of the run's journal that has not ended.
 */
const serveHub = (prepared: Prepared, hub: HubProcess, network: Network.NetworkApi) =>
  Effect.gen(function* () {
    yield* network.register(HUB, hub.handler)
    const admin = yield* Effect.orDie(Context.get(hub.value.context, Registry.Registry).ensureAdmin)
    yield* JournalEngine.resumeAll(journalOf(prepared.current)(), SagaScheduler.SagaWorkflow).pipe(Effect.provide(hub.value.context))
    return admin
  })

/**
 * The stores an agent process is built over: each call goes to the run's store, so a process built once serves every
 * run with that run's stores, and one restarted after a crash finds the stores its predecessor left.
 */
const runStoresOf = (prepared: Prepared, name: string): Context.Context<RunStores | AgentMemory.AgentMemory> => {
  const stores = () => worldOf(prepared.current).agents.get(name)!.stores
  const tasks = () => Context.get(stores(), TaskStore.TaskStore)
  const nonces = () => Context.get(stores(), NonceStore.NonceStore)
  const replies = () => Context.get(stores(), IdempotencyStore.IdempotencyStore)
  const keys = () => Context.get(stores(), KeyResolver)
  return Context.empty().pipe(
    Context.add(TaskStore.TaskStore, {
      charge: (charges, retainUntilMs) => Effect.suspend(() => tasks().charge(charges, retainUntilMs)),
      adjust: (adjustments, retainUntilMs) => Effect.suspend(() => tasks().adjust(adjustments, retainUntilMs)),
      used: (scope, counter) => Effect.suspend(() => tasks().used(scope, counter)),
      pause: (task) => Effect.suspend(() => tasks().pause(task)),
      paused: (taskId) => Effect.suspend(() => tasks().paused(taskId)),
      claim: (taskId, to) => Effect.suspend(() => tasks().claim(taskId, to))
    }),
    Context.add(NonceStore.NonceStore, {
      record: (sender, nonce, retainUntilMs) => Effect.suspend(() => nonces().record(sender, nonce, retainUntilMs)),
      // Through the run's store as the caller would reach it directly (its `recordAt` where it has one).
      recordAt: (sender, nonce, retainUntilMs, nowMs) => Effect.suspend(() => NonceStore.recordAtTime(nonces(), sender, nonce, retainUntilMs, nowMs))
    }),
    Context.add(IdempotencyStore.IdempotencyStore, {
      claim: (request) => Effect.suspend(() => replies().claim(request)),
      complete: (scope, key, holder, reply) => Effect.suspend(() => replies().complete(scope, key, holder, reply)),
      release: (scope, key, holder) => Effect.suspend(() => replies().release(scope, key, holder))
    }),
    Context.add(KeyResolver, {
      resolve: (did) => Effect.suspend(() => keys().resolve(did)),
      isMandateRevoked: (jti, issuer) => Effect.suspend(() => keys().isMandateRevoked!(jti, issuer))
    }),
    Context.add(AgentMemory.AgentMemory, AgentMemory.none)
  )
}

/** An agent's fetch handler in a scope of its own, over the run's stores and with the run's handler. */
const startAgent = (prepared: Prepared, name: string) =>
  asProcess(Effect.gen(function* () {
    const identity = prepared.agents.get(name)!
    const scope = yield* Scope.make()
    const stores = runStoresOf(prepared, name)
    const handler = yield* AgentWeb.make(
      {
        name,
        did: identity.did,
        privateKey: identity.privateKey,
        auth: "mesh-sig",
        publicUrl: originOf(name),
        handler: (input) => worldOf(prepared.current).agents.get(name)!.handler(input),
        resolveCallerKey: Context.get(stores, KeyResolver)
      },
      Layer.succeedContext(stores)
    ).pipe(Scope.extend(scope), Effect.orDie)
    return { scope, handler, fibers: new Set(), value: undefined } satisfies Process<unknown>
  }))

/**
 * What every run of a mesh with these agents starts from, made once per process: the identities, the hub's
 * database migrated with every party registered (a snapshot, and the mesh's database reset to it before each run),
 * and the hub and agents themselves (`residents`), started once and reused by every run that leaves them at rest.
 */
interface Prepared {
  readonly runner: MeshIdentity
  readonly buyer: MeshIdentity
  readonly chatter: MeshIdentity
  readonly agents: ReadonlyMap<string, MeshIdentity>
  /** The mesh's SQLite file, which the hub serves from: the snapshot's content at the start of every run. */
  readonly database: string
  /** Brings `database` back to the snapshot (every table emptied and filled again, in one transaction). */
  readonly resetDatabase: () => void
  /**
   * Each agent's client of the hub, for looking up caller keys: built once, since building a client of the hub's API
   * costs more than a run's saga, and sending over the current run's network. Its own key cache is not used: its
   * entries would outlive the run (`cachedKeys` keeps a run's).
   */
  readonly hubClients: ReadonlyMap<string, MeshClient.MeshClientApi>
  /** An `HttpClient` over the network of the run in progress: what the hub's saga runner calls agents with. */
  readonly http: HttpClient.HttpClient
  /** The run in progress, which the residents reach (its network, journal, stores and handlers); none between runs. */
  readonly current: Current
  /** The hub (`hub`) and the agents (by name), started outside any run; a run replaces one that crashed. */
  readonly residents: Map<string, Process<unknown>>
}

/** How long an agent keeps a caller's key: `MeshClient`'s default. */
const KEY_CACHE_MS = 30_000

/**
 * Caller keys from the hub's DID resolver through `hub`, cached for `KEY_CACHE_MS` by the run's clock in a cache of
 * the run's own (revocations not cached), as `MeshClient.keyResolver` does: what an agent's `hubUrl` gives it.
 */
const cachedKeys = (hub: MeshClient.MeshClientApi): KeyResolverApi => {
  const cache = new Map<string, { readonly key: ResolvedKey; readonly until: number }>()
  const fetch = (did: string) =>
    hub.resolveDid(did).pipe(
      Effect.mapError((e) =>
        e.code === "NOT_FOUND" || e.code === "INVALID_DID"
          ? new KeyNotFound({ code: "KEY_NOT_FOUND", message: e.message, did })
          : new KeyResolverUnavailable({ code: "RESOLVER_UNAVAILABLE", message: e.message, did })
      ),
      Effect.flatMap((r) =>
        extractPublicKey(r.document, verificationMethodId(did)).pipe(
          Effect.catchTags({
            MalformedDidDocument: (e) => Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: e.message, did })),
            MalformedKey: (e) => Effect.fail(new KeyNotFound({ code: "KEY_NOT_FOUND", message: `${e.code}: ${e.message}`, did }))
          }),
          Effect.map((publicKey): ResolvedKey => ({ publicKey, keyVersion: r.keyVersion }))
        )
      )
    )
  return {
    resolve: (did) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const hit = cache.get(did)
        if (hit !== undefined && hit.until > now) return Effect.succeed(hit.key)
        return Effect.tap(fetch(did), (key) => Effect.sync(() => void cache.set(did, { key, until: now + KEY_CACHE_MS })))
      }),
    // A revocation list that cannot be read must not let a revoked mandate through.
    isMandateRevoked: (jti, issuer) => Effect.orElseSucceed(hub.isMandateRevoked(jti, issuer), () => true)
  }
}

/** A table's name or column quoted for SQLite. */
const quoted = (name: string): string => `"${name.replaceAll("\"", "\"\"")}"`

/** The tables a reset copies (name, and whether rows have rowids), and the full-text indexes it rebuilds. */
interface ResetPlan {
  readonly tables: ReadonlyArray<{ readonly name: string; readonly rowid: boolean }>
  readonly indexes: ReadonlyArray<string>
}

/** What `db`'s main schema holds: every table but the full-text indexes and their shadow tables, in name order. */
const planOf = (db: BetterSqlite3.Database): ResetPlan => {
  const all = db.prepare<[], { name: string; sql: string }>("SELECT name, sql FROM main.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all()
  const indexes = all.filter((t) => /^CREATE VIRTUAL TABLE/i.test(t.sql)).map((t) => t.name)
  // An FTS5 table's shadow tables are its index: rebuilt from the content table, never copied.
  const shadow = (name: string) => indexes.some((v) => ["data", "idx", "docsize", "config", "content"].some((suffix) => name === `${v}_${suffix}`))
  const tables = all.filter((t) => !indexes.includes(t.name) && !shadow(t.name)).map((t) => ({ name: t.name, rowid: !/WITHOUT\s+ROWID/i.test(t.sql) }))
  return { tables, indexes }
}

/** The column holding a row's rowid in the snapshot's copy of a table. */
const ROWID = "snapshot_rowid"

/**
 * A reset of `database` to what it holds now (the snapshot, kept in memory beside it on a connection of its own,
 * which stays open beside the hub's): every table is emptied and filled again from the snapshot with its rowids, in
 * name order, in one transaction, then each full-text index is rebuilt from its content table. Triggers fire as on
 * any write (a registry entry's insert makes its search row, which the search table's own turn then replaces), so a
 * table maintained by a trigger must sort after the table whose trigger writes it (`mesh_entries` before
 * `mesh_search_docs`, `mesh_allocations` before `mesh_pools`). The first few resets of a process, those after its
 * first runs wrote to the database among them, check that the result is the snapshot (`checkReset`).
 */
const databaseReset = (database: string): { readonly reset: () => void; readonly db: BetterSqlite3.Database } => {
  const db = new BetterSqlite3(database, { fileMustExist: true })
  db.exec("ATTACH DATABASE ':memory:' AS prepared")
  const plan = planOf(db)
  const statements: Array<BetterSqlite3.Statement> = []
  for (const t of plan.tables) {
    const columns = db.prepare<[string], { name: string }>("SELECT name FROM pragma_table_info(?)").all(t.name).map((c) => quoted(c.name)).join(", ")
    db.exec(`CREATE TABLE prepared.${quoted(t.name)} AS SELECT ${t.rowid ? `rowid AS ${ROWID}, ` : ""}${columns} FROM main.${quoted(t.name)}`)
    const rowid = t.rowid ? "rowid, " : ""
    statements.push(db.prepare(`DELETE FROM main.${quoted(t.name)}`))
    statements.push(db.prepare(`INSERT INTO main.${quoted(t.name)} (${rowid}${columns}) SELECT ${t.rowid ? `${ROWID}, ` : ""}${columns} FROM prepared.${quoted(t.name)}`))
  }
  for (const v of plan.indexes) statements.push(db.prepare(`INSERT INTO main.${quoted(v)} (${quoted(v)}) VALUES ('rebuild')`))
  const reset = db.transaction(() => {
    for (const s of statements) s.run()
  })
  let checks = 5
  return {
    reset: () => {
      reset()
      if (checks-- > 0) checkReset(db, plan)
    },
    db
  }
}

/**
 * Throws unless every table the reset copies holds exactly the snapshot's rows, rowids included, and every full-text
 * index is consistent with its content: a migration that adds a trigger the reset's order does not follow is caught
 * on the first runs.
 */
const checkReset = (db: BetterSqlite3.Database, plan: ResetPlan): void => {
  // Each table's rows as text, in one order whatever order the statement returned them in.
  const rows = (sql: string) => db.prepare(sql).raw().all().map((r) => JSON.stringify(r)).sort().join("\n")
  for (const t of plan.tables) {
    if (rows(`SELECT ${t.rowid ? "rowid, " : ""}* FROM main.${quoted(t.name)}`) !== rows(`SELECT * FROM prepared.${quoted(t.name)}`)) {
      throw new Error(`the simulation's database reset does not restore table ${t.name}`)
    }
  }
  for (const v of plan.indexes) db.prepare(`INSERT INTO main.${quoted(v)} (${quoted(v)}) VALUES ('integrity-check')`).run()
}

/** Identities, a registered database, and the hub's clients for the agents named `names`: a hub is started once, then stopped. */
const prepare = (names: ReadonlyArray<string>, files: MeshFiles) =>
  Effect.gen(function* () {
    const network = yield* Network.make
    const http = Network.client(network)
    const withHttp = Effect.provideService(HttpClient.HttpClient, http)
    const runner = yield* importIdentity("did:mesh:saga-runner", keySeed(0))
    const buyer = yield* importIdentity("did:mesh:buyer", keySeed(1))
    const chatter = yield* importIdentity("did:mesh:chatter", keySeed(2))
    const agents = new Map<string, MeshIdentity>()
    for (const [i, name] of names.entries()) agents.set(name, yield* importIdentity(`did:mesh:${name}`, keySeed(3 + i)))
    const current: Current = { world: { network, http, runner, buyer, chatter, agents: new Map(), effects: new Map(), approvals: new Map(), journal: JournalEngine.makeJournal() } }
    const routed = routedTo(current)
    // The hub of the preparation serves from a file of its own, which becomes the snapshot.
    const preparing: Prepared = { runner, buyer, chatter, agents, database: files.preparing, resetDatabase: () => {}, hubClients: new Map(), http: routed, current, residents: new Map() }
    const hub = yield* startHub(preparing)
    const admin = Option.getOrThrow(yield* serveHub(preparing, hub, network)).apiKey
    const client = yield* withHttp(MeshClient.make({ hubUrl: HUB, apiKey: admin, retry: { times: 0 } }))
    const register = (identity: MeshIdentity, endpointUrl: string) =>
      Effect.gen(function* () {
        const key = yield* client.createApiKey({ owner: identity.did })
        yield* client.registerAgent({
          manifest: { name: identity.did.slice(9), meshProtocolVersion: "1.0", capabilities: ["sim"] },
          endpointUrl,
          identity,
          apiKey: key.apiKey
        })
      })
    yield* register(runner, "http://saga-runner.sim")
    yield* register(buyer, "http://buyer.sim")
    yield* register(chatter, "http://chatter.sim")
    for (const [name, identity] of agents) yield* register(identity, originOf(name))
    const hubClients = new Map<string, MeshClient.MeshClientApi>()
    for (const name of names) hubClients.set(name, yield* MeshClient.make({ hubUrl: HUB, retry: { times: 0 } }).pipe(Effect.provideService(HttpClient.HttpClient, routed)))
    // Closing the hub closes its connections, the last of which writes the WAL back into the file.
    yield* Scope.close(hub.scope, Exit.void)
    current.world = undefined
    writeFileSync(files.database, readFileSync(files.preparing))
    const { db, reset } = databaseReset(files.database)
    files.connections.push(db)
    return { ...preparing, database: files.database, resetDatabase: reset, hubClients } satisfies Prepared
  })

/**
 * Starts, outside any run, each resident the last run did not leave at rest (or the preparation has not started
 * yet): the hub first, then the agents, over the snapshot's database.
 */
const startResidents = (prepared: Prepared) =>
  Effect.gen(function* () {
    prepared.resetDatabase()
    if (!prepared.residents.has("hub")) prepared.residents.set("hub", yield* startHub(prepared))
    for (const name of prepared.agents.keys()) if (!prepared.residents.has(name)) prepared.residents.set(name, yield* startAgent(prepared, name))
  })

/**
 * True when `process` is at rest on the run's network: no request to it unanswered and, for the hub, no workflow
 * running or waiting on the clock. Such a process holds nothing of the run but what the next run replaces (its
 * stores, journal and network are the run's, its rate limits the section's, its database reset), so it may serve
 * the next run; the agents' streamed runs and A2A tasks, which the workload never starts, are empty.
 */
const atRest = (network: Network.NetworkApi, process: Process<unknown>) =>
  Effect.map(network.inFlightAt(process.handler), (n) => n === 0 && process.fibers.size === 0)

/** The mesh started from what was prepared: the residents on the run's network, the model session; nothing faulted yet. */
const setup = (spec: MeshSpec, prepared: Prepared, providerErrors: ReadonlyMap<number, ModelErrorCode>, network: Network.NetworkApi) =>
  Effect.gen(function* () {
    const http = Network.client(network)
    const { buyer, chatter, runner } = prepared
    const agents = new Map<string, RunAgent>()
    const effects: Effects = new Map()
    for (const a of spec.agents) {
      const stores = yield* Layer.build(
        Layer.mergeAll(
          TaskStore.layerMemory,
          a.flaws?.includes("ignores-nonces") === true ? Layer.succeed(NonceStore.NonceStore, ignoringNonces) : NonceStore.layerMemory(),
          a.flaws?.includes("forgets-replies") === true ? Layer.succeed(IdempotencyStore.IdempotencyStore, forgettingReplies) : IdempotencyStore.layerMemory(),
          // Caller keys come from the hub over the network, as an agent elsewhere would get them.
          Layer.succeed(KeyResolver, cachedKeys(prepared.hubClients.get(a.name)!))
        )
      )
      agents.set(a.name, { spec: a, identity: prepared.agents.get(a.name)!, stores, handler: handlerOf(a, effects) })
    }
    prepared.resetDatabase()
    const world: World = { network, http, runner, buyer, chatter, agents, effects, approvals: new Map(), journal: JournalEngine.makeJournal() }
    prepared.current.world = world
    const processes = new Map<string, Process<unknown>>()
    for (const [name, p] of prepared.residents) {
      yield* network.register(name === "hub" ? HUB : originOf(name), p.handler)
      processes.set(name, p)
    }
    const script = (_: unknown, index: number): ScriptStep => {
      const code = providerErrors.get(index)
      return code === undefined
        ? { text: `answer ${index}`, inputTokens: 40, outputTokens: 60 }
        : new ModelError({ code, message: `simulated ${code} on call ${index}` })
    }
    const mandate = yield* issueModelBudgetMandate({
      grantorDid: buyer.did,
      granteeDid: chatter.did,
      privateKey: buyer.privateKey,
      constraints: { token_budget: spec.modelBudget.tokens, cost_budget_usd: spec.modelBudget.usd, quality_threshold: 0.5, task_type: "REASONING", expected_steps: 4 }
    })
    const session = yield* ModelSession.make({ mandate, privateKey: chatter.privateKey }).pipe(
      Effect.provide(ModelRouter.layerTest({ catalogue: CATALOGUE, script, scores: [0.9], random: Random.make(7) }))
    )
    return { world, processes, session }
  })

/** How often a saga action looks whether its saga has ended. */
const SAGA_POLL = Duration.millis(100)

/** How many failed reads of its saga a saga action takes (a hub restarting) before it reports the saga unreadable. */
const SAGA_UNREADABLE = 50

/** Two models on one scripted provider: a cheap one and a dear one. */
const CATALOGUE = fromSpecs([
  { id: "small", provider: "a", tier: 1, inputMicrosPerMTok: 1_000_000, outputMicrosPerMTok: 2_000_000, contextWindow: 8192, maxOutputTokens: 256 },
  { id: "large", provider: "a", tier: 2, inputMicrosPerMTok: 20_000_000, outputMicrosPerMTok: 40_000_000, contextWindow: 8192, maxOutputTokens: 256 }
])

const micros = (usd: number): number => Math.round(usd * 1_000_000)

/** The network plan of a schedule: its faults by request number. */
const netPlan = (schedule: Schedule): ReadonlyMap<number, ReadonlyArray<Network.Fault>> => {
  const plan = new Map<number, Array<Network.Fault>>()
  for (const e of schedule) if (e._tag === "Net") plan.set(e.request, [...(plan.get(e.request) ?? []), e.fault])
  return plan
}

/** Runs the mesh's workload under `schedule` and checks the invariants after each action; runs as a section (`simulated`). */
const runIn = (spec: MeshSpec, schedule: Schedule, prepared: Prepared, driver: Driver) =>
  Effect.gen(function* () {
    const providerErrors = new Map<number, ModelErrorCode>()
    for (const e of schedule) if (e._tag === "ProviderError") providerErrors.set(e.call, e.code)
    const network = yield* Network.make
    // Whatever happens, the residents are left to the next run only at rest, and see no run until it starts.
    yield* Effect.addFinalizer(() => Effect.sync(() => void (prepared.current.world = undefined)))
    const ready = yield* drive(setup(spec, prepared, providerErrors, network), driver)
    if (ready === "stuck" || Exit.isFailure(ready)) {
      return yield* Effect.dieMessage(`the mesh did not start: ${ready === "stuck" ? "stuck" : String(Cause.pretty(ready.cause))}`)
    }
    const { processes, session, world } = ready.value
    // The hub's and agents' scopes are their own (a crash closes one alone). A process the run leaves at rest is the
    // next run's resident; one still at work (a request unanswered, a saga running: the run ended on a violation) is
    // stopped here, as a process killed with the run, and the next run starts another.
    yield* Effect.addFinalizer(() =>
      Effect.forEach(new Set([...prepared.residents.keys(), ...processes.keys()]), (name) => {
        const p = processes.get(name)
        if (p === undefined) return Effect.sync(() => void prepared.residents.delete(name))
        return Effect.flatMap(atRest(network, p), (rest) => {
          if (rest) return Effect.sync(() => void prepared.residents.set(name, p))
          prepared.residents.delete(name)
          return Scope.close(p.scope, Exit.void)
        })
      }, { discard: true })
    )
    const actions: Array<string> = []
    let violation: Violation | undefined = undefined

    const hubContext = () => (processes.get("hub") as HubProcess).value.context

    // One crash at a time: a crash triggered while another restarts the same process waits for it to be up.
    const restarting = yield* Effect.makeSemaphore(1)
    const restart = (target: string) =>
      restarting.withPermits(1)(Effect.gen(function* () {
        const p = processes.get(target)
        if (p === undefined) return
        yield* world.network.unregister(target === "hub" ? HUB : originOf(target))
        // Out of the run's processes until its successor is up: a process that cannot start again is no resident.
        processes.delete(target)
        yield* Scope.close(p.scope, Exit.void)
        if (target === "hub") {
          const hub = yield* startHub(prepared)
          yield* serveHub(prepared, hub, world.network)
          processes.set(target, hub)
        } else {
          const agent = yield* startAgent(prepared, target)
          yield* world.network.register(originOf(target), agent.handler)
          processes.set(target, agent)
        }
      }))

    // A crash in the middle of an action runs in a fiber of the run's, not of the process it kills (whose scope it
    // closes); the request that set it off waits for the restart, or is interrupted with its sender.
    const runScope = yield* Effect.scope
    const keys = yield* Keys
    const crashes: Array<Fiber.RuntimeFiber<void>> = []
    const crashLog: Array<string> = []
    const crashDuring = (target: string, request: number): Effect.Effect<void> =>
      Effect.flatMap(
        Effect.forkIn(
          Effect.zipRight(
            Effect.sync(() => void crashLog.push(`${target} crashed on request ${request} with ${JournalEngine.inFlight(world.journal).length} saga(s) in flight`)),
            Effect.orDie(restart(target)).pipe(Effect.provideService(Keys, keys))
          ),
          runScope
        ),
        (fiber) => Effect.zipRight(Effect.sync(() => void crashes.push(fiber)), Fiber.join(fiber))
      )
    const triggers = new Map<number, Effect.Effect<void>>()
    for (const e of schedule) if (e._tag === "CrashDuring" && processes.has(e.target)) triggers.set(e.request, crashDuring(e.target, e.request))
    yield* world.network.reset(netPlan(schedule), triggers)
    /** Waits for the crashes an action set off to have restarted their process. */
    const restarted = Effect.suspend(() => Effect.forEach(crashes.splice(0), Fiber.await, { discard: true }))

    const perform = (action: Action, index: number): Effect.Effect<string, never, Keys> => {
      switch (action._tag) {
        case "Saga":
          return Effect.gen(function* () {
            const mandate = yield* Effect.orDie(
              issueIntentMandate({ grantorDid: world.buyer.did, granteeDid: world.runner.did, constraints: { spendLimitUsd: action.spendLimitUsd }, privateKey: world.buyer.privateKey, ttlSeconds: 3600 })
            )
            const steps = action.steps.map((s, i) => ({
              name: `s${i}-${s.capability}`,
              agentDid: world.agents.get(s.agent)!.identity.did,
              capability: s.capability,
              params: { costUsd: s.costUsd },
              budgetUsd: s.budgetUsd,
              compensation: { capability: `undo-${s.capability}` }
            }))
            const submitted = yield* Effect.exit(Context.get(hubContext(), SagaScheduler.SagaScheduler).submit(world.buyer.did, { mandate: mandate.token, steps }))
            if (Exit.isFailure(submitted)) {
              const failure = Cause.failureOption(submitted.cause)
              return Option.isSome(failure) ? `saga refused ${failure.value.code}` : "saga submission died"
            }
            // Polled rather than `scheduler.await`: its wait on the store's news sometimes misses the final event and
            // falls back to its one-second look, which would make the time a run takes depend on fiber order. Read
            // from whichever hub runs now: one that crashed mid-saga is asked again once its successor is up.
            for (let unreadable = 0; ; ) {
              const r = yield* Effect.exit(Context.get(hubContext(), SagaScheduler.SagaScheduler).get(submitted.value.sagaId))
              if (Exit.isSuccess(r) && r.value.status !== "running") return `saga ${r.value.status}`
              if (Exit.isFailure(r) && ++unreadable > SAGA_UNREADABLE) return "saga unreadable"
              yield* Effect.sleep(SAGA_POLL)
            }
          })
        case "Call":
          return Effect.gen(function* () {
            const client = yield* AgentClient.make().pipe(Effect.provideService(HttpClient.HttpClient, world.http))
            const reply = yield* Effect.either(
              client.call(originOf(action.agent), action.capability, {
                signAs: { did: world.buyer.did, privateKey: world.buyer.privateKey },
                capability: action.capability,
                context: { callId: String(index) }
              })
            )
            return reply._tag === "Left" ? `call failed ${reply.left.code}` : `call answered`
          })
        case "Gated":
          return Effect.gen(function* () {
            const agent = world.agents.get(action.agent)!
            const gateId = String(index)
            const mandate = yield* Effect.orDie(
              issueTaskMandate({
                grantorDid: world.buyer.did,
                granteeDid: agent.identity.did,
                privateKey: world.buyer.privateKey,
                constraints: { allowed: [action.capability], humanGates: [action.capability], maxDelegationDepth: 0 },
                ttlSeconds: 3600
              })
            )
            const client = yield* AgentClient.make().pipe(Effect.provideService(HttpClient.HttpClient, world.http))
            const signAs = { did: world.buyer.did, privateKey: world.buyer.privateKey }
            const reply = yield* Effect.either(
              client.call(originOf(action.agent), action.capability, { signAs, capability: action.capability, mandate: mandate.token, context: { gateId } })
            )
            if (reply._tag === "Left") return `gated call failed ${reply.left.code}`
            if (!("approvalRequired" in reply.right)) return "gated call answered without a pause"
            if (action.approval === "withheld") return "gated call paused, approval withheld"
            const { taskId } = reply.right.approvalRequired
            const signer = action.approval === "forged" ? world.chatter : world.buyer
            const approval = yield* Effect.orDie(
              signApproval({ taskId, capability: action.capability, decision: action.approval === "deny" ? "deny" : "approve" }, signer.did, signer.privateKey)
            )
            // Counted before it is sent: a resume the network loses may still have reached the agent.
            if (action.approval === "approve") world.approvals.set(gateId, (world.approvals.get(gateId) ?? 0) + 1)
            const resumed = yield* Effect.either(client.resume(originOf(action.agent), taskId, approval, { signAs }))
            if (resumed._tag === "Left") return `gated call ${action.approval}, resume failed ${resumed.left.code}`
            return `gated call ${action.approval}, resume ${"approvalRequired" in resumed.right ? "paused again" : "answered"}`
          })
        case "Chat":
          return Effect.map(Effect.either(session.chat(action.prompt)), (r) => (r._tag === "Left" ? `chat failed ${r.left.code}` : `chat answered by ${r.right.modelId}`))
      }
    }

    const settled = new Set<string>()
    const check = (index: number) =>
      Effect.gen(function* () {
        const fail = (invariant: Invariant, message: string): Violation => ({ invariant, action: index, message })
        for (const [key, n] of world.effects) {
          if (key.startsWith("gate:")) {
            const approved = world.approvals.get(key.slice(5, key.indexOf("|"))) ?? 0
            if (n > approved) return fail("gate", `a gated capability ran ${n} time(s) with ${approved} approval(s) (${key})`)
            continue
          }
          if (n <= 1) continue
          return key.startsWith("call:")
            ? fail("replay", `a signed request ran its handler ${n} times (${key})`)
            : fail("saga", `a saga step's work ran ${n} times (${key})`)
        }
        // Every saga the hub was given, from the engine's journal: one submitted just before a crash counts too.
        const scheduler = Context.get(hubContext(), SagaScheduler.SagaScheduler)
        const store = Context.get(hubContext(), SagaStore.SagaStore)
        const ledger = Context.get(hubContext(), Ledger)
        // A saga found ended and its pool balanced stays so (nothing moves an ended saga or its pool): not read again.
        const sagaIds = [...world.journal.executions.values()].map((e) => (e.payload as { readonly sagaId: string }).sagaId).filter((id) => !settled.has(id))
        const running = yield* Effect.either(store.running(world.buyer.did))
        if (running._tag === "Left") return fail("saga", `the saga store cannot be read: ${running.left.message}`)
        if (running.right.total > 0) return fail("saga", `${running.right.total} saga(s) still running after the action`)
        const pools = new Map<string, Array<SagaResult>>()
        for (const sagaId of sagaIds) {
          const r = yield* Effect.either(scheduler.get(sagaId))
          if (r._tag === "Left") return fail("saga", `saga ${sagaId} cannot be read: ${r.left.code}`)
          const saga = r.right
          if (saga.status === "running") return fail("saga", `saga ${sagaId} did not end`)
          pools.set(saga.poolId, [...(pools.get(saga.poolId) ?? []), saga])
          // Each step's work exactly once if it committed (and its undo once if it was compensated), at most once otherwise.
          for (const step of saga.steps) {
            const ran = world.effects.get(`${sagaId}:${step.name}|${step.capability}`) ?? 0
            const undone = world.effects.get(`${sagaId}:${step.name}|undo-${step.capability}`) ?? 0
            const expected = step.status === "committed" || step.status === "compensated" ? 1 : undefined
            if (expected !== undefined ? ran !== expected : ran > 1) return fail("saga", `step ${sagaId}:${step.name} (${step.status}) ran its work ${ran} times`)
            if (step.status === "compensated" ? undone !== 1 : undone > 1) return fail("saga", `step ${sagaId}:${step.name} (${step.status}) ran its compensation ${undone} times`)
          }
        }
        for (const [poolId, sagasOfPool] of pools) {
          const trail = yield* Effect.either(ledger.allocations(world.runner.did, poolId))
          if (trail._tag === "Left") return fail("ledger", `pool ${poolId} cannot be read: ${trail.left.code}`)
          const { allocations, pool } = trail.right
          let held = 0
          const perStep = new Map<string, number>()
          for (const a of allocations) {
            if (a.usedUsd !== null && micros(a.usedUsd) > micros(a.amountUsd)) return fail("ledger", `allocation ${a.allocationId} used ${a.usedUsd} of ${a.amountUsd}`)
            // Every saga of the pool has ended: nothing may still be held.
            if (a.status === "active") return fail("ledger", `allocation ${a.allocationId} of an ended saga is still active`)
            held += micros(a.usedUsd ?? 0)
            perStep.set(a.idempotencyKey, (perStep.get(a.idempotencyKey) ?? 0) + 1)
          }
          if (held > micros(pool.limitUsd)) return fail("ledger", `pool ${poolId} holds ${held / 1e6} USD of a ${pool.limitUsd} USD limit`)
          if (micros(pool.allocatedUsd) !== held) return fail("ledger", `pool ${poolId} reports ${pool.allocatedUsd} USD allocated, its allocations hold ${held / 1e6}`)
          if (micros(pool.remainingUsd) < 0) return fail("ledger", `pool ${poolId} has ${pool.remainingUsd} USD left`)
          // Balanced to the micro-dollar: what the pool gave out is what the sagas' steps report they used, and the rest is left.
          if (micros(pool.allocatedUsd) + micros(pool.remainingUsd) !== micros(pool.limitUsd)) {
            return fail("ledger", `pool ${poolId}: ${pool.allocatedUsd} allocated and ${pool.remainingUsd} left of ${pool.limitUsd} USD`)
          }
          const reported = sagasOfPool.reduce((sum, saga) => sum + saga.steps.reduce((n, step) => n + (step.usedUsd === null ? 0 : micros(Number(step.usedUsd))), 0), 0)
          if (reported !== held) return fail("ledger", `pool ${poolId} released ${held / 1e6} USD, its sagas' steps report ${reported / 1e6}`)
          for (const [key, n] of perStep) if (n > 1) return fail("saga", `step ${key} was charged ${n} allocations`)
          for (const saga of sagasOfPool) settled.add(saga.sagaId)
        }
        const summary = yield* session.summary
        if (summary.totalTokens > spec.modelBudget.tokens) return fail("model-budget", `the session used ${summary.totalTokens} of ${spec.modelBudget.tokens} tokens`)
        if (micros(summary.totalCostUsd) > micros(spec.modelBudget.usd)) return fail("model-budget", `the session spent ${summary.totalCostUsd} of ${spec.modelBudget.usd} USD`)
        return undefined
      })

    for (const [index, action] of spec.workload.entries()) {
      for (const e of schedule) {
        // The jump is a sleep of the driver's: the clock moves through every wake-up on the way, each in its turn.
        if (e._tag === "ClockJump" && e.before === index) yield* drive(Effect.sleep(Duration.millis(e.millis)), driver)
        if (e._tag === "Crash" && e.before === index) {
          const restarted = yield* drive(restart(e.target), driver)
          if (restarted === "stuck" || Exit.isFailure(restarted)) {
            violation = { invariant: "progress", action: index, message: `${e.target} did not restart` }
            break
          }
        }
      }
      if (violation !== undefined) break
      const outcome = yield* drive(perform(action, index), driver)
      if (outcome === "stuck") {
        actions.push(`${index} ${action._tag}: stuck`)
        violation = { invariant: "progress", action: index, message: `action ${index} (${action._tag}) never ended` }
        break
      }
      const up = yield* drive(restarted, driver)
      if (up === "stuck") {
        violation = { invariant: "progress", action: index, message: "a process that crashed during the action did not restart" }
        break
      }
      actions.push(`${index} ${action._tag}: ${Exit.isSuccess(outcome) ? outcome.value : "died"}`)
      const checked = yield* drive(check(index), driver)
      violation = checked === "stuck" ? { invariant: "progress", action: index, message: "the invariants could not be read" } : Exit.isSuccess(checked) ? checked.value : undefined
      if (violation !== undefined) break
    }
    const trace = yield* world.network.trace
    const digest = createHash("sha256").update(JSON.stringify({ actions, trace, crashes: crashLog, violation })).digest("hex")
    return { actions, network: trace, crashes: crashLog, violation, digest } satisfies Report
  })

/**
 * Where the mesh's SQLite files live: in memory (`/dev/shm`) where the platform has it, since the hub writes its
 * database on every saga step and every reset rewrites it, and a disk's syncs would cost more than the run.
 */
const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

let databases = 0

/** The files of one prepared mesh: the preparation's (removed once prepared) and the mesh's database. */
interface MeshFiles {
  readonly preparing: string
  readonly database: string
  /** Connections the simulation itself holds on them (the reset's), closed when the process exits. */
  readonly connections: Array<BetterSqlite3.Database>
}

const removeDatabase = (database: string) => {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(database + suffix, { force: true })
}

/**
 * Removes the files of simulations whose process is gone: each process removes its own as it exits, but one killed
 * (a test worker stopped by its pool, an exploration interrupted) cannot.
 */
const removeStale = () => {
  for (const name of readdirSync(scratch)) {
    const pid = Number(/^agent-mesh-sim-(\d+)-/.exec(name)?.[1])
    if (!Number.isSafeInteger(pid) || pid === process.pid || isAlive(pid)) continue
    rmSync(join(scratch, name), { force: true })
  }
}

/** Whether a process with this id runs (one of another user's counts as running). */
const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

/** Every prepared mesh's files, removed when the process exits: the mesh's database serves all its runs. */
const meshFiles: Array<MeshFiles> = []

const filesFor = (): MeshFiles => {
  const base = join(scratch, `agent-mesh-sim-${process.pid}-${databases++}`)
  const files: MeshFiles = { preparing: `${base}-preparing.db`, database: `${base}.db`, connections: [] }
  if (meshFiles.length === 0) {
    removeStale()
    process.once("exit", () => {
      for (const f of meshFiles) {
        for (const c of f.connections) c.close()
        for (const d of [f.preparing, f.database]) removeDatabase(d)
      }
    })
  }
  meshFiles.push(files)
  return files
}

/**
 * Effect hashes objects with no hash of their own by a number from `Math.random` (`Hash.random`), and some of its
 * structures iterate in hash order: which waiting fiber a semaphore or a hub wakes first can differ from run to run.
 * For the run, `Math.random` is a seeded generator, restored afterwards. Runs in one process do not overlap
 * (`alone`), so no other code sees it.
 */
/* eslint-disable no-restricted-properties -- Math.random is replaced and restored here, never read for secrets or ids */
const withSeededMathRandom = (seed: number) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const original = Math.random
      const rng = new PCGRandom(seed)
      Math.random = () => rng.number()
      return original
    }),
    () => effect,
    (original) => Effect.sync(() => void (Math.random = original))
  )
/* eslint-enable no-restricted-properties */

let running = false

/**
 * Runs `effect` as the process's only simulation run, or dies: a run replaces process-wide globals (`Math.random`,
 * `crypto.subtle.digest`), and two overlapping runs would restore each other's replacements and share one generator.
 */
const alone = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.suspend(() =>
      running
        ? Effect.dieMessage("a simulation run is already in progress in this process: run them one after another, or in separate processes")
        : Effect.sync(() => void (running = true))
    ),
    () => effect,
    () => Effect.sync(() => void (running = false))
  )

/** The seed of Effect's `Random` in every run: what varies between runs is the schedule. */
const RANDOM_SEED = 0x5eed

/** The seed of the preparation: another than the runs', so no id or nonce of a run repeats one in the prepared database. */
const PREPARE_SEED = 0x9e9a

/** The seed of starting the residents: the same for each start, so every resident is made alike. */
const RESIDENT_SEED = 0x7e5d

/** Runs `effect` the simulation's way: on `driver`'s clock, on microtasks, with every source of randomness seeded by `seed`. */
const simulated = (driver: Driver, seed: number) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, SimulationServices>> =>
  effect.pipe(
    (e) => withTrackedDigest(driver.outside, e),
    withSeededMathRandom(seed),
    inSimulation,
    // The clock, the randomness and the caches the section's fibers reach, the residents' among them.
    withSection({ clock: driver.clock, random: Random.make(seed), entropy: Entropy.seeded(seed), limiters: new Map() })
  )

/** What was prepared, by the agents' names (flaws and handlers do not change it). */
const preparedMeshes = new Map<string, Prepared>()

/** Runs `effect` to its end in a section of its own (a clock at 0, randomness from `seed`), or dies saying what failed. */
const driven = <A, E>(what: string, seed: number, effect: Effect.Effect<A, E, SimulationServices | Scope.Scope>) =>
  Effect.suspend(() => {
    const driver: Driver = { clock: SimClock.make(), outside: { pending: new Set() } }
    return drive(Effect.scoped(effect), driver).pipe(
      simulated(driver, seed),
      Effect.flatMap((exit) =>
        exit === "stuck" || Exit.isFailure(exit)
          ? Effect.dieMessage(`${what}: ${exit === "stuck" ? "stuck" : String(Cause.pretty(exit.cause))}`)
          : Effect.succeed(exit.value)
      )
    )
  })

/**
 * The preparation for `spec`'s agents (made on the first run of a mesh with these agents, on a clock of its own), with
 * its residents up: any the last run did not leave at rest are started again, in a section of their own, so what a
 * run starts from does not depend on the runs before it.
 */
const preparedFor = (spec: MeshSpec): Effect.Effect<Prepared> =>
  Effect.suspend(() => {
    const names = spec.agents.map((a) => a.name)
    const key = JSON.stringify(names)
    const hit = preparedMeshes.get(key)
    const made = hit !== undefined
      ? Effect.succeed(hit)
      : Effect.suspend(() => {
        const files = filesFor()
        return driven("the mesh could not be prepared", PREPARE_SEED, prepare(names, files)).pipe(
          Effect.tap((p) => Effect.sync(() => void preparedMeshes.set(key, p))),
          Effect.ensuring(Effect.sync(() => removeDatabase(files.preparing)))
        )
      })
    return Effect.tap(made, (prepared) =>
      prepared.residents.size === prepared.agents.size + 1 ? Effect.void : driven("the mesh could not start", RESIDENT_SEED, startResidents(prepared)))
  })

/**
 * Runs `spec` under `schedule` on a mesh of its own (a clock, the prepared database, its stores, network and journal)
 * and reports what happened; the same spec and schedule give the same report.
 */
export const run = (spec: MeshSpec, schedule: Schedule): Effect.Effect<Report> =>
  // Made afresh each time the effect runs: a clock, a generator or a store shared by two runs would tie them together.
  Effect.suspend(() => {
    const driver: Driver = { clock: SimClock.make(), outside: { pending: new Set() } }
    return Effect.flatMap(preparedFor(spec), (prepared) => Effect.scoped(runIn(spec, schedule, prepared, driver)).pipe(simulated(driver, RANDOM_SEED))).pipe(alone)
  })

/** Runs `spec` under the schedule of `seed`. */
export const runSeed = (spec: MeshSpec, seed: number, bounds?: ScheduleBounds): Effect.Effect<Report> => run(spec, scheduleOf(seed, spec, bounds))

/** `spec` with `flaws` planted in agent `agent`: for showing that a run finds them. */
export const withFlaws = (spec: MeshSpec, agent: string, flaws: ReadonlyArray<Flaw>): MeshSpec => ({
  ...spec,
  agents: spec.agents.map((a) => (a.name === agent ? { ...a, flaws } : a))
})

/** What shrinking found: the shortest schedule it reached that still fails, its report, and how many runs it took. */
export interface Shrunk {
  readonly schedule: Schedule
  readonly report: Report
  readonly runs: number
}

/**
 * Shrinks a failing schedule: drops events one at a time while the run still breaks the same invariant, until no
 * single event can go (every event left is needed for the failure). Runs are deterministic, so the result replays.
 */
export const shrink = (spec: MeshSpec, schedule: Schedule, failing: Report): Effect.Effect<Shrunk> =>
  Effect.gen(function* () {
    const invariant = failing.violation?.invariant
    let current = schedule
    let report = failing
    let runs = 0
    for (let i = 0; i < current.length;) {
      const candidate = [...current.slice(0, i), ...current.slice(i + 1)]
      const r = yield* run(spec, candidate)
      runs++
      if (r.violation !== undefined && r.violation.invariant === invariant) {
        current = candidate
        report = r
      } else {
        i++
      }
    }
    return { schedule: current, report, runs }
  })
