/**
 * Session ids and step indices for agent runtimes: the TypeScript twin of
 * the Python SDK's `toolgateway.runtimes`, with the same rules, so the same
 * runtime identifiers give the same session id and step index in both.
 *
 * The key is stable only if its inputs are: a call replayed after a crash
 * must come back with the same session id and step index, and the parallel
 * tool calls of one model turn must get distinct indices. The rules
 * (docs/keys.md, "Step indices for real runtimes"):
 *
 * - the session id comes from what identifies the run across resumes,
 *   regenerated turns and forks (the thread, workflow or session id), never
 *   from an id minted per node execution, task, attempt or model turn
 *   (LangGraph's checkpoint namespace task ids, a tool-call id);
 * - the step index of a tool call is its ordinal among the tool calls of
 *   the session, counted from the session's checkpointed history in the
 *   order the model emitted them. Never the model's own tool-call id: a
 *   regenerated turn gets new ids, and an ordinal lets the gateway tell "the
 *   same call again" (replay) from "another call in the same step"
 *   (`step_conflict`).
 *
 * These helpers are pure functions over the history shapes documented with
 * each; they import nothing from the runtimes. Their tests run on histories
 * and configs recorded from real LangGraph.js runs
 * (sdk/testdata/runtimes.json, written by test/record-langgraph.ts) and on
 * hand-written histories in the documented shapes of the other runtimes.
 *
 * @module
 */
import { createHash } from "node:crypto";

import { InvalidInputError } from "./errors.js";
import { checkSessionId, MaxSessionIDLength } from "./key.js";

// ---------------------------------------------------------------------------
// Session ids from runtime identifiers

/** Kept as is: visible ASCII (0x21–0x7E) except ':', '%' and '/'. */
function kept(codePoint: number): boolean {
  return codePoint >= 0x21 && codePoint <= 0x7e && codePoint !== 0x3a && codePoint !== 0x25 && codePoint !== 0x2f;
}

/**
 * The UTF-8 bytes of one code point, each as `%XX`. A lone surrogate (which
 * a JavaScript string can hold) is written as its three-byte form, as
 * Python's `surrogatepass` writes it, so the two SDKs agree on it too.
 */
function percentEncode(codePoint: number): string {
  let bytes: number[];
  if (codePoint < 0x80) bytes = [codePoint];
  else if (codePoint < 0x800) bytes = [0xc0 | (codePoint >> 6), 0x80 | (codePoint & 0x3f)];
  else if (codePoint < 0x10000) {
    bytes = [0xe0 | (codePoint >> 12), 0x80 | ((codePoint >> 6) & 0x3f), 0x80 | (codePoint & 0x3f)];
  } else {
    bytes = [
      0xf0 | (codePoint >> 18),
      0x80 | ((codePoint >> 12) & 0x3f),
      0x80 | ((codePoint >> 6) & 0x3f),
      0x80 | (codePoint & 0x3f),
    ];
  }
  return bytes.map((b) => "%" + b.toString(16).toUpperCase().padStart(2, "0")).join("");
}

/**
 * Joins runtime identifiers into one valid, deterministic session id.
 *
 * Each part is kept as is where the gateway allows it; `:`, `%`, `/`,
 * spaces, control characters and non-ASCII characters are percent-encoded
 * (UTF-8), and the parts are joined with `/`, so different parts never give
 * the same id. An id longer than 256 characters is replaced by
 * `sha256-<hex of it>`. The result is the Python SDK's
 * `session_id_from_parts` for the same parts.
 *
 *     sessionIdFromParts("user-7:thread-3", "tools:9a2b") // "user-7%3Athread-3/tools%3A9a2b"
 *
 * @throws {@link InvalidInputError} (field `"sessionId"`): no parts, or a
 *   part that is not a non-empty string.
 */
export function sessionIdFromParts(...parts: string[]): string {
  if (parts.length === 0) {
    throw new InvalidInputError("sessionId", "sessionIdFromParts needs at least one part");
  }
  const encoded = parts.map((part) => {
    if (typeof part !== "string" || part === "") {
      throw new InvalidInputError("sessionId", `session id part ${show(part)} must be a non-empty string`);
    }
    let out = "";
    for (const ch of part) {
      const codePoint = ch.codePointAt(0)!;
      out += kept(codePoint) ? ch : percentEncode(codePoint);
    }
    return out;
  });
  let joined = encoded.join("/");
  if (joined.length > MaxSessionIDLength) {
    joined = "sha256-" + createHash("sha256").update(joined, "ascii").digest("hex");
  }
  checkSessionId(joined);
  return joined;
}

// ---------------------------------------------------------------------------
// Shared: the ordinal of a call among the calls of a history

/** A member of a plain object, or a property of a class instance (a LangChain message, an SDK item). */
function member(item: unknown, name: string): unknown {
  if (item === null || (typeof item !== "object" && typeof item !== "function")) return undefined;
  return (item as Record<string, unknown>)[name];
}

function ordinal(ids: Iterable<unknown>, wanted: unknown, what: string): number {
  if (typeof wanted !== "string" || wanted === "") {
    throw new InvalidInputError("stepIndex", `${what} must be a non-empty string, not ${show(wanted)}`);
  }
  let index = 0;
  for (const found of ids) {
    if (found === wanted) return index;
    index++;
  }
  throw new InvalidInputError(
    "stepIndex",
    `${what} ${JSON.stringify(wanted)} is not in the history; pass the history that contains the call`,
  );
}

function* each(history: Iterable<unknown> | null | undefined, what: string): Iterable<unknown> {
  if (history === null || history === undefined || typeof (history as Iterable<unknown>)[Symbol.iterator] !== "function") {
    throw new InvalidInputError("stepIndex", `${what} must be an array (or another iterable), not ${show(history)}`);
  }
  yield* history;
}

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null || value === undefined || typeof value === "number" || typeof value === "boolean") return String(value);
  if (typeof value === "bigint") return `${value}n`;
  return Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

// ---------------------------------------------------------------------------
// LangGraph (LangGraph.js and LangGraph for Python alike)

/**
 * The node path of the graph whose state a node or tool runs in, from its
 * `checkpoint_ns`: the namespace's segments (`|`-separated, each
 * `node:<task id>`) without the last one, which is the running node itself,
 * and without the task ids, which LangGraph mints per task (uuid5 of the
 * checkpoint, the step and the node): a tools node regenerated from a fork
 * of the thread runs under a new one.
 */
function graphPath(checkpointNs: string): string[] {
  const segments = checkpointNs.split("|").slice(0, -1);
  return segments.map((segment) => {
    const node = segment.split(":", 1)[0]!;
    if (node === "") {
      throw new InvalidInputError("sessionId", `checkpoint namespace ${JSON.stringify(checkpointNs)} has an empty node name`);
    }
    return node;
  });
}

/**
 * Session id of a LangGraph thread: the thread id, plus the node path of
 * the subgraph when the call runs inside one (its message history, and so
 * its step count, is the subgraph's own).
 *
 * `threadId` is `config.configurable.thread_id`; `checkpointNs` is
 * `config.configurable.checkpoint_ns` of the node or tool that makes the
 * call (inside a ToolNode at the top level it is `tools:<task id>`; in a
 * subgraph `agent:<task id>|tools:<task id>`). Only the node names of the
 * enclosing graphs are used, never the task ids or the running node: the
 * identity of a run must survive resumes, regenerated turns and forks, and
 * LangGraph mints a new task id for each node execution, so a session built
 * from the namespace as is would give a regenerated model turn a new
 * session, and the gateway would run its calls a second time.
 *
 *     langgraphSessionId("user-7:thread-3", "tools:9a2b…")                  // "user-7%3Athread-3"
 *     langgraphSessionId("user-7:thread-3", "research:6f1c…|tools:9a2b…")  // "user-7%3Athread-3/research"
 *
 * @throws {@link InvalidInputError} (field `"sessionId"`): an empty or
 *   non-string thread id, or a namespace with an empty node name.
 */
export function langgraphSessionId(threadId: string, checkpointNs = ""): string {
  if (typeof checkpointNs !== "string") {
    throw new InvalidInputError("sessionId", `checkpoint namespace must be a string, not ${show(checkpointNs)}`);
  }
  return sessionIdFromParts(threadId, ...graphPath(checkpointNs));
}

/**
 * The tool calls of an AI message in the shapes LangGraph holds and
 * records: a LangChain message object or its plain form (`tool_calls`), the
 * LangChain serialisation a checkpoint or `JSON.stringify` writes
 * (`{ lc: 1, type: "constructor", id: [..., "AIMessage"], kwargs: { tool_calls } }`),
 * and a stored message (`{ type: "ai", data: { tool_calls } }`).
 */
function toolCallsOf(message: unknown): unknown {
  const calls = member(message, "tool_calls");
  if (calls !== undefined) return calls;
  if (member(message, "lc") === 1 && member(message, "type") === "constructor") {
    return member(member(message, "kwargs"), "tool_calls");
  }
  if (member(message, "type") === "ai") return member(member(message, "data"), "tool_calls");
  return undefined;
}

/**
 * Step index of a tool call in a LangGraph thread: the 0-based ordinal of
 * the call among all tool calls of the thread's message history.
 *
 * `messages` is the checkpointed `state.messages`, oldest first, whose AI
 * messages carry `tool_calls`: LangChain.js `AIMessage` objects
 * (`message.tool_calls`, `[{ id, name, args, type: "tool_call" }]`), their
 * plain-object form (`{ type: "ai", tool_calls: [...] }`, as LangGraph for
 * Python's message dicts), their LangChain serialisation
 * (`{ lc: 1, type: "constructor", id: [..., "AIMessage"], kwargs: { tool_calls } }`,
 * what a checkpoint or `JSON.stringify` holds), or OpenAI-style
 * `{ role: "assistant", tool_calls: [{ id, type: "function", function }] }`.
 * It must include the AI message that made the call. `toolCallId` only
 * locates the call (a LangChain.js tool gets it as `config.toolCall.id`);
 * the index does not depend on it, so a regenerated turn with the same calls
 * in the same order reproduces the same indices.
 *
 * @throws {@link InvalidInputError} (field `"stepIndex"`): the call is not
 *   in `messages`, or `toolCallId` is not a non-empty string.
 */
export function langgraphStep(messages: Iterable<unknown>, toolCallId: string): number {
  function* ids(): Iterable<unknown> {
    for (const message of each(messages, "messages")) {
      const calls = toolCallsOf(message);
      if (!Array.isArray(calls)) continue;
      for (const call of calls) yield member(call, "id");
    }
  }
  return ordinal(ids(), toolCallId, "tool call id");
}

/**
 * The part of a LangGraph `RunnableConfig` that {@link langgraphIdentity}
 * reads. A LangChain.js `RunnableConfig` or `ToolRunnableConfig` is one.
 */
export interface LangGraphConfig {
  /** LangGraph's configurable: the thread id and the checkpoint namespace of the running node. */
  configurable?: Record<string, unknown> | undefined;
}

/**
 * `[sessionId, stepIndex]` of a tool call inside a LangGraph node or tool,
 * from its `RunnableConfig`, the thread's messages and the call's id: the
 * session is {@link langgraphSessionId} of the config's thread id and
 * namespace, the step {@link langgraphStep}. A thread id that is an integer
 * is written in decimal (as Python's `str` writes it, so both SDKs agree).
 *
 * @throws {@link InvalidInputError}: no `configurable.thread_id` in the
 *   config (field `"sessionId"`: run the graph with a checkpointer), or the
 *   call is not in `messages` (field `"stepIndex"`).
 */
export function langgraphIdentity(
  config: LangGraphConfig,
  messages: Iterable<unknown>,
  toolCallId: string,
): [sessionId: string, stepIndex: number] {
  const configurable = member(config, "configurable") ?? {};
  const threadId = member(configurable, "thread_id");
  if (threadId === undefined || threadId === null || threadId === "" || threadId === 0 || threadId === 0n) {
    throw new InvalidInputError("sessionId", "config has no configurable.thread_id (run the graph with a checkpointer)");
  }
  let thread: string;
  if (typeof threadId === "string") thread = threadId;
  else if (typeof threadId === "bigint" || (typeof threadId === "number" && Number.isSafeInteger(threadId))) {
    thread = String(threadId);
  } else {
    throw new InvalidInputError("sessionId", `configurable.thread_id must be a string, not ${show(threadId)}`);
  }
  const namespace = member(configurable, "checkpoint_ns") || "";
  return [langgraphSessionId(thread, namespace as string), langgraphStep(messages, toolCallId)];
}

// ---------------------------------------------------------------------------
// OpenAI Agents SDK (for JavaScript, and the Python SDK's item dicts)

/**
 * Session id for an OpenAI Agents SDK session (the id its `Session`
 * implementation was created with, `await session.getSessionId()`), made
 * valid for the gateway (`:` and other characters percent-encoded).
 *
 * @throws {@link InvalidInputError} (field `"sessionId"`): an empty or
 *   non-string id.
 */
export function openaiAgentsSessionId(sessionId: string): string {
  return sessionIdFromParts(sessionId);
}

/**
 * A function-call item of an OpenAI Agents run, in the JavaScript SDK's
 * shape (`callId`) or the Responses API's (`call_id`), unwrapped from a
 * run's `tool_call_item`: its call id and its arguments as the model wrote
 * them, unchecked. Undefined for any other item.
 *
 * @internal
 */
export function openaiFunctionCall(item: unknown): { callId: unknown; arguments: unknown } | undefined {
  // A RunToolCallItem of a run's newItems wraps the protocol item.
  if (member(item, "type") === "tool_call_item") item = member(item, "rawItem");
  if (member(item, "type") !== "function_call") return undefined;
  const callId = member(item, "callId");
  return { callId: callId !== undefined ? callId : member(item, "call_id"), arguments: member(item, "arguments") };
}

/** The call id of a function-call item (see {@link openaiFunctionCall}). */
function functionCallId(item: unknown): unknown {
  return openaiFunctionCall(item)?.callId;
}

/**
 * Step index of a function call in an OpenAI Agents SDK session: the
 * 0-based ordinal of its `function_call` item among the function-call items
 * of the session.
 *
 * `items` is the session's stored items (`await session.getItems()`)
 * followed by the items of the current run up to and including the model
 * response that made the call, oldest first, without duplicates. A
 * function-call item is `{ type: "function_call", callId, name, arguments }`
 * (the JavaScript SDK's `protocol.FunctionCallItem`), the Responses API's
 * `{ type: "function_call", call_id, ... }` (the Python SDK's items), or a
 * run item `{ type: "tool_call_item", rawItem: <one of those> }`. Other items
 * (messages, `function_call_result` / `function_call_output`, reasoning,
 * hosted tool calls) do not count. `callId` locates the call (a tool's
 * `execute` gets it as `details.toolCall.callId`); the index is its
 * position, not the id, which a regenerated turn changes.
 *
 * @throws {@link InvalidInputError} (field `"stepIndex"`): the call is not
 *   in `items`, or `callId` is not a non-empty string.
 */
export function openaiAgentsStep(items: Iterable<unknown>, callId: string): number {
  return ordinal(openaiAgentsCallIds(items), callId, "call id");
}

/**
 * The call ids of the function-call items among `items`, in order: the
 * one count of function calls that {@link openaiAgentsStep} and the OpenAI
 * Agents adapter share (the item shapes are those of
 * {@link openaiAgentsStep}).
 *
 * @internal
 */
export function openaiAgentsCallIds(items: Iterable<unknown>): unknown[] {
  const ids: unknown[] = [];
  for (const item of each(items, "items")) {
    const id = functionCallId(item);
    if (id !== undefined) ids.push(id);
  }
  return ids;
}

// ---------------------------------------------------------------------------
// Temporal (the TypeScript SDK, and histories as the CLI prints them)

/** `EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED` of the Temporal API, as the TypeScript SDK's history objects hold it. */
const activityTaskScheduled = 10;
const scheduledNames = new Set(["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "ActivityTaskScheduled"]);
const defaultActivityId = /^(0|[1-9][0-9]{0,15})$/;

/**
 * Session id of a Temporal workflow: its workflow id
 * (`Context.current().info.workflowExecution.workflowId` in an activity),
 * stable across worker crashes, activity retries and replays. Pass `runId`
 * only for a workflow that continues as new, whose activity sequence
 * numbers start again in each run.
 *
 * @throws {@link InvalidInputError} (field `"sessionId"`): an empty or
 *   non-string workflow id.
 */
export function temporalSessionId(workflowId: string, runId?: string): string {
  return runId ? sessionIdFromParts(workflowId, runId) : sessionIdFromParts(workflowId);
}

/**
 * Step index of a Temporal activity: its sequence number in the workflow.
 *
 * Without `history`, `activityId` must be the default activity id the SDKs
 * assign, which is that sequence number in decimal
 * (`Context.current().info.activityId`, e.g. `"3"`); it is returned as a
 * number (at most 2^53−1). With `history`, the index is the 0-based ordinal
 * of the activity's scheduled event among the workflow's scheduled
 * activities, which also works for custom activity ids. `history` is the
 * workflow's events, oldest first: in the JSON shape of
 * `temporal workflow show --output json`
 * (`{ eventType: "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
 * activityTaskScheduledEventAttributes: { activityId } }`), or as the
 * TypeScript client's `fetchHistory()` returns them (`history.events`, whose
 * `eventType` is the enum's number, 10). Retries of an activity keep its id
 * and so its step.
 *
 * @throws {@link InvalidInputError} (field `"stepIndex"`): a non-decimal
 *   id without history, or an id not in the history.
 */
export function temporalStep(activityId: string, history?: Iterable<unknown> | null): number {
  if (history === undefined || history === null) {
    if (typeof activityId !== "string" || !defaultActivityId.test(activityId)) {
      throw new InvalidInputError(
        "stepIndex",
        `activity id ${show(activityId)} is not a default (decimal sequence number) activity id; pass the workflow history to count it`,
      );
    }
    const step = BigInt(activityId);
    if (step > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new InvalidInputError("stepIndex", `activity id ${activityId} is beyond 2^53-1`);
    }
    return Number(step);
  }
  function* ids(): Iterable<unknown> {
    for (const event of each(history, "history")) {
      const type = member(event, "eventType");
      if (type === activityTaskScheduled || (typeof type === "string" && scheduledNames.has(type))) {
        yield member(member(event, "activityTaskScheduledEventAttributes"), "activityId");
      }
    }
  }
  return ordinal(ids(), activityId, "activity id");
}
