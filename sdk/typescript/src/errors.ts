import {
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

  constructor(init: {
    status: number;
    statusText?: string;
    contentType?: string | null;
    body: string;
    retryAfter?: number | undefined;
    requestId?: string | undefined;
  }) {
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
  }

  /** Whether `Session.call` retries this answer with the same key (contract: 409 request_in_progress, 502, 503, 504). */
  get retriedByClient(): boolean {
    if (this.status === 409) return this.code === CodeRequestInProgress;
    return isRetryableStatus(this.status);
  }
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
