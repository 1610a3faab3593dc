/**
 * The `mesh` command.
 * Floor: cli (docs/architecture.md §3).
 */
export * as Cli from "./Cli.js"
