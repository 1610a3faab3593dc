/**
 * Agent servers and calls between agents.
 * Floor: agent (docs/architecture.md §3).
 */
export * as AgentApi from "./AgentApi.js"
export * as AgentClient from "./AgentClient.js"
export * as AgentError from "./AgentError.js"
export * as AgentServer from "./AgentServer.js"
export * as AgentServices from "./AgentServices.js"
export * as AgentWeb from "./AgentWeb.js"
export * as RoutedChat from "./RoutedChat.js"
export * as McpClient from "./McpClient.js"
export * as ToolLoop from "./ToolLoop.js"
