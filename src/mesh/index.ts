/**
 * The low-level envelope transport: MeshServer and MessageClient.
 * Floor: mesh (docs/architecture.md §3).
 */
export * as MeshServer from "./MeshServer.js"
export * as MeshServerHandlers from "./MeshServerHandlers.js"
export * as MeshServerWeb from "./MeshServerWeb.js"
export * as MeshServerApi from "./MeshServerApi.js"
export * as MessageClient from "./MessageClient.js"
