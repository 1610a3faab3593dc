/**
 * A workflow engine for the simulation whose journal outlives the process that runs the workflows, as the durable
 * SQL engine's tables outlive a hub: which executions were started (and with what payload), which activities
 * finished (and with what exit), which executions ended. The journal is the world's; each process builds its own
 * engine over it (`layer`), and a crash (its scope closed) takes only the running fibers with it. The next process
 * registers the workflow again and `resumeAll` restarts every execution that has not ended: journalled activities
 * answer their recorded exit, the one in flight when the process died runs again. A process that lives through several
 * runs reads the journal of the run in progress, and says whether any of its workflows still runs (`Fibers`), so
 * that one left busy at the end of a run is not carried into the next.
 *
 * Kept in memory rather than on the run's SQLite file: what the simulation checks is the saga's code across a crash
 * (each step's work once, every saga ending), and an in-memory journal keeps a run a few milliseconds long.
 *
 * Floor: sim (docs/architecture.md §3).
 */
import type * as Activity from "@effect/workflow/Activity"
import type { DurableClock } from "@effect/workflow/DurableClock"
import type * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"

/** One execution as the journal keeps it. */
interface Execution {
  readonly workflowName: string
  readonly payload: object
  readonly parent: string | undefined
  /** Set once the execution ended (its result is final): never run again. */
  result: Workflow.Result<unknown, unknown> | undefined
  /** Asked to interrupt: the next run sees it and runs its compensations. */
  interrupted: boolean
}

/** What outlives a crash: executions, finished activities, resolved deferreds, clock deadlines. */
export interface Journal {
  readonly executions: Map<string, Execution>
  /** `${executionId}/${activity}/${attempt}` → the activity's exit, encoded; only finished ones. */
  readonly activities: Map<string, Workflow.Result<unknown, unknown>>
  /** `${executionId}/${deferred}` → its exit, encoded. */
  readonly deferreds: Map<string, Exit.Exit<unknown, unknown>>
  /** `${executionId}/${clock}` → when it rings (ms on the run's clock). */
  readonly clocks: Map<string, number>
}

/** An empty journal. */
export const makeJournal = (): Journal => ({ executions: new Map(), activities: new Map(), deferreds: new Map(), clocks: new Map() })

/** Empties `journal`, for a new run. */
export const clear = (journal: Journal): void => {
  journal.executions.clear()
  journal.activities.clear()
  journal.deferreds.clear()
  journal.clocks.clear()
}

/** Executions started and not ended. */
export const inFlight = (journal: Journal): ReadonlyArray<string> =>
  [...journal.executions].filter(([, e]) => e.result === undefined).map(([id]) => id)

type Execute = (payload: object, executionId: string) => Effect.Effect<unknown, unknown, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>

/** The fibers an engine forked into its process, each until it ends: none left means no workflow of it runs or waits on the clock. */
export type Fibers = Set<Fiber.RuntimeFiber<unknown, unknown>>

/** Counts `fiber` in `fibers` until it ends. */
const tracked = <A, E>(fibers: Fibers, fiber: Fiber.RuntimeFiber<A, E>): Fiber.RuntimeFiber<A, E> => {
  fibers.add(fiber)
  fiber.addObserver(() => void fibers.delete(fiber))
  return fiber
}

/**
 * An engine over the journal `journalOf` answers (the run's) for one process: its workflow fibers live in the scope
 * the workflow was registered in (the process's), so closing that scope is the crash; while they run, they are in
 * `fibers`.
 */
export const layer = (journalOf: () => Journal, fibers: Fibers = new Set()): Layer.Layer<WorkflowEngine.WorkflowEngine> =>
  Layer.sync(WorkflowEngine.WorkflowEngine, () => {
    const registered = new Map<string, { readonly workflow: Workflow.Any; readonly execute: Execute; readonly scope: Scope.Scope }>()
    // This process's runs, a fiber per execution of the journal: a caller waiting on a result joins it. Kept per
    // journal, so the runs of a journal read before (an earlier run's, whose ids may repeat) go with it.
    const runs = new WeakMap<Journal, Map<string, Fiber.RuntimeFiber<Workflow.Result<unknown, unknown>, never>>>()
    const runningOf = () => {
      const journal = journalOf()
      let running = runs.get(journal)
      if (running === undefined) {
        running = new Map()
        runs.set(journal, running)
      }
      return running
    }

    const start = (executionId: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const execution = journalOf().executions.get(executionId)
        if (execution === undefined || execution.result !== undefined) return Effect.void
        const running = runningOf()
        const current = running.get(executionId)
        if (current !== undefined && current.unsafePoll() === null) return Effect.void
        const entry = registered.get(execution.workflowName)
        // Not registered in this process yet: `resumeAll` starts it once it is.
        if (entry === undefined) return Effect.void
        const instance = WorkflowEngine.WorkflowInstance.initial(entry.workflow, executionId)
        instance.interrupted = execution.interrupted
        return entry.execute(execution.payload, executionId).pipe(
          Workflow.intoResult,
          Effect.tap((result) =>
            Effect.suspend(() => {
              if (result._tag !== "Complete") return Effect.void
              execution.result = result
              return execution.parent === undefined ? Effect.void : start(execution.parent)
            })
          ),
          // An interruption (the process stopping) leaves the execution in flight, for the next process.
          Effect.catchAllCause(() => Effect.never),
          Effect.provideService(WorkflowEngine.WorkflowInstance, instance),
          Effect.provideService(WorkflowEngine.WorkflowEngine, engine),
          Effect.forkIn(entry.scope),
          Effect.map((fiber) => void running.set(executionId, tracked(fibers, fiber)))
        )
      })

    const resultOf = (executionId: string): Effect.Effect<Workflow.Result<unknown, unknown>> =>
      Effect.suspend(() => {
        const execution = journalOf().executions.get(executionId)
        if (execution?.result !== undefined) return Effect.succeed(execution.result)
        const fiber = runningOf().get(executionId)
        return fiber === undefined ? Effect.dieMessage(`workflow execution ${executionId} is not running`) : Fiber.join(fiber)
      })

    const engine: WorkflowEngine.WorkflowEngine["Type"] = WorkflowEngine.makeUnsafe({
      register: (workflow, execute) =>
        Effect.flatMap(Effect.scope, (scope) => Effect.sync(() => void registered.set(workflow.name, { workflow, execute, scope }))),
      execute: (workflow, options) =>
        Effect.gen(function* () {
          if (!journalOf().executions.has(options.executionId)) {
            journalOf().executions.set(options.executionId, { workflowName: workflow.name, payload: options.payload, parent: options.parent?.executionId, result: undefined, interrupted: false })
          }
          yield* start(options.executionId)
          if (options.discard) return undefined
          return yield* resultOf(options.executionId)
        }) as never,
      poll: (_workflow, executionId) => Effect.sync(() => journalOf().executions.get(executionId)?.result),
      interrupt: (_workflow, executionId) =>
        Effect.suspend(() => {
          const execution = journalOf().executions.get(executionId)
          if (execution === undefined || execution.result !== undefined) return Effect.void
          execution.interrupted = true
          const running = runningOf()
          const fiber = running.get(executionId)
          running.delete(executionId)
          return Effect.zipRight(fiber === undefined ? Effect.void : Fiber.interrupt(fiber), start(executionId))
        }),
      resume: (_workflow, executionId) => start(executionId),
      activityExecute: (activity: Activity.Any, attempt: number) =>
        Effect.gen(function* () {
          const parent = yield* WorkflowEngine.WorkflowInstance
          const key = `${parent.executionId}/${activity.name}/${attempt}`
          const done = journalOf().activities.get(key)
          if (done !== undefined) return done
          const instance = WorkflowEngine.WorkflowInstance.initial(parent.workflow, parent.executionId)
          instance.interrupted = parent.interrupted
          const result = yield* activity.executeEncoded.pipe(Workflow.intoResult, Effect.provideService(WorkflowEngine.WorkflowInstance, instance))
          // Only a finished activity is journalled; one interrupted by a crash fails above and runs again on resume.
          if (result._tag === "Complete") journalOf().activities.set(key, result)
          return result
        }),
      deferredResult: (deferred: DurableDeferred.Any) =>
        Effect.map(WorkflowEngine.WorkflowInstance, (instance) => journalOf().deferreds.get(`${instance.executionId}/${deferred.name}`)),
      deferredDone: (options) =>
        Effect.suspend(() => {
          const key = `${options.executionId}/${options.deferredName}`
          if (journalOf().deferreds.has(key)) return Effect.void
          journalOf().deferreds.set(key, options.exit)
          return start(options.executionId)
        }),
      scheduleClock: (workflow, options: { readonly executionId: string; readonly clock: DurableClock }) =>
        Effect.gen(function* () {
          const key = `${options.executionId}/${options.clock.name}`
          const now = yield* Clock.currentTimeMillis
          const at = journalOf().clocks.get(key) ?? now + Duration.toMillis(options.clock.duration)
          journalOf().clocks.set(key, at)
          const entry = registered.get(workflow.name)
          if (entry === undefined) return
          yield* engine.deferredDone(options.clock.deferred, {
            workflowName: workflow.name,
            executionId: options.executionId,
            deferredName: options.clock.deferred.name,
            exit: Exit.void
          }).pipe(Effect.delay(Duration.millis(Math.max(0, at - now))), Effect.forkIn(entry.scope), Effect.map((fiber) => void tracked(fibers, fiber)))
        })
    })

    return engine
  })

/** Starts, in the process whose engine is in context, every execution of `workflow` that has not ended. */
export const resumeAll = (journal: Journal, workflow: Workflow.Any): Effect.Effect<void, never, WorkflowEngine.WorkflowEngine> =>
  Effect.flatMap(WorkflowEngine.WorkflowEngine, (engine) =>
    Effect.forEach(inFlight(journal).filter((id) => journal.executions.get(id)!.workflowName === workflow.name), (id) => engine.resume(workflow, id), { discard: true })
  )
