import { InvalidInputError } from "./errors.js";
import { checkSessionId, checkStepIndex, derive } from "./key.js";
import { MetaIdempotencyKey, MetaSessionID, MetaStepIndex } from "./wire.js";

/** The `_meta` members of an MCP `tools/call` that identify the call to the gateway. */
export interface McpMeta {
  [MetaSessionID]: string;
  [MetaStepIndex]: number;
  [MetaIdempotencyKey]?: string;
  [name: string]: unknown;
}

/**
 * Returns the `_meta` of an MCP `tools/call` request that carries the call's
 * identity to the gateway's MCP endpoint: the session id, the step index (a
 * JSON integer) and, when tool and args are given, the derived idempotency
 * key, which the gateway checks against the one it derives itself. The
 * gateway derives the same key for the same call made over REST, so a call
 * executed over one is replayed over the other.
 *
 *     await mcp.callTool({ name: "provision", arguments: args,
 *                          _meta: mcpMeta(sessionId, 7, "provision", args) });
 *
 * Every input is checked; a bad one throws {@link InvalidInputError}. As
 * for Session.call, args must not hold NaN, ±Infinity or an integral
 * number beyond ±(2^53−1) (send such ids as strings).
 */
export function mcpMeta(sessionId: string, stepIndex: number | bigint, tool?: string, args?: unknown): McpMeta {
  checkSessionId(sessionId);
  const step = checkStepIndex(stepIndex);
  const meta: McpMeta = { [MetaSessionID]: sessionId, [MetaStepIndex]: step };
  if (tool === undefined && args === undefined) {
    return meta;
  }
  if (tool === undefined || args === undefined) {
    throw new InvalidInputError(
      tool === undefined ? "tool" : "args",
      "give both tool and args (or neither): the idempotency key is derived from both",
    );
  }
  meta[MetaIdempotencyKey] = derive(sessionId, step, tool, args, { allowUnsafeIntegers: false }).key;
  return meta;
}
