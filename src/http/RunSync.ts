/**
 * Runs an effect on the calling stack, without a fiber, for as long as it is made only of steps that need none:
 * values and failures, `sync`/`suspend`, `flatMap`/`map`/`mapError`/`catchAll*`/`match*`, services read from a
 * given lookup, `Effect.context()` from a given thunk, `Either` and `Option` used as effects, and services provided
 * with this module's `provideService`. Most requests a server answers at once (a registry lookup, a
 * decoding failure) are such effects, and a fiber per request (its creation, its context and its run loop) costs
 * several times what they do (docs/architecture.md §6).
 *
 * At the first step that needs a fiber (the clock, a FiberRef, logging, `withFiberRuntime`, async work,
 * interruptibility changes, a generator) it stops and returns what is left: that step with the continuations it has
 * not run yet, rebuilt with the same combinators that made them, so a fiber running the rest does exactly what a
 * fiber running the whole would have done from there. Nothing is run twice: a step runs here or there, never both.
 *
 * It reads the primitives' documented shape in effect 3 (`_op` and `effect_instruction_i*`, as `FiberRuntime` does);
 * `test/http/RunSync.test.ts` checks it against a fiber on generated effects, so a change of that shape fails a test
 * instead of a request. A defect thrown by a step becomes `Cause.die`, as in a fiber. Failures made here (a thrown
 * defect, a `Left`) are not given a span as a fiber's are: only a fiber has a current span, and a request runs here
 * only while tracing is off (`Serve`). `Effect.fail` of an object reads the fiber for its span, so it is left to one.
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Effectable from "effect/Effectable"
import * as Exit from "effect/Exit"

/** What a service lookup answers for a key it does not hold: the step is left to a fiber. */
export const MISSING: unique symbol = Symbol.for("agent-mesh/RunSync/MISSING")

/** Services by tag key, or `MISSING`. */
export type Lookup = (key: string) => unknown

// A Context whose services map is made on first use: a handler that takes its context and reads it only sometimes
// (an agent run, for a trace header it rarely sends on) costs no copy of the services when it does not.
class LazyContext {
  private map: Map<string, unknown> | undefined
  constructor(private readonly make: () => Map<string, unknown>) {}
  get unsafeMap(): Map<string, unknown> {
    return (this.map ??= this.make())
  }
}
Object.setPrototypeOf(LazyContext.prototype, Object.getPrototypeOf(Context.empty()))

/** A `Context` over the services `make` returns, made when first read. */
export const lazyContext = (make: () => Map<string, unknown>): Context.Context<never> => new LazyContext(make) as unknown as Context.Context<never>

// `Effect.context()` is one constant effect: asked here, it is answered with the context a fiber would have had.
const CONTEXT: unknown = Effect.context<never>()

// `provideService`'s effect: a fiber commits it to `Effect.provideService`; `run` answers the service from a frame on
// its stack for as long as the inner effect runs.
class Provided extends Effectable.Class<unknown, unknown, unknown> {
  constructor(readonly effect: Effect.Effect<unknown, unknown, unknown>, readonly tag: Context.Tag<unknown, unknown>, readonly value: unknown) {
    super()
  }
  commit(): Effect.Effect<unknown, unknown, unknown> {
    return Effect.provideService(this.effect, this.tag, this.value)
  }
}

/**
 * `Effect.provideService`, which `run` can also run without a fiber (a middleware's caller, provided to the
 * handler after it): the same effect on a fiber.
 */
export const provideService = <A, E, R, I, S>(
  effect: Effect.Effect<A, E, R>,
  tag: Context.Tag<I, S>,
  value: NoInfer<S>
): Effect.Effect<A, E, Exclude<R, I>> =>
  new Provided(effect as Effect.Effect<unknown, unknown, unknown>, tag as unknown as Context.Tag<unknown, unknown>, value) as unknown as Effect.Effect<A, E, Exclude<R, I>>

// A primitive as FiberRuntime reads it.
interface Primitive {
  readonly _op: string
  readonly effect_instruction_i0?: unknown
  readonly effect_instruction_i1?: unknown
  readonly effect_instruction_i2?: unknown
  readonly commit?: () => unknown
  readonly key?: string
  readonly left?: unknown
  readonly right?: unknown
  readonly value?: unknown
}

// The end of a `provideService`: popped when its inner effect settles, it takes the service away again.
interface ProvideFrame {
  readonly _op: "Provide"
  readonly tag: Context.Tag<unknown, unknown>
  readonly value: unknown
}

type Frame = Primitive | ProvideFrame

// Past this many steps the rest goes to a fiber, whose scheduler lets other work in (as a fiber yields after 2048).
const MAX_STEPS = 1024

/** The effect that runs `cur` and then the frames still on `stack` (top last), as the combinators that made them. */
const rebuild = (cur: Effect.Effect<unknown, unknown, unknown>, stack: Array<Frame>): Effect.Effect<unknown, unknown, unknown> => {
  let effect = cur
  for (let i = stack.length - 1; i >= 0; i--) {
    const frame = stack[i]!
    if (frame._op === "Provide") {
      effect = Effect.provideService(effect, (frame as ProvideFrame).tag, (frame as ProvideFrame).value)
      continue
    }
    const f = frame as Primitive
    switch (f._op) {
      case "OnSuccess":
        effect = Effect.flatMap(effect, f.effect_instruction_i1 as (a: unknown) => Effect.Effect<unknown, unknown, unknown>)
        break
      case "OnFailure":
        effect = Effect.catchAllCause(effect, f.effect_instruction_i1 as (c: Cause.Cause<unknown>) => Effect.Effect<unknown, unknown, unknown>)
        break
      default:
        effect = Effect.matchCauseEffect(effect, {
          onFailure: f.effect_instruction_i1 as (c: Cause.Cause<unknown>) => Effect.Effect<unknown, unknown, unknown>,
          onSuccess: f.effect_instruction_i2 as (a: unknown) => Effect.Effect<unknown, unknown, unknown>
        })
    }
  }
  return effect
}

/**
 * Runs `effect` here as far as it needs no fiber: its `Exit` when it got there, otherwise the effect that does the
 * rest (to run on a fiber with the same services).
 */
export const run = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  lookup: Lookup,
  context?: () => Context.Context<never>
): Exit.Exit<A, E> | Effect.Effect<A, E, R> => {
  const stack: Array<Frame> = []
  // The services of the `provideService` frames on the stack, innermost last.
  let provides = 0
  const find = (key: string): unknown => {
    for (let i = stack.length - 1; provides > 0 && i >= 0; i--) {
      const frame = stack[i]!
      if (frame._op === "Provide" && (frame as ProvideFrame).tag.key === key) return (frame as ProvideFrame).value
    }
    return lookup(key)
  }
  // Inside a provide, the services the frames give are read now (the frames go when their effects settle) but copied
  // into the context only if it is read: a handler that takes its context and never looks costs no copy of it.
  const contextNow = (): Context.Context<never> => {
    const ctx = context!()
    if (provides === 0) return ctx
    const provided: Array<ProvideFrame> = []
    for (const frame of stack) if (frame._op === "Provide") provided.push(frame as ProvideFrame)
    return lazyContext(() => {
      const map = new Map(ctx.unsafeMap)
      for (const { tag, value } of provided) map.set(tag.key, value)
      return map
    })
  }
  let cur = effect as unknown as Primitive
  // Set when `cur` is settled: a success value, or a failure cause.
  let done: "success" | "failure" | undefined
  let value: unknown
  let cause: Cause.Cause<unknown> | undefined
  for (let steps = 0; ; steps++) {
    if (done === undefined) {
      if (steps > MAX_STEPS) return rebuild(cur as never, stack) as never
      try {
        switch (cur._op) {
          case "Success":
            done = "success"
            value = cur.effect_instruction_i0
            break
          case "Failure":
            done = "failure"
            cause = cur.effect_instruction_i0 as Cause.Cause<unknown>
            break
          case "Sync":
            value = (cur.effect_instruction_i0 as () => unknown)()
            done = "success"
            break
          case "Commit":
            if (cur instanceof Provided) {
              stack.push({ _op: "Provide", tag: cur.tag, value: cur.value })
              provides++
              cur = cur.effect as unknown as Primitive
              break
            }
            cur = cur.commit!() as Primitive
            break
          case "OnSuccess":
          case "OnFailure":
          case "OnSuccessAndFailure":
            stack.push(cur)
            cur = cur.effect_instruction_i0 as Primitive
            break
          case "Tag": {
            const found = find(cur.key!)
            if (found === MISSING) return rebuild(cur as never, stack) as never
            done = "success"
            value = found
            break
          }
          case "Right":
            done = "success"
            value = cur.right
            break
          case "Some":
            done = "success"
            value = cur.value
            break
          case "Left":
            cur = Exit.fail(cur.left) as unknown as Primitive
            break
          case "None":
            cur = Exit.fail(new Cause.NoSuchElementException()) as unknown as Primitive
            break
          default: {
            if (cur === CONTEXT && context !== undefined) {
              done = "success"
              value = contextNow()
              break
            }
            return rebuild(cur as never, stack) as never
          }
        }
      } catch (e) {
        cur = Exit.die(e) as unknown as Primitive
      }
      continue
    }
    // A settled value or cause goes to the next frame that takes it; a `provideService` it leaves ends there.
    const skip = done === "success" ? "OnFailure" : "OnSuccess"
    let frame = stack.pop()
    while (frame !== undefined && (frame._op === skip || frame._op === "Provide")) {
      if (frame._op === "Provide") provides--
      frame = stack.pop()
    }
    if (frame === undefined) return (done === "success" ? Exit.succeed(value) : Exit.failCause(cause!)) as never
    const f = frame as Primitive
    done = undefined
    try {
      if (skip === "OnFailure") cur = ((f._op === "OnSuccess" ? f.effect_instruction_i1 : f.effect_instruction_i2) as (a: unknown) => Primitive)(value)
      else cur = (f.effect_instruction_i1 as (c: Cause.Cause<unknown>) => Primitive)(cause!)
    } catch (e) {
      cur = Exit.die(e) as unknown as Primitive
    }
  }
}
