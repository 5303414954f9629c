/**
 * What a runtime adapter hands the model for a gateway call: the tool's
 * answer, or an error text the model can read and act on. Shared by the AI
 * SDK, OpenAI Agents and LangGraph adapters; it imports no runtime.
 *
 * @module
 * @internal
 */
import { NetworkError, type Result } from "./client.js";
import { GatewayError } from "./errors.js";
import {
  CodeApprovalDenied,
  CodeApprovalExpired,
  CodeCallDenied,
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
  // The tool's rules or a human said no: the model tells the user or
  // does something else; the call never ran.
  CodeCallDenied,
  CodeApprovalDenied,
  CodeApprovalExpired,
]);

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
 * made another call at a step an earlier attempt at this turn already ran
 * (before a restart, or in another branch of a forked conversation). Returns
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
      `${earlier}${execution} with other arguments: an earlier attempt at this turn ` +
      `(before a restart, or in another branch of this conversation). ` +
      `Its effect has happened; its result is not available here. ` +
      `If this call is still needed, make it again: it will run as a new call.`
    );
  }
  if (err.code === CodeCallDenied || err.code === CodeApprovalDenied || err.code === CodeApprovalExpired) {
    const who = err.by ? ` by ${err.by}` : "";
    const why = err.reason ? `: ${err.reason}` : "";
    const what = err.code === CodeCallDenied ? "denied by the tool's rules" : err.code === CodeApprovalDenied ? `denied${who}` : "not approved in time";
    return `This call of ${tool} was NOT run: it was ${what}${why} (${err.code}). Do not make it again; tell the user.`;
  }
  // The violations tell the model what to fix in its arguments.
  const violations = err.code === CodeInvalidArguments && err.errors ? ` ${JSON.stringify(err.errors)}` : "";
  return `The gateway refused this call of ${tool} (${err.status} ${err.code || "error"}): ${err.detail || err.title}${violations}`;
}

/**
 * The text for the model when a call could not be completed and may still
 * have run (the gateway unreachable after the client's retries, a 5xx), for
 * a runtime that must hand the model something and go on. It says not to
 * call again: a call made again is a new step, so it would run as a new
 * action even if this one ran. (A runtime that can stop the run should stop
 * it instead, and resume later with the same call and key.)
 */
export function unconfirmedText(tool: string, err: unknown): string {
  let reason = "the call failed";
  if (err instanceof NetworkError) reason = "the gateway could not be reached";
  else if (err instanceof GatewayError) reason = `the gateway answered ${err.status}${err.code ? ` ${err.code}` : ""}`;
  return (
    `This call of ${tool} could not be confirmed (${reason}): it may or may not have run. ` +
    `Do not make it again, and make no other call in its place: a new call would run as a new action. ` +
    `Tell the user that this action is unconfirmed.`
  );
}
