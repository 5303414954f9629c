/**
 * What a runtime adapter hands the model for a gateway call: the tool's
 * answer, or an error text the model can read and act on. Shared by the AI
 * SDK, OpenAI Agents and LangGraph adapters; it imports no runtime.
 *
 * @module
 * @internal
 */
import type { Result } from "./client.js";
import { GatewayError } from "./errors.js";
import {
  CodeIdempotencyKeyReused,
  CodeInvalidArguments,
  CodeOutcomeUnknown,
  CodePayloadTooLarge,
  CodeStepConflict,
  CodeUpstreamResponseTooLarge,
} from "./wire.js";

/**
 * The refusals the model can act on (change its arguments, make the call
 * again as a new one, tell the user). Others (auth, an unknown tool, a
 * malformed key) are the app's bugs: they propagate.
 */
const modelVisible: ReadonlySet<string> = new Set([
  CodeStepConflict,
  CodeIdempotencyKeyReused,
  CodeInvalidArguments,
  CodeOutcomeUnknown,
  CodePayloadTooLarge,
  CodeUpstreamResponseTooLarge,
]);

/**
 * A tool as the gateway's discovery lists it (`GET /api/tools/v1`, the
 * native form): the adapters take such a list as their tool definitions.
 */
export interface DiscoveredTool {
  name: string;
  description?: string;
  /** The JSON Schema of the arguments. */
  input_schema: Record<string, unknown>;
}

/** The definitions keyed by name, from a record of them or from a discovery list. */
export function definitionsByName<D>(
  definitions: Record<string, D> | readonly DiscoveredTool[],
  fromDiscovery: (tool: DiscoveredTool) => D,
): Record<string, D> {
  if (!Array.isArray(definitions)) return { ...(definitions as Record<string, D>) };
  const byName: Record<string, D> = {};
  for (const tool of definitions as readonly DiscoveredTool[]) byName[tool.name] = fromDiscovery(tool);
  return byName;
}

/** The tool's answer as the model should see it. */
export type ToolOutcome =
  | { ok: true; json: true; value: unknown }
  | { ok: true; json: false; value: string }
  | { ok: false; value: string };

/**
 * The outcome of an executed or replayed call: the body as JSON when it
 * parses (as text otherwise); a 4xx answer of the tool is an error the model
 * reads, with its body.
 */
export function resultOutcome(tool: string, result: Result): ToolOutcome {
  if (result.status >= 400) {
    return { ok: false, value: `The tool ${tool} answered ${result.status}: ${result.body}` };
  }
  try {
    return { ok: true, json: true, value: JSON.parse(result.body) as unknown };
  } catch {
    return { ok: true, json: false, value: result.body };
  }
}

/**
 * The error text for the model when the gateway refused the call for good
 * with a refusal the model can act on: above all `step_conflict`, the model
 * regenerated this step with another call after a restart. Returns
 * undefined for anything else (a network failure, a retryable answer, an
 * input the SDK refused, auth or configuration errors): the adapter lets
 * those propagate, since the same call may still succeed, or the app must
 * be fixed, and the call must not be recorded as done.
 */
export function refusalText(tool: string, step: number, err: unknown): string | undefined {
  if (!(err instanceof GatewayError) || err.retryable || !modelVisible.has(err.code)) return undefined;
  if (err.code === CodeStepConflict) {
    const earlier = err.tool ? `a call of ${err.tool}` : "another call";
    const execution = err.executionId ? ` (execution ${err.executionId})` : "";
    return (
      `step_conflict: this call of ${tool} was NOT run. Step ${step} of this conversation already ran ` +
      `${earlier}${execution} with other arguments: the call this turn replaces, made before a restart. ` +
      `Its effect has happened; its result is not available here. ` +
      `If this call is still needed, make it again: it will run as a new call.`
    );
  }
  // The violations tell the model what to fix in its arguments.
  const violations = err.code === CodeInvalidArguments && err.errors ? ` ${JSON.stringify(err.errors)}` : "";
  return `The gateway refused this call of ${tool} (${err.status} ${err.code || "error"}): ${err.detail || err.title}${violations}`;
}
