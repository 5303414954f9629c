import { createHash } from "node:crypto";

import { canonicalJSON, type CanonicalOptions } from "./canonical.js";
import { InvalidInputError } from "./errors.js";

/** The longest session id the gateway accepts. */
export const MaxSessionIDLength = 256;

/** The largest step index: 2^53−1, the largest integer every JSON implementation holds exactly. */
export const MaxStepIndex = Number.MAX_SAFE_INTEGER;

const visibleASCIIWithoutColon = /^[\x21-\x39\x3b-\x7e]+$/;
const toolName = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * Checks a session id: 1–256 visible ASCII characters (0x21–0x7E), no `:`
 * (the key's separator, so that no two identities derive the same key).
 */
export function checkSessionId(sessionId: unknown): asserts sessionId is string {
  if (typeof sessionId !== "string") {
    throw new InvalidInputError("sessionId", `session id must be a string, not ${describe(sessionId)}`);
  }
  if (sessionId.length === 0 || sessionId.length > MaxSessionIDLength) {
    throw new InvalidInputError("sessionId", `session id must have 1–${MaxSessionIDLength} characters, not ${sessionId.length}`);
  }
  if (!visibleASCIIWithoutColon.test(sessionId)) {
    throw new InvalidInputError(
      "sessionId",
      "session id must be visible ASCII (0x21–0x7E) without ':' (no spaces, no control or non-ASCII characters)",
    );
  }
}

/**
 * Checks a step index and returns it as a number: an integer 0 … 2^53−1,
 * given as a number or a BigInt.
 */
export function checkStepIndex(stepIndex: unknown): number {
  if (typeof stepIndex === "bigint") {
    if (stepIndex < 0n || stepIndex > BigInt(MaxStepIndex)) {
      throw new InvalidInputError("stepIndex", `step index must be 0 … 2^53−1, not ${stepIndex}`);
    }
    return Number(stepIndex);
  }
  if (typeof stepIndex !== "number") {
    throw new InvalidInputError("stepIndex", `step index must be a number, not ${describe(stepIndex)}`);
  }
  if (!Number.isSafeInteger(stepIndex) || stepIndex < 0) {
    throw new InvalidInputError("stepIndex", `step index must be an integer 0 … 2^53−1, not ${stepIndex}`);
  }
  return stepIndex;
}

/** Checks a tool name: `^[a-z0-9][a-z0-9_-]{0,63}$`. */
export function checkToolName(tool: unknown): asserts tool is string {
  if (typeof tool !== "string" || !toolName.test(tool)) {
    throw new InvalidInputError(
      "tool",
      `tool name must match ^[a-z0-9][a-z0-9_-]{0,63}$, not ${typeof tool === "string" ? JSON.stringify(tool) : describe(tool)}`,
    );
  }
}

/** A call's identity: its key and the canonical arguments it was derived from (the body to send). */
export interface Derived {
  /** The idempotency key: 64 lowercase hex characters. */
  key: string;
  /** The RFC 8785 text of the arguments. */
  canonical: string;
}

/**
 * Derives a call's idempotency key exactly as the gateway does:
 * lowercase hex of SHA-256(`sessionId:stepIndex:tool:` + RFC 8785 text of
 * args), byte for byte the key of the Go `keyderive.Key`. args must be a
 * plain object (the tool's arguments); its values follow
 * {@link canonicalize}. Every input is checked first; a bad one throws
 * {@link InvalidInputError}.
 */
export function deriveKey(sessionId: string, stepIndex: number | bigint, tool: string, args: unknown): string {
  return derive(sessionId, stepIndex, tool, args, { allowUnsafeIntegers: true }).key;
}

/**
 * {@link deriveKey} that also returns the canonical arguments. For a call
 * about to be sent, options.allowUnsafeIntegers is false: integral numbers
 * beyond ±(2^53−1) are refused, since JavaScript cannot tell them from an
 * id that already lost digits.
 */
export function derive(
  sessionId: string,
  stepIndex: number | bigint,
  tool: string,
  args: unknown,
  options: CanonicalOptions,
): Derived {
  checkSessionId(sessionId);
  const step = checkStepIndex(stepIndex);
  checkToolName(tool);
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    throw new InvalidInputError("args", `arguments must be a JSON object, not ${describe(args)}`, "");
  }
  const canonical = canonicalJSON(args, options);
  if (!canonical.startsWith("{")) {
    // A toJSON method turned the object into something else.
    throw new InvalidInputError("args", "arguments must be a JSON object", "");
  }
  const key = createHash("sha256")
    .update(`${sessionId}:${step}:${tool}:${canonical}`, "utf8")
    .digest("hex");
  return { key, canonical };
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}
