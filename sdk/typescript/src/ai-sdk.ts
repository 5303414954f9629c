/**
 * `@toolgateway/client/ai-sdk`: gateway tools for the Vercel AI SDK
 * (`generateText` / `streamText`, `ai` v7), each call exactly once across
 * crashes and restarts of the app.
 *
 *     const gw = aiSdkGateway(client, chatId, { provision: { description: "...", inputSchema: z.object({ name: z.string() }) } });
 *     const result = await generateText({ model: gw.model(model), tools: gw.tools, messages });
 *
 * Identity (docs/runtimes-ai-sdk.md): the session is the app's conversation
 * id; the step of a tool call is its ordinal among the tool calls of the
 * conversation's messages: the tool calls of the messages sent to the model
 * before this turn, plus the call's position in the model's turn. A tool's
 * `execute` sees only the first part (`options.messages`), so the second is
 * learnt from the model's response by {@link AiSdkGateway.model}.
 *
 * @module
 */
import {
  asSchema,
  jsonSchema,
  tool,
  wrapLanguageModel,
  type FlexibleSchema,
  type LanguageModel,
  type LanguageModelMiddleware,
  type ModelMessage,
  type ToolExecutionOptions,
  type ToolModelMessage,
  type ToolResultPart,
  type ToolSet,
} from "ai";

import { ConversationTools } from "./adapter-core.js";
import { canonicalize } from "./canonical.js";
import type { Client, Session, ToolDefinition } from "./client.js";
import { ApprovalPendingError } from "./errors.js";
import type { ToolOutcome } from "./tool-outcome.js";

export type { ToolDefinition } from "./client.js";

/** A gateway tool as the model sees it: its description and the JSON Schema (or Zod schema) of its arguments. */
export interface AiSdkToolDefinition {
  /** Shown to the model. */
  description?: string;
  /** The arguments' schema: a Zod schema, or `jsonSchema(...)` of the `ai` package. */
  inputSchema: FlexibleSchema<any>;
}

/** A language model instance (not a provider's model id string): what {@link AiSdkGateway.model} wraps. */
export type AiSdkModel = Exclude<LanguageModel, string>;

/** Options of {@link AiSdkGateway.runPendingToolCalls}. */
export interface RunPendingOptions {
  /** Aborts the calls (and their retries). */
  signal?: AbortSignal;
}

/**
 * Number of tool calls in the messages: the `tool-call` parts of the
 * assistant messages, in order (provider-executed ones included, as they
 * are part of the persisted turn). The step index of the next turn's first
 * call.
 */
export function aiSdkToolCallCount(messages: readonly ModelMessage[]): number {
  let count = 0;
  for (const message of messages) count += toolCallsOf(message).length;
  return count;
}

/** The tool-call parts of an assistant message, in order (none for other messages). */
function toolCallsOf(message: ModelMessage): { toolCallId: string; toolName: string; input: unknown; providerExecuted?: boolean }[] {
  if (message.role !== "assistant" || typeof message.content === "string") return [];
  const calls = [];
  for (const part of message.content) if (part.type === "tool-call") calls.push(part);
  return calls;
}

/**
 * The gateway's tools for one conversation of an AI SDK app. Make one per
 * conversation (and per request handling it); see {@link aiSdkGateway}.
 */
export class AiSdkGateway {
  /** The gateway session of the conversation. */
  readonly session: Session;
  /**
   * The tools for `generateText` / `streamText`: each call goes through the
   * gateway with the conversation's session and its step. Use them with a
   * model wrapped by {@link model}.
   */
  readonly tools: ToolSet;
  /**
   * The same tools without `execute`, for the durable loop: `generateText`
   * stops at a turn with tool calls and returns it, the app persists it,
   * then runs the calls with {@link runPendingToolCalls}.
   */
  readonly declarations: ToolSet;
  /** The definitions, the read-only tools, and each tool call's position in the model turn that made it (by tool call id, learnt from the model's responses). */
  readonly #core: ConversationTools<AiSdkToolDefinition>;
  /** Calls the approval check already made through the gateway: their outcome (or error) for `execute`, by tool call id. */
  readonly #settled = new Map<string, { outcome: ToolOutcome } | { error: unknown }>();
  /** The gateway's pending approval of each call it held, by tool call id. */
  readonly #held = new Map<string, ApprovalPendingError>();
  /** The tool calls of the model's last turn, in order, as the wrapped model returned them. */
  #turn: { toolCallId: string; toolName: string; input: string }[] = [];
  /** The approval checks started for the calls of a turn at once: the arguments sent (canonical JSON) and the answer, by tool call id. */
  readonly #started = new Map<string, { args: string; answer: Promise<{ outcome: ToolOutcome } | { error: unknown }> }>();

  constructor(client: Client, conversationId: string, definitions: Record<string, AiSdkToolDefinition> | readonly ToolDefinition[]) {
    this.#core = new ConversationTools(client, conversationId, definitions, (discovered) => ({
      description: discovered.description,
      inputSchema: jsonSchema(discovered.input_schema),
    }));
    this.session = this.#core.session;
    const tools: ToolSet = {};
    const declarations: ToolSet = {};
    for (const [name, definition] of Object.entries(this.#core.definitions)) {
      declarations[name] = tool({ description: definition.description, inputSchema: definition.inputSchema });
      tools[name] = tool({
        description: definition.description,
        inputSchema: definition.inputSchema,
        // Before the call runs, outside the tool's own error handling: a
        // model that is not wrapped fails generateText / streamText itself,
        // instead of handing the model a tool error the app never sees.
        onInputAvailable: ({ toolCallId, messages }) => {
          this.#step(name, toolCallId, messages);
        },
        // The gateway's own approval rules become the AI SDK's tool approval.
        needsApproval: (input: unknown, options: { toolCallId: string; messages: ModelMessage[] }) =>
          this.#needsApproval(name, input, options.toolCallId, options.messages),
        execute: (input: unknown, options: ToolExecutionOptions<unknown>) => this.#execute(name, input, options),
      });
    }
    this.tools = tools;
    this.declarations = declarations;
  }

  /**
   * The model, wrapped so that the gateway tools learn each call's position
   * in the model's turn (the order of the `tool-call` parts of its response,
   * streamed or not). Required for {@link tools}: a call made by a model
   * that is not wrapped is not sent, and fails `generateText` (with
   * `streamText`, the error is thrown from the stream); no effect on the
   * model's requests or answers.
   */
  model(model: AiSdkModel): AiSdkModel {
    const core = this.#core;
    const learn = (turn: { toolCallId: string; toolName: string; input: string }[], part: { toolCallId: string; toolName: string; input: string }) => {
      core.remember(part.toolCallId, turn.length);
      turn.push({ toolCallId: part.toolCallId, toolName: part.toolName, input: part.input });
    };
    const middleware: LanguageModelMiddleware = {
      wrapGenerate: async ({ doGenerate }) => {
        const result = await doGenerate();
        const turn: { toolCallId: string; toolName: string; input: string }[] = [];
        for (const part of result.content) if (part.type === "tool-call") learn(turn, part);
        this.#turn = turn;
        return result;
      },
      wrapStream: async ({ doStream }) => {
        const result = await doStream();
        const turn: { toolCallId: string; toolName: string; input: string }[] = [];
        this.#turn = turn;
        const learnParts = new TransformStream<(typeof result.stream extends ReadableStream<infer P> ? P : never)>({
          transform(part, controller) {
            if (part.type === "tool-call") learn(turn, part);
            controller.enqueue(part);
          },
        });
        return { ...result, stream: result.stream.pipeThrough(learnParts) };
      },
    };
    return wrapLanguageModel({ model, middleware });
  }

  /**
   * The gateway's pending approval of a call it held for a human (the call
   * of a `tool-approval-request` part, by its `toolCallId`): its id, expiry
   * and problem, to show the approver or to poll. Also set for an approved
   * call the gateway still holds for its operator: the run read it as a
   * tool error, so the app should not store that turn, and resume from the
   * stored messages once the operator decided. Known only in this process.
   */
  heldApproval(toolCallId: string): ApprovalPendingError | undefined {
    return this.#held.get(toolCallId);
  }

  /**
   * The step of a call: its ordinal among the tool calls of the messages
   * when they already hold it (a call the app approved, run when the run
   * resumes from the stored messages), else the tool calls of the messages
   * plus its position in the model's turn (0 for a read-only tool, which
   * needs no step); throws if the model was not wrapped.
   */
  #step(tool: string, toolCallId: string, messages: readonly ModelMessage[]): number {
    if (this.#core.isReadOnly(tool)) return 0;
    let ordinal = 0;
    for (const message of messages) {
      for (const call of toolCallsOf(message)) {
        if (call.toolCallId === toolCallId) return ordinal;
        ordinal++;
      }
    }
    const position = this.#core.recall(toolCallId);
    if (position === undefined) {
      throw new Error(
        `toolgateway: tool call ${JSON.stringify(toolCallId)} of ${tool} was not made by a model wrapped with ` +
          `gateway.model(...): pass generateText/streamText the wrapped model, so the call's step is known`,
      );
    }
    return ordinal + position;
  }

  /**
   * The tool's approval check (the AI SDK's `needsApproval`): the call is
   * made through the gateway here, and only a call its rules hold for a
   * human (409 `approval_pending`) becomes the SDK's tool-approval request.
   * Any other outcome (the result, a refusal, an error) is kept for
   * `execute`, which hands it on without calling again.
   */
  async #needsApproval(tool: string, input: unknown, toolCallId: string, messages: readonly ModelMessage[]): Promise<boolean> {
    if (this.#core.isReadOnly(tool)) return false;
    // The AI SDK checks the calls of a turn one after another: each call's
    // check starts the whole turn's gateway calls at once, so the turn's
    // parallel calls stay parallel at the upstream.
    await this.#startTurn(messages);
    const started = this.#started.get(toolCallId);
    this.#started.delete(toolCallId);
    const answer =
      started !== undefined && started.args === canonicalize(input)
        ? await started.answer
        : await this.#core.outcome(tool, this.#step(tool, toolCallId, messages), input).then(
            (outcome) => ({ outcome }),
            (error: unknown) => ({ error }),
          );
    if ("error" in answer && answer.error instanceof ApprovalPendingError) {
      this.#held.set(toolCallId, answer.error);
      return true;
    }
    this.#settled.set(toolCallId, answer);
    return false;
  }

  /**
   * Starts the gateway call of every call of the model's last turn not
   * started yet (nor read-only), with its arguments as the AI SDK passes
   * them to the tool (the model's input parsed and validated by the tool's
   * schema). A call whose input does not parse or validate is left to the
   * AI SDK, which reports it without a check.
   */
  async #startTurn(messages: readonly ModelMessage[]): Promise<void> {
    for (const call of this.#turn) {
      const definition = this.#core.definitions[call.toolName];
      if (definition === undefined || this.#core.isReadOnly(call.toolName) || this.#started.has(call.toolCallId) || this.#settled.has(call.toolCallId)) continue;
      let args: unknown;
      try {
        args = JSON.parse(call.input || "{}");
        const schema = asSchema(definition.inputSchema);
        if (schema.validate !== undefined) {
          const validated = await schema.validate(args);
          if (!validated.success) continue;
          args = validated.value;
        }
      } catch {
        continue;
      }
      const answer = this.#core.outcome(call.toolName, this.#step(call.toolName, call.toolCallId, messages), args).then(
        (outcome) => ({ outcome }),
        (error: unknown) => ({ error }),
      );
      this.#started.set(call.toolCallId, { args: canonicalize(args), answer });
    }
  }

  /**
   * A call the SDK runs: after the approval check, or after the app
   * approved the call's `tool-approval-request` (a `tool-approval-response`
   * part with `approved: true`, usually in a new process, from the stored
   * messages). The app's approval is no decision at the gateway: an agent
   * cannot approve its own call (`approver: caller` means a person). The
   * call is made again with the same step: if a person decided meanwhile
   * (an operator in the console or admin API, or the app's human through
   * `Client.approve(id, { token })` with their own token) it runs once, or
   * the model reads the denial with its note; if the gateway still holds
   * it, the call throws the {@link ApprovalPendingError} (generateText
   * rejects, or the model reads it as a tool error, as the app's tools
   * do): resume once a person decided.
   */
  async #execute(tool: string, input: unknown, options: ToolExecutionOptions<unknown>): Promise<unknown> {
    const settled = this.#settled.get(options.toolCallId);
    this.#settled.delete(options.toolCallId);
    if (settled && "error" in settled) throw settled.error;
    let outcome = settled?.outcome;
    if (outcome === undefined) {
      const step = this.#step(tool, options.toolCallId, options.messages);
      try {
        outcome = await this.#core.outcome(tool, step, input, options.abortSignal);
      } catch (err) {
        if (err instanceof ApprovalPendingError) this.#held.set(options.toolCallId, err);
        throw err;
      }
    }
    if (!outcome.ok) throw new Error(outcome.value);
    return outcome.value;
  }

  /**
   * Runs the gateway tool calls of the conversation's last assistant message
   * that have no result yet, and returns the tool message to append (none
   * when nothing is pending): the loop of a durable app, which persists the
   * model's turn before any tool runs. After a restart it runs the calls
   * again with the same steps, so the gateway replays those that already
   * ran. `messages` is the conversation's full persisted history, oldest
   * first. Calls of tools that are not gateway tools are left to the app.
   * Failures the same call may still overcome (the gateway unreachable, a
   * retryable answer) throw, leaving the calls pending; refusals the model
   * can act on (`step_conflict`, invalid arguments) become error results.
   */
  async runPendingToolCalls(messages: readonly ModelMessage[], options: RunPendingOptions = {}): Promise<ToolModelMessage[]> {
    let last = -1;
    for (let i = messages.length - 1; i >= 0; i--) {
      if (messages[i]!.role === "assistant") {
        last = i;
        break;
      }
    }
    if (last < 0) return [];
    const answered = new Set<string>();
    for (const message of messages.slice(last + 1)) {
      if (message.role !== "tool") continue;
      for (const part of message.content) if (part.type === "tool-result") answered.add(part.toolCallId);
    }
    const base = aiSdkToolCallCount(messages.slice(0, last));
    const pending = toolCallsOf(messages[last]!)
      .map((call, position) => ({ call, step: base + position }))
      .filter(({ call }) => !call.providerExecuted && !answered.has(call.toolCallId) && Object.hasOwn(this.#core.definitions, call.toolName));
    if (pending.length === 0) return [];
    const parts = await Promise.all(
      pending.map(async ({ call, step }): Promise<ToolResultPart> => {
        const outcome = await this.#core.outcome(call.toolName, step, call.input, options.signal);
        return {
          type: "tool-result",
          toolCallId: call.toolCallId,
          toolName: call.toolName,
          output: !outcome.ok
            ? { type: "error-text", value: outcome.value }
            : outcome.json
              ? { type: "json", value: outcome.value as never }
              : { type: "text", value: outcome.value },
        };
      }),
    );
    return [{ role: "tool", content: parts }];
  }
}

/**
 * The gateway's tools for the conversation `conversationId` (the id the app
 * persists the conversation under, stable across restarts and regenerated
 * turns; made a valid session id as {@link sessionIdFromParts} does), with
 * the definitions the model sees, keyed by the gateway tool's name, or the
 * gateway's discovery list (each tool's description and JSON Schema; a tool
 * it marks `read_only` runs without a step, so also with a model that is
 * not wrapped).
 */
export function aiSdkGateway(
  client: Client,
  conversationId: string,
  definitions: Record<string, AiSdkToolDefinition> | readonly ToolDefinition[],
): AiSdkGateway {
  return new AiSdkGateway(client, conversationId, definitions);
}
