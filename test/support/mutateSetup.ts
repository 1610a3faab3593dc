// For mutation runs only (vitest.mutate.config.ts): a property that fails stops at its first counterexample instead
// of shrinking it, so a killed mutant shows as killed, not as a timeout of the shrinker. A property is also cut off
// after 10 s; a cut-off property passes (it is not marked as a failure), so a mutant that only slows a generator
// down is a quick survivor, never a kill and never a timeout.
import * as FastCheck from "effect/FastCheck"
import fc from "fast-check"

const bounded = { endOnFailure: true, interruptAfterTimeLimit: 10_000, markInterruptAsFailure: false }
fc.configureGlobal(bounded)
FastCheck.configureGlobal(bounded)
