/**
 * `@toolgateway/client/langgraph`: the gateway's tools as LangChain tools
 * for a LangGraph.js `ToolNode` or `createReactAgent`, each call made
 * exactly once however often the graph resumes, replays or regenerates it.
 *
 *     const tools = await gatewayTools(new Client(url, { token }));
 *     const agent = createReactAgent({ llm, tools: new ToolNode(tools, { handleToolErrors: false }), checkpointer });
 *
 * Every call's identity comes from the graph's own checkpointed state
 * (docs/runtimes.md): the session is the thread id (plus the node path of a
 * subgraph), the step is the call's ordinal among the tool calls of the
 * thread's messages. A resumed thread, and a model turn regenerated from a
 * fork with the same calls, send the same keys (the gateway replays); a
 * regenerated call with other arguments gets `step_conflict`, which reaches
 * the model as a tool error message it can read, and the run goes on.
 *
 * Needs `@langchain/core` and `@langchain/langgraph` (optional peer
 * dependencies of this package: only this entry point imports them).
 *
 * @module
 */
import { ToolMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { DynamicStructuredTool, type StructuredToolInterface, type ToolRunnableConfig } from "@langchain/core/tools";
import { getCurrentTaskInput, interrupt } from "@langchain/langgraph";

import { callGateway, readOnlyIdentity, type CallIdentity, type GatewayAnswer } from "./adapter-core.js";
import type { Client, ToolDefinition } from "./client.js";
import { ApprovalPendingError, GatewayError, InvalidInputError } from "./errors.js";
import { CodeApprovalNotPending } from "./wire.js";
import { deriveKey } from "./key.js";
import { langgraphIdentity } from "./runtimes.js";

/** The identity of one tool call: what the gateway's idempotency key is derived from. */
export interface ToolCallIdentity {
  /** The run's session id: the thread id, plus the node path of a subgraph. */
  sessionId: string;
  /** The call's ordinal among the tool calls of the thread's messages. */
  stepIndex: number;
}

/** The config a tool receives inside a LangGraph ToolNode: a RunnableConfig with the call and the graph state. */
type ToolNodeConfig = ToolRunnableConfig & { state?: unknown };

/**
 * The session id and step index of the tool call being run, from the
 * config LangGraph gives a tool: `configurable.thread_id` and
 * `configurable.checkpoint_ns` (of which only the subgraph's node names
 * count, never the task ids), the call (`config.toolCall.id`), and the
 * thread's messages (the ToolNode's state, or the task's input).
 *
 * For a tool that calls a service of its own that deduplicates by key
 * (a payment API's `Idempotency-Key`): `toolCallIdentity(config)` gives it
 * the same identity a gateway tool would use, so a resumed or regenerated
 * call sends the same key there too (see {@link idempotencyKey}).
 *
 * @throws {@link InvalidInputError}: no thread id (the graph runs without a
 *   checkpointer), no tool call in the config (the tool was invoked with
 *   plain arguments, not by a ToolNode), or the call is not in the messages.
 */
export function toolCallIdentity(config: RunnableConfig | undefined): ToolCallIdentity {
  const toolConfig = (config ?? {}) as ToolNodeConfig;
  const callId = toolConfig.toolCall?.id;
  if (typeof callId !== "string" || callId === "") {
    throw new InvalidInputError(
      "stepIndex",
      "the tool was not invoked with a tool call (config.toolCall.id): run it in a LangGraph ToolNode or createReactAgent",
    );
  }
  const [sessionId, stepIndex] = langgraphIdentity(toolConfig, messagesOf(toolConfig), callId);
  return { sessionId, stepIndex };
}

/**
 * The idempotency key the gateway would derive for this tool call with
 * these arguments (`SHA-256(session:step:tool:JCS(args))`), for a tool
 * whose own callee deduplicates by key.
 */
export function idempotencyKey(config: RunnableConfig | undefined, tool: string, args: unknown): string {
  const { sessionId, stepIndex } = toolCallIdentity(config);
  return deriveKey(sessionId, stepIndex, tool, args);
}

/** The thread's messages a tool sees: the ToolNode's state (`config.state`), else the running task's input. */
function messagesOf(config: ToolNodeConfig): unknown[] {
  const fromState = messagesMember(config.state);
  if (fromState) return fromState;
  let input: unknown;
  try {
    input = getCurrentTaskInput(config as Parameters<typeof getCurrentTaskInput>[0]);
  } catch (err) {
    throw new InvalidInputError("stepIndex", `the tool runs outside a LangGraph task, so it has no thread messages: ${(err as Error).message}`);
  }
  const fromInput = messagesMember(input) ?? (Array.isArray(input) ? input : undefined);
  if (!fromInput) throw new InvalidInputError("stepIndex", "the graph state has no messages list (use MessagesAnnotation or a messages key)");
  return fromInput;
}

function messagesMember(state: unknown): unknown[] | undefined {
  if (state === null || typeof state !== "object") return undefined;
  const messages = (state as { messages?: unknown }).messages;
  return Array.isArray(messages) ? messages : undefined;
}

/** Options of {@link gatewayTools} and {@link gatewayTool}. */
export interface GatewayToolOptions {
  /** Only these tools (by gateway name), in this order; every published tool when absent. */
  names?: readonly string[];
}

/**
 * The gateway's tools (discovery, `GET /api/tools/v1`) as LangChain tools
 * for a LangGraph ToolNode or `createReactAgent`: one request to the gateway,
 * then every call goes through it with the identity of
 * {@link toolCallIdentity}.
 *
 * @throws {@link GatewayError} or `NetworkError`: discovery failed; an
 *   `Error` naming a tool of `names` the gateway does not publish.
 */
export async function gatewayTools(client: Client, options: GatewayToolOptions = {}): Promise<DynamicStructuredTool[]> {
  const published = await client.tools();
  let chosen = published;
  if (options.names) {
    const byName = new Map(published.map((definition) => [definition.name, definition]));
    chosen = options.names.map((name) => {
      const definition = byName.get(name);
      if (!definition) throw new Error(`toolgateway: the gateway publishes no tool ${JSON.stringify(name)} to this tenant`);
      return definition;
    });
  }
  return chosen.map((definition) => gatewayTool(client, definition));
}

/**
 * One tool the gateway runs, as a LangChain tool: from its discovery entry
 * ({@link ToolDefinition}), or from an existing LangChain tool whose name,
 * description and schema the model already knows and whose execution the
 * gateway now does (a gateway tool of the same name, configured with the
 * upstream the local tool called). The local tool's own function is not
 * called.
 *
 * The tool's answer becomes the ToolMessage's content (the body text; status
 * `error` for a 4xx answer). Gateway refusals the model can act on — a
 * `step_conflict` (a regenerated call with other arguments), invalid
 * arguments, a reused key, an unknown outcome, a payload or result too
 * large — come back as a ToolMessage with status `error` that says what
 * happened, and the run goes on. Anything else (the gateway unreachable
 * after the client's retries, a 5xx, a refused token, an unknown tool) is
 * thrown: with a ToolNode created with
 * `handleToolErrors: false` the run stops at its checkpoint, and resuming it
 * sends the same call with the same key.
 */
export function gatewayTool(client: Client, tool: ToolDefinition | StructuredToolInterface): DynamicStructuredTool {
  const definition = "input_schema" in tool ? tool : undefined;
  const name = tool.name;
  const readOnly = definition?.read_only === true;
  return new DynamicStructuredTool({
    name,
    description: tool.description,
    schema: (definition ? definition.input_schema : (tool as StructuredToolInterface).schema) as Record<string, unknown>,
    func: async (args: unknown, _runManager, config?: RunnableConfig): Promise<ToolMessage> => {
      const callId = (config as ToolNodeConfig | undefined)?.toolCall?.id ?? "";
      // A read-only tool needs no thread (see readOnlyIdentity).
      const identity = readOnly ? readOnlyIdentity : toolCallIdentity(config);
      const answer = await callUntilDecided(client, identity, name, args ?? {}, config?.signal);
      if (answer.refused) return new ToolMessage({ status: "error", content: answer.text, name, tool_call_id: callId });
      const result = answer.result;
      return new ToolMessage({
        status: result.status >= 400 ? "error" : "success",
        content: result.body,
        name,
        tool_call_id: callId,
        // What a program (not the model) may want: the execution and whether it was replayed.
        artifact: { executionId: result.executionId, replayed: result.replayed, status: result.status },
      });
    },
  });
}

/**
 * The value of the `interrupt()` a gateway tool raises when its call waits
 * for a human's approval (409 `approval_pending`): what to show the human.
 * It is the interrupt's `value` in `state.tasks[].interrupts` and in the
 * run's `__interrupt__`.
 */
export interface ApprovalInterrupt {
  type: "toolgateway.approval";
  approval_id: string;
  /** RFC 3339; undefined when the gateway did not say. */
  expires_at: string | undefined;
  tool: string;
  args: unknown;
}

/**
 * The human's answer, given as `new Command({ resume: answer })`: `true` /
 * `false`, or `{ approved, note, token }`. Anything else (`null`, a string)
 * is no answer: the tool only checks again.
 *
 * `approver: caller` means a person, so the answer decides at the gateway
 * only with `token`, the deciding person's own bearer token (their OIDC
 * access token): it is sent to the caller endpoint (`Client.approve` /
 * `deny` with `{ token }`) and the call then runs once or comes back as a
 * denial the model reads. Without `token` the answer decides nothing (an
 * agent's token cannot approve its own call: the gateway answers 403
 * `not_an_approver`): an approval makes the same call again, which runs
 * once if a person (an operator in the console or admin API) approved
 * meanwhile, reads their denial with its note if they denied it, and
 * otherwise throws the {@link ApprovalPendingError} (no new interrupt, so
 * an app that approves everything itself cannot loop): resume once a
 * person decided. A refusal without `token` ends the call with a tool
 * message for the model saying the user declined (nothing ran; the
 * approval stays pending until it expires).
 */
export type ApprovalAnswer = boolean | { approved: boolean; note?: string; token?: string };

function answerOf(resume: unknown): { approved: boolean; note?: string; token?: string } | undefined {
  if (typeof resume === "boolean") return { approved: resume };
  if (resume !== null && typeof resume === "object" && typeof (resume as { approved?: unknown }).approved === "boolean") {
    const { approved, note, token } = resume as { approved: boolean; note?: unknown; token?: unknown };
    return { approved, ...(typeof note === "string" ? { note } : {}), ...(typeof token === "string" ? { token } : {}) };
  }
  return undefined;
}

/**
 * One call through the gateway that pauses the graph at an `interrupt()`
 * while the call waits for a human's approval. LangGraph runs the tool again
 * from its start on resume, so the first call after a resume is the same
 * call with the same key: approved, it runs once; still pending, the
 * `interrupt()` returns the human's answer (the resume value), handled as
 * {@link ApprovalAnswer} says.
 */
async function callUntilDecided(
  client: Client,
  identity: CallIdentity,
  tool: string,
  args: unknown,
  signal: AbortSignal | undefined,
): Promise<GatewayAnswer> {
  let pending: ApprovalPendingError;
  let answer: ReturnType<typeof answerOf>;
  // No answer (a resume before anyone decided) checks again and, still
  // pending, pauses at a new interrupt.
  do {
    try {
      return await callGateway(client, identity, tool, args, signal);
    } catch (err) {
      if (!(err instanceof ApprovalPendingError)) throw err;
      pending = err;
    }
    const request: ApprovalInterrupt = {
      type: "toolgateway.approval",
      approval_id: pending.approvalId,
      expires_at: pending.expiresAt?.toISOString(),
      tool,
      args,
    };
    // Throws GraphInterrupt the first time (the run pauses at its
    // checkpoint); returns the resume value when the run is resumed.
    answer = answerOf(interrupt(request));
  } while (answer === undefined);
  if (answer.token !== undefined) {
    const decision = { token: answer.token, ...(answer.note !== undefined ? { note: answer.note } : {}), ...(signal ? { signal } : {}) };
    try {
      if (answer.approved) await client.approve(pending.approvalId, decision);
      else await client.deny(pending.approvalId, decision);
    } catch (err) {
      // Decided already (a run that crashed after sending the answer): the
      // call says how. Anything else (not_an_approver, approval_not_yours)
      // is thrown: the person's answer did not count.
      if (!(err instanceof GatewayError && err.code === CodeApprovalNotPending)) throw err;
    }
  } else if (!answer.approved) {
    return { refused: true, text: `This call of ${tool} was NOT run: the user declined it. Do not make it again.` };
  }
  // Checked once more: run once if approved, a denial's note for the model,
  // or (still pending) the ApprovalPendingError thrown.
  return callGateway(client, identity, tool, args, signal);
}

/**
 * An existing LangChain tool that keeps running in-process, given the
 * gateway's identity of each call: the wrapped tool is invoked with
 * `config.configurable.toolgateway` set to `{ sessionId, stepIndex,
 * idempotencyKey }` (the key for its name and arguments), which it passes
 * to its own callee as that callee's idempotency key. The gateway is not
 * involved: deduplication happens where the tool's side effect is, and only
 * if that callee deduplicates by key.
 */
export function withGatewayIdentity(tool: StructuredToolInterface): DynamicStructuredTool {
  return new DynamicStructuredTool({
    name: tool.name,
    description: tool.description,
    schema: tool.schema as Record<string, unknown>,
    func: async (args: unknown, _runManager, config?: RunnableConfig): Promise<unknown> => {
      const { sessionId, stepIndex } = toolCallIdentity(config);
      const identity = { sessionId, stepIndex, idempotencyKey: deriveKey(sessionId, stepIndex, tool.name, args ?? {}) };
      const inner: RunnableConfig = { ...config, configurable: { ...config?.configurable, toolgateway: identity } };
      return tool.invoke(args as never, inner);
    },
  });
}

/** The identity {@link withGatewayIdentity} put into a wrapped tool's config, or undefined. */
export function gatewayIdentity(config: RunnableConfig | undefined): (ToolCallIdentity & { idempotencyKey: string }) | undefined {
  const identity = config?.configurable?.["toolgateway"] as (ToolCallIdentity & { idempotencyKey: string }) | undefined;
  return identity && typeof identity.sessionId === "string" ? identity : undefined;
}
