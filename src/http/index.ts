/**
 * The lean serving path every HTTP surface uses, the one error shape on the wire, and what the path observes
 * (access log, request metrics, request spans; OpenTelemetry itself is `agent-mesh/Telemetry`).
 * Floor: http (docs/architecture.md §3).
 */
export * as AccessLog from "./AccessLog.js"
export * as CorrelationId from "./CorrelationId.js"
export * as ErrorBody from "./ErrorBody.js"
export * as FailureLog from "./FailureLog.js"
export * as HostGuard from "./HostGuard.js"
export * as HttpClientDefault from "./HttpClientDefault.js"
export * as LeanRequest from "./LeanRequest.js"
export * as Metrics from "./Metrics.js"
export * as ReadBody from "./ReadBody.js"
export * as RouteTable from "./RouteTable.js"
export * as Serve from "./Serve.js"
export * as ServeRules from "./ServeRules.js"
export * as Tracing from "./Tracing.js"
export * as WebHandler from "./WebHandler.js"
export * as WebRequest from "./WebRequest.js"
export * as WriteResponse from "./WriteResponse.js"
