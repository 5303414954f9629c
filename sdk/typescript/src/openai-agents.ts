/**
 * `@toolgateway/client/openai-agents`: gateway tools as function tools of
 * the OpenAI Agents SDK (`@openai/agents`), each call exactly once across
 * crashes and restarts of the app.
 *
 *     const gw = openaiAgentsGateway(client, conversationId, { provision: { description: "...", parameters: z.object({ name: z.string() }) } });
 *     const agent = new Agent({ name: "ops", model: gw.model(model), tools: gw.tools });
 *
 * Identity (docs/runtimes-openai-agents.md): the session is the app's
 * conversation (or run) id; the step of a function call is its ordinal
 * among the `function_call` items of the run's history: the history the
 * model was sent for the turn (the RunState's history: the original input,
 * a session's items, the items generated so far), plus the call's position
 * in the model's response. The model's own `callId` is minted fresh per
 * turn, so it only locates the call. A run resumed from a serialised
 * RunState takes the steps from the state's history ({@link OpenAIAgentsGateway.resume}).
 *
 * @module
 */
import {
  tool,
  type AgentInputItem,
  type FunctionTool,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type RunState,
  type StreamEvent,
  type ToolInputParameters,
} from "@openai/agents";

import { ConversationTools } from "./adapter-core.js";
import { NetworkError, type Client, type Session, type ToolDefinition } from "./client.js";
import { ApprovalPendingError, GatewayError } from "./errors.js";
import { runStateItems } from "./openai-agents-run-state.js";
import { openaiAgentsCallIds, openaiFunctionCall } from "./runtimes.js";
import { unconfirmedText } from "./tool-outcome.js";

export type { ToolDefinition } from "./client.js";

/** A gateway tool as the model sees it. */
export interface OpenAIAgentsToolDefinition {
  /** Shown to the model. */
  description: string;
  /** The arguments' schema: a Zod object, or a JSON Schema object (strict, unless `strict: false`). */
  parameters: ToolInputParameters;
  /** `false` for a non-strict JSON Schema. */
  strict?: boolean;
  /**
   * Pause the run before the call runs (the SDK's tool approval): the run
   * returns with the call as an interruption and a RunState the app
   * persists, so the model's turn is durable before its calls run. The app
   * approves and resumes (see docs/runtimes-openai-agents.md).
   */
  needsApproval?: boolean;
}

/**
 * What a gateway tool does when its call fails in a way the same call may
 * still overcome (the gateway unreachable after the client's retries, a
 * 5xx, an abort) or the app must fix (auth, an unknown tool, a model that
 * is not wrapped). Refusals the model can act on (`step_conflict`, invalid
 * arguments, ...) are the call's output in every case.
 *
 * - `"stop"` (the default): the tool throws, and the run rejects with the
 *   SDK's `ToolCallError` (`err.error` is the gateway's error). Nothing of
 *   the failed call is recorded; the app resumes later from what it stored
 *   (the history, or the RunState stored at approval), and the call goes
 *   out again with the same step and key.
 * - `"tell-model"`: for the gateway's failures (unreachable, an error
 *   answer), the model reads a text that says the call may have run and
 *   not to make it again (a call made again is a new step, a new action),
 *   and the run goes on. The app's own mistakes (a model that is not
 *   wrapped, arguments the SDK refuses) still stop the run.
 * - a function: its text is the call's output, and the run goes on.
 */
export type OpenAIAgentsFailure = "stop" | "tell-model" | ((tool: string, error: unknown) => string | Promise<string>);

/** Options of {@link openaiAgentsGateway}. */
export interface OpenAIAgentsGatewayOptions {
  /** What a failed call does (the SDK's `errorFunction` of each tool); `"stop"` by default. */
  onFailure?: OpenAIAgentsFailure;
}

/** The SDK's `errorFunction` of a tool for a failure mode: null makes the tool's error stop the run. */
function errorFunction(name: string, onFailure: OpenAIAgentsFailure) {
  if (onFailure === "stop") return null;
  if (onFailure === "tell-model") {
    return (_context: unknown, error: unknown) => {
      // Still waiting for an operator: stop, to resume from the stored RunState.
      if (error instanceof ApprovalPendingError) throw error;
      if (!(error instanceof NetworkError || error instanceof GatewayError)) throw error;
      return unconfirmedText(name, error);
    };
  }
  return (_context: unknown, error: unknown) => onFailure(name, error);
}

/**
 * Number of function calls in the items: the step index of the next turn's
 * first call. `items` is a run's history (`runState.history`,
 * `result.history`, a session's items).
 */
export function openaiAgentsCallCount(items: readonly AgentInputItem[]): number {
  return openaiAgentsCallIds(items).length;
}

/**
 * The gateway's tools for one conversation of an OpenAI Agents app. Make
 * one per conversation; see {@link openaiAgentsGateway}.
 */
export class OpenAIAgentsGateway {
  /** The gateway session of the conversation. */
  readonly session: Session;
  /** The function tools: each call goes through the gateway with the conversation's session and its step. */
  readonly tools: FunctionTool<any, any, string>[];
  /** The definitions, the read-only tools, and the step of each function call by call id (learnt from the model's responses or from a resumed RunState). */
  readonly #core: ConversationTools<OpenAIAgentsToolDefinition>;
  /** The arguments of each function call as the model wrote them, by call id. */
  readonly #arguments = new Map<string, string>();
  /** Calls the approval check already made through the gateway: their output (or error) for `execute`, by call id. */
  readonly #settled = new Map<string, { output: string } | { error: unknown }>();

  constructor(
    client: Client,
    conversationId: string,
    definitions: Record<string, OpenAIAgentsToolDefinition> | readonly ToolDefinition[],
    options: OpenAIAgentsGatewayOptions = {},
  ) {
    // A discovered schema is whatever the operator configured: not strict mode's subset.
    this.#core = new ConversationTools(client, conversationId, definitions, (discovered) => ({
      description: discovered.description ?? "",
      parameters: discovered.input_schema as ToolInputParameters,
      strict: false,
    }));
    this.session = this.#core.session;
    const onFailure = options.onFailure ?? "stop";
    this.tools = Object.entries(this.#core.definitions).map(([name, definition]) =>
      tool({
        name,
        description: definition.description,
        parameters: definition.parameters as never,
        strict: (definition.strict ?? true) as never,
        needsApproval: definition.needsApproval
          ? true
          : async (_context: unknown, _input: unknown, callId?: string) => this.#needsApproval(name, callId),
        errorFunction: errorFunction(name, onFailure),
        execute: async (_input: unknown, _context: unknown, details?: { toolCall?: { callId: string; arguments: string } }) => {
          const settled = details?.toolCall && this.#settled.get(details.toolCall.callId);
          if (settled) {
            this.#settled.delete(details.toolCall!.callId);
            if ("error" in settled) throw settled.error;
            return settled.output;
          }
          return this.#executeApproved(name, details?.toolCall);
        },
      }) as FunctionTool<any, any, string>,
    );
  }

  /**
   * The model, wrapped so that the gateway tools learn each call's step
   * from the model's turn: the function calls in the request's input (the
   * run's history) plus the call's position in the response. Required for
   * {@link tools}; the model's requests and answers are unchanged. A model
   * whose history the server keeps (`conversationId`, `previousResponseId`)
   * sends only new items, so its calls cannot be counted: it is refused.
   */
  model(model: Model): Model {
    const core = this.#core;
    const learn = (request: ModelRequest, response: ModelResponse) => {
      let step = Array.isArray(request.input) ? openaiAgentsCallCount(request.input) : 0;
      for (const callId of openaiAgentsCallIds(response.output)) {
        if (typeof callId === "string") core.remember(callId, step);
        step++;
      }
      this.#learnArguments(response.output);
    };
    const check = (request: ModelRequest) => {
      if (request.conversationId || request.previousResponseId) {
        throw new Error(
          "toolgateway: a server-managed conversation (conversationId / previousResponseId) sends the model only new items, " +
            "so the gateway tools cannot count the run's function calls; keep the history in the app (or a Session)",
        );
      }
    };
    const wrapped: Model = {
      async getResponse(request) {
        check(request);
        const response = await model.getResponse(request);
        learn(request, response);
        return response;
      },
      async *getStreamedResponse(request): AsyncIterable<StreamEvent> {
        check(request);
        for await (const event of model.getStreamedResponse(request)) {
          if (event.type === "response_done") learn(request, event.response as unknown as ModelResponse);
          yield event;
        }
      },
    };
    if (model.getRetryAdvice) wrapped.getRetryAdvice = (args) => model.getRetryAdvice!(args);
    return wrapped;
  }

  /**
   * Takes the steps of the function calls of a RunState (the state the app
   * persisted, e.g. at a tool approval, and loaded again with
   * `RunState.fromString`), so its pending calls run with the steps they had
   * when the model made them. Returns the state, for `run(agent, gw.resume(state))`.
   *
   * @throws Error: the state lacks the fields the calls are numbered from
   *   (an `@openai/agents` version this adapter was not checked against).
   */
  resume<S extends RunState<any, any>>(state: S): S {
    let step = 0;
    for (const callId of openaiAgentsCallIds(runStateItems(state))) {
      if (typeof callId === "string") this.#core.remember(callId, step);
      step++;
    }
    this.#learnArguments(runStateItems(state));
    return state;
  }

  #learnArguments(items: readonly unknown[]): void {
    for (const item of items) {
      const call = openaiFunctionCall(item);
      if (call && typeof call.callId === "string" && typeof call.arguments === "string") this.#arguments.set(call.callId, call.arguments);
    }
  }

  /**
   * The tool's approval check (the SDK's `needsApproval`): the call is made
   * through the gateway here, and only a call its rules hold for a human
   * (409 `approval_pending`) becomes the SDK's tool-approval interruption.
   * Any other outcome (the result, a refusal, an error) is kept for
   * `execute`, which hands it on without calling again.
   */
  async #needsApproval(tool: string, callId: string | undefined): Promise<boolean> {
    if (callId === undefined || this.#core.isReadOnly(tool)) return false;
    const args = this.#arguments.get(callId);
    try {
      const output = await this.#execute(tool, args === undefined ? undefined : { callId, arguments: args });
      this.#settled.set(callId, { output });
    } catch (err) {
      if (err instanceof ApprovalPendingError) return true;
      this.#settled.set(callId, { error: err });
    }
    return false;
  }

  /**
   * A call the SDK runs: after the approval check, or after the app
   * approved the call's interruption (`state.approve`). The app's approval
   * is no decision at the gateway: an agent cannot approve its own call
   * (`approver: caller` means a person). The call is made again: if a
   * person decided meanwhile (an operator in the console or admin API, or
   * the app's human through `Client.approve(id, { token })` with their own
   * token) it runs once, or the model reads the denial with its note; if
   * the gateway still holds it, the call throws the
   * {@link ApprovalPendingError} and the run stops: the app resumes its
   * stored RunState once a person decided.
   */
  async #executeApproved(tool: string, call: { callId: string; arguments: string } | undefined): Promise<string> {
    return this.#execute(tool, call);
  }

  async #execute(tool: string, call: { callId: string; arguments: string } | undefined): Promise<string> {
    // A read-only tool's calls need no step (see readOnlyIdentity).
    const step = this.#core.isReadOnly(tool) ? 0 : call && this.#core.recall(call.callId);
    if (call === undefined || step === undefined) {
      throw new Error(
        `toolgateway: the step of this call of ${tool} is unknown: give the agent the model wrapped with gateway.model(...), ` +
          `and pass a RunState loaded from storage through gateway.resume(state)`,
      );
    }
    // The arguments as the model wrote them: a regenerated identical call gives the same key.
    const args: unknown = JSON.parse(call.arguments || "{}");
    const outcome = await this.#core.outcome(tool, step, args);
    return outcome.ok && outcome.json ? JSON.stringify(outcome.value) : String(outcome.value);
  }
}

/**
 * The gateway's tools for the conversation `conversationId` (the id the app
 * persists the conversation or run under, stable across restarts and
 * regenerated turns; made a valid session id as {@link sessionIdFromParts}
 * does), with the definitions the model sees, keyed by the gateway tool's
 * name, or the gateway's discovery list (each tool's description and JSON
 * Schema, used in non-strict mode; a tool it marks `read_only` runs without
 * a step). `options.onFailure` says what a failed call does (see
 * {@link OpenAIAgentsFailure}): by default it stops the run.
 */
export function openaiAgentsGateway(
  client: Client,
  conversationId: string,
  definitions: Record<string, OpenAIAgentsToolDefinition> | readonly ToolDefinition[],
  options: OpenAIAgentsGatewayOptions = {},
): OpenAIAgentsGateway {
  return new OpenAIAgentsGateway(client, conversationId, definitions, options);
}
