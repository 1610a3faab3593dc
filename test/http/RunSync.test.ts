/**
 * `RunSync.run` against a fiber: on generated effects (values, failures, defects, side effects, every combinator it
 * runs itself, and steps it must leave to a fiber), running it and then the rest it returns on a fiber gives the same
 * exit and the same side effects in the same order as running the whole effect on a fiber.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Equal from "effect/Equal"
import * as Exit from "effect/Exit"
import * as fc from "effect/FastCheck"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as RunSync from "../../src/http/RunSync.js"

class Svc extends Context.Tag("test/RunSync/Svc")<Svc, number>() {}
// Unknown to the lookup: read outside a `provideService` that gives it, it is a step left to a fiber (which has 7).
class Extra extends Context.Tag("test/RunSync/Extra")<Extra, number>() {}
const ref = FiberRef.unsafeMake(5)
const boom = new Error("boom")

type Node =
  | { readonly t: "succeed" | "fail" | "sync" | "syncThrow" | "svc" | "extra" | "ctx" | "right" | "left" | "some" | "none" | "fiberRef" | "die"; readonly n: number }
  | { readonly t: "suspend" | "mapThrow" | "uninterruptible" | "gen" | "yield" | "either" | "mapError" | "provide" | "provideExtra"; readonly c: Node; readonly n: number }
  | { readonly t: "flatMap" | "catchAll" | "catchAllCause" | "match" | "zipWith" | "orElse"; readonly c: Node; readonly d: Node; readonly n: number }

const node: fc.Arbitrary<Node> = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({ t: fc.constantFrom("succeed", "fail", "sync", "syncThrow", "svc", "extra", "ctx", "right", "left", "some", "none", "fiberRef", "die"), n: fc.integer({ min: 0, max: 9 }) }),
    fc.record({ t: fc.constantFrom("suspend", "mapThrow", "uninterruptible", "gen", "yield", "either", "mapError", "provide", "provideExtra"), c: tie("node"), n: fc.integer({ min: 0, max: 9 }) }),
    fc.record({ t: fc.constantFrom("flatMap", "catchAll", "catchAllCause", "match", "zipWith", "orElse"), c: tie("node"), d: tie("node"), n: fc.integer({ min: 0, max: 9 }) })
  ) as fc.Arbitrary<Node>
})).node

/** The effect a node describes; its side effects go to `log`. */
const build = (x: Node, log: Array<string>): Effect.Effect<unknown, unknown, Svc> => build_(x, log) as Effect.Effect<unknown, unknown, Svc>
const build_ = (x: Node, log: Array<string>): Effect.Effect<unknown, unknown, Svc | Extra> => {
  switch (x.t) {
    case "succeed": return Effect.succeed(x.n)
    case "fail": return Effect.fail(`e${x.n}`)
    case "die": return Effect.die(boom)
    case "sync": return Effect.sync(() => (log.push(`sync${x.n}`), x.n))
    case "syncThrow": return Effect.sync(() => { log.push(`throw${x.n}`); throw boom })
    case "svc": return Effect.map(Svc, (s) => s + x.n)
    case "extra": return Effect.map(Extra, (s) => s + x.n)
    case "ctx": return Effect.map(Effect.context<Svc | Extra>(), (c) => [Context.get(c, Svc), Option.getOrUndefined(Context.getOption(c, Extra)), x.n])
    case "provide": return RunSync.provideService(build_(x.c, log), Svc, 1000 + x.n)
    case "provideExtra": return RunSync.provideService(build_(x.c, log), Extra, 2000 + x.n)
    case "right": return Either.right(x.n)
    case "left": return Either.left(`l${x.n}`)
    case "some": return Option.some(x.n)
    case "none": return Effect.asVoid(Option.none())
    case "fiberRef": return FiberRef.get(ref)
    case "suspend": return Effect.suspend(() => (log.push(`suspend${x.n}`), build_(x.c, log)))
    case "mapThrow": return Effect.map(build_(x.c, log), () => { throw boom })
    case "uninterruptible": return Effect.uninterruptible(build_(x.c, log))
    case "gen": return Effect.gen(function* () { return (yield* build_(x.c, log)) as number })
    case "yield": return Effect.zipRight(Effect.yieldNow(), build_(x.c, log))
    case "either": return Effect.either(build_(x.c, log))
    case "mapError": return Effect.mapError(build_(x.c, log), (e) => `m${String(e)}`)
    case "flatMap": return Effect.flatMap(build_(x.c, log), (a) => (log.push(`then${String(a)}`), build_(x.d, log)))
    case "catchAll": return Effect.catchAll(build_(x.c, log), (e) => (log.push(`caught${String(e)}`), build_(x.d, log)))
    case "catchAllCause": return Effect.catchAllCause(build_(x.c, log), () => build_(x.d, log))
    case "match": return Effect.matchEffect(build_(x.c, log), { onFailure: () => build_(x.d, log), onSuccess: (a) => Effect.succeed([a, x.n]) })
    case "zipWith": return Effect.zipWith(build_(x.c, log), build_(x.d, log), (a, b) => [a, b])
    case "orElse": return Effect.orElse(build_(x.c, log), () => build_(x.d, log))
  }
}

const onFiber = (x: Node) => {
  const log: Array<string> = []
  const exit = Effect.runSyncExit(build(x, log).pipe(Effect.provideService(Svc, 100), Effect.provideService(Extra, 7)))
  return { exit, log }
}

const here = (x: Node, knowsSvc: boolean) => {
  const log: Array<string> = []
  const step = RunSync.run(build(x, log), (key) => (knowsSvc && key === Svc.key ? 100 : RunSync.MISSING), knowsSvc ? () => Context.add(Context.make(Svc, 100), Extra, 7) as Context.Context<never> : undefined)
  const exit = Exit.isExit(step) ? step : Effect.runSyncExit(step.pipe(Effect.provideService(Svc, 100), Effect.provideService(Extra, 7)))
  return { exit, log, settled: Exit.isExit(step) }
}

describe("RunSync", () => {
  it("gives the exit and the side effects a fiber gives, running the rest on a fiber where it stops", () => {
    let settled = 0
    fc.assert(
      fc.property(node, fc.boolean(), (x, knowsSvc) => {
        const a = onFiber(x)
        const b = here(x, knowsSvc)
        if (b.settled) settled++
        expect(b.log).toEqual(a.log)
        expect(Exit.isSuccess(b.exit)).toBe(Exit.isSuccess(a.exit))
        if (Exit.isSuccess(a.exit) && Exit.isSuccess(b.exit)) expect(b.exit.value).toEqual(a.exit.value)
        if (Exit.isFailure(a.exit) && Exit.isFailure(b.exit)) expect(Equal.equals(b.exit.cause, a.exit.cause)).toBe(true)
      }),
      { numRuns: 2000 }
    )
    // Both ways were taken: many effects settled here, many went on to a fiber.
    expect(settled).toBeGreaterThan(200)
    expect(settled).toBeLessThan(1800)
  })

  it("settles without a fiber an effect made only of steps it runs", () => {
    const log: Array<string> = []
    const effect = Effect.mapError(
      Effect.flatMap(Effect.try(() => (log.push("read"), 7)), (n) => (n > 5 ? Effect.succeed(n * 2) : Effect.fail("small"))),
      (e) => `wrapped ${e}`
    )
    const step = RunSync.run(effect, () => RunSync.MISSING)
    expect(Exit.isExit(step) && Exit.isSuccess(step) ? step.value : undefined).toBe(14)
    expect(log).toEqual(["read"])
  })

  it("leaves a step that needs a fiber, and runs nothing before it twice", () => {
    const log: Array<string> = []
    const effect = Effect.flatMap(Effect.sync(() => log.push("first")), () => Effect.map(FiberRef.get(ref), (n) => (log.push("second"), n)))
    const step = RunSync.run(effect, () => RunSync.MISSING)
    expect(Exit.isExit(step)).toBe(false)
    expect(log).toEqual(["first"])
    expect(Effect.runSync(step as Effect.Effect<number>)).toBe(5)
    expect(log).toEqual(["first", "second"])
  })

  it("answers Effect.context() with the given context, whose services are read when first asked for", () => {
    let made = 0
    const context = RunSync.lazyContext(() => (made++, new Map<string, unknown>([[Svc.key, 42]])))
    const effect = Effect.map(Effect.context<never>(), (ctx) => ctx)
    const step = RunSync.run(effect, () => RunSync.MISSING, () => context)
    const ctx = Exit.isExit(step) && Exit.isSuccess(step) ? step.value : undefined
    expect(made).toBe(0)
    expect(ctx === undefined ? undefined : Context.getOption(ctx as Context.Context<Svc>, Svc)).toEqual(Option.some(42))
    expect(Effect.runSync(Effect.provide(Svc, ctx as Context.Context<Svc>))).toBe(42)
    expect(made).toBe(1)
  })

  it("answers Effect.context() inside provideService with the provided services, copied only when read, still there after the provide ends", () => {
    let made = 0
    const context = RunSync.lazyContext(() => (made++, new Map<string, unknown>([[Svc.key, 42]])))
    // The context is taken inside the provide and read only after it has ended (its frame gone from the stack).
    const effect = Effect.map(RunSync.provideService(RunSync.provideService(Effect.context<Svc | Extra>(), Extra, 7), Svc, 1000), (ctx) => ctx)
    const step = RunSync.run(effect, () => RunSync.MISSING, () => context)
    const ctx = Exit.isExit(step) && Exit.isSuccess(step) ? (step.value as Context.Context<Svc | Extra>) : undefined
    expect(made).toBe(0)
    expect(ctx === undefined ? undefined : [Context.get(ctx, Svc), Context.get(ctx, Extra)]).toEqual([1000, 7])
    expect(made).toBe(1)
  })

  it("answers a service given by provideService only inside it, here and on the fiber that runs the rest", () => {
    const lookup = (key: string) => (key === Svc.key ? 100 : RunSync.MISSING)
    const inside = RunSync.provideService(Effect.map(Svc, (n) => n + 1), Svc, 1000)
    const both = <A>(first: Effect.Effect<A, never, Svc>) => Effect.flatMap(first, (a) => Effect.map(Svc, (b) => [a, b]))
    const settled = RunSync.run(both(inside), lookup)
    expect(Exit.isExit(settled) && Exit.isSuccess(settled) ? settled.value : undefined).toEqual([1001, 100])
    // Stopped inside the provided effect: the fiber running the rest still has the provided service, and only there.
    const stopped = RunSync.run(both(RunSync.provideService(Effect.zipRight(Effect.yieldNow(), Svc), Svc, 1000)), lookup)
    expect(Exit.isExit(stopped)).toBe(false)
    expect(Effect.runSync(Effect.provideService(stopped as Effect.Effect<Array<number>, never, Svc>, Svc, 100))).toEqual([1000, 100])
  })

  it("turns a thrown defect into a die caught by catchAllCause, as a fiber does", () => {
    const effect = Effect.catchAllCause(Effect.sync(() => { throw boom }), (cause) => Effect.succeed(cause))
    const step = RunSync.run(effect, () => RunSync.MISSING)
    expect(Exit.isExit(step) && Exit.isSuccess(step) ? Equal.equals(step.value, Effect.runSync(effect)) : false).toBe(true)
  })
})
