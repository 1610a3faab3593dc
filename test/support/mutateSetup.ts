// For mutation runs only (vitest.mutate.config.ts): a property that fails stops at its first counterexample instead
// of shrinking it, so a killed mutant shows as killed, not as a timeout of the shrinker.
import * as FastCheck from "effect/FastCheck"
import fc from "fast-check"

fc.configureGlobal({ endOnFailure: true })
FastCheck.configureGlobal({ endOnFailure: true })
