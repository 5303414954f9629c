import {
  CodeApprovalPending,
  CodeIdempotencyKeyMismatch,
  CodeRequestInProgress,
  MediaTypeProblem,
} from "./wire.js";

/**
 * An input the SDK refuses before anything is sent: arguments that are not
 * JSON (NaN, Infinity, an integer beyond ±(2^53−1), a BigInt, a function, a
 * Map, a lone surrogate, a cycle), a malformed session id, step index or
 * tool name. Fix the input: sending it again cannot succeed.
 */
export class InvalidInputError extends TypeError {
  /** Which input is wrong: `"sessionId"`, `"stepIndex"`, `"tool"` or `"args"`. */
  readonly field: "sessionId" | "stepIndex" | "tool" | "args";
  /** For `args`: a JSON Pointer to the offending value (`""` for the root). */
  readonly path: string | undefined;

  constructor(field: InvalidInputError["field"], message: string, path?: string) {
    super(path === undefined ? message : `${message} (at ${JSON.stringify(path)})`);
    this.name = "InvalidInputError";
    this.field = field;
    this.path = path;
  }
}

/** One schema violation of `invalid_arguments`. */
export interface Violation {
  /** A JSON Pointer into the arguments (`""` for the root). */
  location: string;
  /** What is wrong there. */
  message: string;
}

/**
 * A problem response (RFC 9457 `application/problem+json`) from the gateway,
 * or any 5xx response. `Session.call` throws it after its retries.
 */
export class GatewayError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The contract's machine-readable code, such as `"step_conflict"`; `""` when the body was not a problem document. */
  readonly code: string;
  /** The problem's `type` URI. */
  readonly type: string;
  /** The problem's title (the status text when the body had none). */
  readonly title: string;
  /** The problem's detail. */
  readonly detail: string;
  /** Whether the same request, unchanged, may succeed later. */
  readonly retryable: boolean;
  /** The parsed problem document (undefined when the body was not one). */
  readonly problem: Record<string, unknown> | undefined;
  /** The response body, as received. */
  readonly body: string;
  /** The response's `Retry-After` in seconds (undefined when absent). */
  readonly retryAfter: number | undefined;
  /** The gateway's `X-Request-Id`. */
  readonly requestId: string | undefined;
  /** `invalid_arguments`: the schema violations. */
  readonly errors: Violation[] | undefined;
  /** `step_conflict`: the tool of the earlier call that holds the step. */
  readonly tool: string | undefined;
  /** `step_conflict`: the execution id of the earlier call that holds the step. */
  readonly executionId: string | undefined;
  /** `idempotency_key_mismatch`: the key the gateway derived. */
  readonly expectedKey: string | undefined;
  /** `idempotency_key_mismatch`: the canonical (RFC 8785) arguments the gateway derived it from. */
  readonly canonicalArguments: string | undefined;
  /** `approval_pending`, `approval_denied`, `approval_expired`: the call's approval id. */
  readonly approvalId: string | undefined;
  /** `call_denied`, `approval_denied`, `approval_expired`: why the call was refused (the rule's reason, the approver's note). */
  readonly reason: string | undefined;
  /** `approval_denied`, `approval_expired`: who decided. */
  readonly by: string | undefined;

  constructor(init: GatewayErrorInit) {
    const problem = isProblemMediaType(init.contentType) ? parseObject(init.body) : undefined;
    const text = (name: string): string => {
      const v = problem?.[name];
      return typeof v === "string" ? v : "";
    };
    const optional = (name: string): string | undefined => text(name) || undefined;
    const code = text("code");
    const title = text("title") || init.statusText || `HTTP ${init.status}`;
    const detail = text("detail");
    let message = `toolgateway: ${init.status}`;
    if (code) message += ` ${code}`;
    if (title) message += `: ${title}`;
    if (detail) message += `: ${detail}`;
    super(message);
    this.name = "GatewayError";
    this.status = init.status;
    this.code = code;
    this.type = text("type");
    this.title = title;
    this.detail = detail;
    this.retryable =
      problem !== undefined && typeof problem["retryable"] === "boolean"
        ? problem["retryable"]
        : isRetryableStatus(init.status);
    this.problem = problem;
    this.body = init.body;
    this.retryAfter = init.retryAfter;
    this.requestId = init.requestId;
    this.errors = Array.isArray(problem?.["errors"]) ? (problem["errors"] as Violation[]) : undefined;
    this.tool = optional("tool");
    this.executionId = optional("execution_id");
    this.expectedKey = code === CodeIdempotencyKeyMismatch ? optional("expected_key") : undefined;
    this.canonicalArguments =
      code === CodeIdempotencyKeyMismatch ? optional("canonical_arguments") : undefined;
    this.approvalId = optional("approval_id");
    this.reason = optional("reason");
    this.by = optional("by");
  }

  /** Whether `Session.call` retries this answer with the same key (contract: 409 request_in_progress, 502, 503, 504). */
  get retriedByClient(): boolean {
    if (this.status === 409) return this.code === CodeRequestInProgress;
    return isRetryableStatus(this.status);
  }
}

/** What a {@link GatewayError} is built from: one HTTP answer. */
export interface GatewayErrorInit {
  status: number;
  statusText?: string;
  contentType?: string | null;
  body: string;
  retryAfter?: number | undefined;
  requestId?: string | undefined;
}

/**
 * 409 `approval_pending`: the tool's rules hold the call for a human's
 * approval; nothing ran. `Session.call` throws it at once and never retries
 * it, although the gateway marks it retryable: a human answers in minutes or
 * hours, so the agent pauses (the runtime adapters turn it into the
 * runtime's own approval pause) and makes the same call again (same
 * session, step, tool and arguments) once it is decided: it then runs once,
 * or throws `approval_denied` / `approval_expired`. For a rule with
 * `approver: caller`, answer with {@link Client.approve} / `Client.deny`.
 */
export class ApprovalPendingError extends GatewayError {
  /** The approval's id (a ULID). */
  declare readonly approvalId: string;
  /** When the approval expires undecided (undefined when the gateway did not say). */
  readonly expiresAt: Date | undefined;

  constructor(init: GatewayErrorInit) {
    super(init);
    this.name = "ApprovalPendingError";
    const at = this.problem?.["approval_expires_at"];
    const date = typeof at === "string" ? new Date(at) : undefined;
    this.expiresAt = date && !Number.isNaN(date.getTime()) ? date : undefined;
  }

  /** Never: a human is in the loop (see the class). */
  override get retriedByClient(): boolean {
    return false;
  }
}

/** The error of one problem or 5xx answer: an {@link ApprovalPendingError} for `approval_pending`, else a {@link GatewayError}. */
export function gatewayError(init: GatewayErrorInit): GatewayError {
  const error = new GatewayError(init);
  return error.code === CodeApprovalPending && error.approvalId ? new ApprovalPendingError(init) : error;
}

/** 502, 503 and 504: the gateway stored nothing, so sending the same key again is safe. */
export function isRetryableStatus(status: number): boolean {
  return status === 502 || status === 503 || status === 504;
}

/** Whether a Content-Type is application/problem+json (parameters allowed). */
export function isProblemMediaType(contentType: string | null | undefined): boolean {
  if (!contentType) return false;
  const mediaType = contentType.split(";", 1)[0]!.trim().toLowerCase();
  return mediaType === MediaTypeProblem;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    // A malformed problem body leaves the members empty; body keeps it.
    return undefined;
  }
}
