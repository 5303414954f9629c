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

import type { Client, Session } from "./client.js";
import { sessionIdFromParts } from "./runtimes.js";
import { definitionsByName, refusalText, resultOutcome, type DiscoveredTool } from "./tool-outcome.js";

export type { DiscoveredTool } from "./tool-outcome.js";

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

/** The function-call items of a list of items, in order: their call ids. */
function functionCalls(items: readonly unknown[]): string[] {
  const ids: string[] = [];
  for (const item of items) {
    if (item === null || typeof item !== "object") continue;
    const { type, callId } = item as { type?: unknown; callId?: unknown };
    if (type === "function_call" && typeof callId === "string") ids.push(callId);
  }
  return ids;
}

/**
 * The items of a RunState in the order the model made them: the run's
 * input, then the items the run generated, the calls of an interrupted turn
 * included (its public `history` leaves out calls that have no output yet,
 * which are exactly the ones a resumed run is about to make).
 */
function runItems(state: RunState<any, any>): unknown[] {
  const generated: unknown = state._generatedItems;
  const input: unknown = state._originalInput;
  if (!Array.isArray(generated)) return state.history;
  return [
    ...(Array.isArray(input) ? input : []),
    // A call appears as its tool_call_item; an approval item wraps the same call again.
    ...generated.filter((item) => item?.type === "tool_call_item").map((item) => item.rawItem),
  ];
}

/**
 * Number of function calls in the items: the step index of the next turn's
 * first call. `items` is a run's history (`runState.history`,
 * `result.history`, a session's items).
 */
export function openaiAgentsCallCount(items: readonly AgentInputItem[]): number {
  return functionCalls(items).length;
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
  /** The step of each function call, by call id, learnt from the model's responses or from a resumed RunState. */
  readonly #steps = new Map<string, number>();

  constructor(
    client: Client,
    conversationId: string,
    definitions: Record<string, OpenAIAgentsToolDefinition> | readonly DiscoveredTool[],
  ) {
    this.session = client.session(sessionIdFromParts(conversationId));
    // A discovered schema is whatever the operator configured: not strict mode's subset.
    const byName = definitionsByName(definitions, (discovered) => ({
      description: discovered.description ?? "",
      parameters: discovered.input_schema as ToolInputParameters,
      strict: false,
    }));
    this.tools = Object.entries(byName).map(([name, definition]) =>
      tool({
        name,
        description: definition.description,
        parameters: definition.parameters as never,
        strict: (definition.strict ?? true) as never,
        needsApproval: definition.needsApproval ?? false,
        execute: async (_input: unknown, _context: unknown, details?: { toolCall?: { callId: string; arguments: string } }) =>
          this.#execute(name, details?.toolCall),
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
    const steps = this.#steps;
    const learn = (request: ModelRequest, response: ModelResponse) => {
      let step = Array.isArray(request.input) ? openaiAgentsCallCount(request.input) : 0;
      for (const callId of functionCalls(response.output)) steps.set(callId, step++);
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
   */
  resume<S extends RunState<any, any>>(state: S): S {
    let step = 0;
    for (const callId of functionCalls(runItems(state))) this.#steps.set(callId, step++);
    return state;
  }

  async #execute(tool: string, call: { callId: string; arguments: string } | undefined): Promise<string> {
    const step = call ? this.#steps.get(call.callId) : undefined;
    if (call === undefined || step === undefined) {
      throw new Error(
        `toolgateway: the step of this call of ${tool} is unknown: give the agent the model wrapped with gateway.model(...), ` +
          `and pass a RunState loaded from storage through gateway.resume(state)`,
      );
    }
    // The arguments as the model wrote them: a regenerated identical call gives the same key.
    const args: unknown = JSON.parse(call.arguments || "{}");
    try {
      const outcome = resultOutcome(tool, await this.session.call(step, tool, args));
      return outcome.ok && outcome.json ? JSON.stringify(outcome.value) : String(outcome.value);
    } catch (err) {
      const text = refusalText(tool, step, err);
      if (text === undefined) throw err;
      return text;
    }
  }
}

/**
 * The gateway's tools for the conversation `conversationId` (the id the app
 * persists the conversation or run under, stable across restarts and
 * regenerated turns; made a valid session id as {@link sessionIdFromParts}
 * does), with the definitions the model sees, keyed by the gateway tool's
 * name, or the gateway's discovery list (each tool's description and JSON
 * Schema, used in non-strict mode).
 */
export function openaiAgentsGateway(
  client: Client,
  conversationId: string,
  definitions: Record<string, OpenAIAgentsToolDefinition> | readonly DiscoveredTool[],
): OpenAIAgentsGateway {
  return new OpenAIAgentsGateway(client, conversationId, definitions);
}
