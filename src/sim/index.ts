/**
 * Deterministic simulation: a whole mesh in one process over an in-memory network, under the test clock, with
 * faults from a schedule and invariants checked after every action (docs/simulation.md).
 *
 * Floor: sim (docs/architecture.md §3).
 */
export * as Network from "./Network.js"
export * as Simulation from "./Simulation.js"
