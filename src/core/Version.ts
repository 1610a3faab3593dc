/**
 * The package version, kept equal to package.json's by a test.
 *
 * Floor: core (docs/architecture.md §3).
 */
export const VERSION = "0.1.0"

/** The mesh protocol version this package speaks. */
export const MESH_PROTOCOL_VERSION = "1.0"
