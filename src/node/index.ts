/**
 * What needs Node.js: the node:crypto key layer (the default on Node) and the runtime the Promise facades share.
 * Floor: node (docs/architecture.md §3).
 */
export * as KeysNative from "./KeysNative.js"
