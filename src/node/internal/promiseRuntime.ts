/**
 * What the Promise facades share: running an effect as a Promise that rejects with the effect's own typed error
 * (callers match on `code`), and one lazily made runtime with node:crypto keys.
 *
 * Floor: node (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type { Keys } from "../../core/Keys.js"
import * as KeysNative from "../KeysNative.js"

/** The value of a success; otherwise throws the typed error itself (a defect: its cause), never a FiberFailure. Runners on other runtimes (`Runtime.runPromiseExit`) settle through it too. */
export const settle = <A, E>(exit: Exit.Exit<A, E>): A => {
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  throw failure._tag === "Some" ? failure.value : Cause.squash(exit.cause)
}

/** Runs effects on `runtime`, resolving with the value and rejecting with the typed error (a defect: its cause). */
export const runOn =
  <R>(runtime: ManagedRuntime.ManagedRuntime<R, never>) =>
  <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> =>
    runtime.runPromiseExit(effect).then(settle)

/** Runs an effect that needs nothing, rejecting as `runOn` does. */
export const runPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromiseExit(effect).then(settle)

let keysRuntime: ManagedRuntime.ManagedRuntime<Keys, never> | undefined

/** Runs an effect needing `Keys` on the shared node:crypto runtime (made on first use). */
export const runWithKeys = <A, E>(effect: Effect.Effect<A, E, Keys>): Promise<A> =>
  runOn((keysRuntime ??= ManagedRuntime.make(KeysNative.layer)))(effect)

/** Releases the shared runtime; the next call makes a new one. */
export const disposeKeysRuntime = async (): Promise<void> => {
  const rt = keysRuntime
  keysRuntime = undefined
  if (rt !== undefined) await rt.dispose()
}
