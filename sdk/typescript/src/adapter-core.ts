/**
 * What the AI SDK, OpenAI Agents and LangGraph adapters share: their tool
 * definitions from a record or from the gateway's discovery list, the
 * identity of a read-only tool's calls, one call through the gateway with
 * its refusals turned into text for the model, and (for the adapters that
 * learn each call's step from the model's turn) the steps by call id. It
 * imports no runtime.
 *
 * @module
 * @internal
 */
import type { Client, Result, Session, ToolDefinition } from "./client.js";
import { sessionIdFromParts } from "./runtimes.js";
import { refusalText, resultOutcome, type ToolOutcome } from "./tool-outcome.js";

/** The identity of one tool call: what the gateway's idempotency key is derived from. */
export interface CallIdentity {
  sessionId: string;
  stepIndex: number;
}

/**
 * The identity every call of a read-only tool is sent with. The gateway
 * runs a read-only tool on every call and ignores the key headers (it needs
 * no idempotency), so any valid identity will do, and such a call needs no
 * thread, history or step.
 */
export const readOnlyIdentity: Readonly<CallIdentity> = Object.freeze({ sessionId: "read-only", stepIndex: 0 });

/** The gateway's answer to one call as an adapter hands it on: the tool's result, or a refusal the model reads. */
export type GatewayAnswer = { refused: false; result: Result } | { refused: true; text: string };

/**
 * One call through the gateway. A refusal the model can act on
 * ({@link refusalText}: `step_conflict`, invalid arguments, ...) becomes
 * its text; anything else (the gateway unreachable after the client's
 * retries, a retryable answer, auth or configuration errors) is thrown, so
 * the call is not recorded as done and the run can stop and resume.
 */
export async function callGateway(
  client: Client,
  identity: CallIdentity,
  tool: string,
  args: unknown,
  signal?: AbortSignal,
): Promise<GatewayAnswer> {
  try {
    const result = await client.session(identity.sessionId).call(identity.stepIndex, tool, args, signal ? { signal } : {});
    return { refused: false, result };
  } catch (err) {
    const text = refusalText(tool, identity.stepIndex, err);
    if (text === undefined) throw err;
    return { refused: true, text };
  }
}

/**
 * The gateway tools of one conversation, for the adapters whose tools learn
 * each call's step from the model's turn (the AI SDK and the OpenAI Agents
 * SDK): the conversation's session, the definitions by name, the read-only
 * tools, and a number per call id that the adapter's model wrapper records
 * and its tools read.
 */
export class ConversationTools<D> {
  /** The gateway session of the conversation. */
  readonly session: Session;
  /** The definitions the model sees, by gateway tool name. */
  readonly definitions: Readonly<Record<string, D>>;
  readonly #client: Client;
  readonly #readOnly: ReadonlySet<string>;
  readonly #byCallId = new Map<string, number>();

  /**
   * `conversationId` is made a valid session id as {@link sessionIdFromParts}
   * does; `fromDiscovery` turns a discovery entry into the adapter's own
   * definition. A discovery entry's `read_only` marks the tool read-only.
   */
  constructor(
    client: Client,
    conversationId: string,
    definitions: Record<string, D> | readonly ToolDefinition[],
    fromDiscovery: (tool: ToolDefinition) => D,
  ) {
    this.#client = client;
    this.session = client.session(sessionIdFromParts(conversationId));
    const byName: Record<string, D> = {};
    const readOnly = new Set<string>();
    if (Array.isArray(definitions)) {
      for (const tool of definitions as readonly ToolDefinition[]) {
        byName[tool.name] = fromDiscovery(tool);
        if (tool.read_only === true) readOnly.add(tool.name);
      }
    } else {
      Object.assign(byName, definitions);
    }
    this.definitions = byName;
    this.#readOnly = readOnly;
  }

  /** Whether the gateway publishes the tool as read-only (it then needs no step). */
  isReadOnly(tool: string): boolean {
    return this.#readOnly.has(tool);
  }

  /** Records the number the adapter keeps for a call (its step, or its position in the model's turn). */
  remember(callId: string, value: number): void {
    this.#byCallId.set(callId, value);
  }

  /** The number recorded for a call, or undefined. */
  recall(callId: string): number | undefined {
    return this.#byCallId.get(callId);
  }

  /**
   * Runs one call of the conversation: a read-only tool with
   * {@link readOnlyIdentity}, any other as `step` of the session. The
   * tool's answer as the model should see it; a refusal as its text.
   */
  async outcome(tool: string, step: number, args: unknown, signal?: AbortSignal): Promise<ToolOutcome> {
    const identity = this.isReadOnly(tool) ? readOnlyIdentity : { sessionId: this.session.id, stepIndex: step };
    const answer = await callGateway(this.#client, identity, tool, args, signal);
    return answer.refused ? { ok: false, value: answer.text } : resultOutcome(tool, answer.result);
  }
}
