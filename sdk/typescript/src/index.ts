/**
 * `@toolgateway/client`: the TypeScript SDK of toolgateway. It derives the
 * idempotency key of every tool call from the session id, the step index,
 * the tool name and the RFC 8785 canonical arguments, exactly as the gateway
 * and the Go and Python SDKs do, and retries with the same key, so a call
 * that is sent again (by a retry, or by a runtime that crashed and resumed)
 * runs once and is replayed after.
 *
 * @module
 */
export { canonicalize, MaxDepth } from "./canonical.js";
export { deriveKey, MaxSessionIDLength, MaxStepIndex } from "./key.js";
export { Client, Defaults, NetworkError, Result, Session } from "./client.js";
export type { CallOptions, ClientOptions, DecisionOptions, ToolDefinition } from "./client.js";
export { ApprovalPendingError, GatewayError, InvalidInputError } from "./errors.js";
export type { Violation } from "./errors.js";
export { mcpMeta } from "./mcp.js";
export type { McpMeta } from "./mcp.js";
export {
  langgraphIdentity,
  langgraphSessionId,
  langgraphStep,
  openaiAgentsSessionId,
  openaiAgentsStep,
  sessionIdFromParts,
  temporalSessionId,
  temporalStep,
} from "./runtimes.js";
export type { LangGraphConfig } from "./runtimes.js";
export * as wire from "./wire.js";
