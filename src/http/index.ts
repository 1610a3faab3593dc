/**
 * The lean serving path every HTTP surface uses, and the one error shape on the wire.
 * Floor: http (docs/architecture.md §3).
 */
export * as CorrelationId from "./CorrelationId.js"
export * as ErrorBody from "./ErrorBody.js"
export * as HostGuard from "./HostGuard.js"
export * as LeanRequest from "./LeanRequest.js"
export * as ReadBody from "./ReadBody.js"
export * as RouteTable from "./RouteTable.js"
export * as Serve from "./Serve.js"
export * as WriteResponse from "./WriteResponse.js"
