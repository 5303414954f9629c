// An OpenAI Agents SDK app, run as a child process by openai-agents.test.ts
// so the test can kill -9 it: a scripted Model (no network), the gateway
// tool "provision" through @toolgateway/client/openai-agents, and the run's
// state persisted to a file. It prints its outcome as one JSON line.
//
// Configuration (argv[2], JSON):
//   gateway, token   the gateway
//   state            the file the app persists to
//   conversation     the conversation id
//   mode             "history": the app persists the run's history
//                    (result.history) when the run returns, and starts the
//                    next run from it (what a Session does);
//                    "approval": the tool needs approval, so the run stops
//                    after the model's turn; the app persists the RunState
//                    (state.toString()), approves and resumes it; after a
//                    restart it resumes the persisted RunState
//                    "gateway": the gateway's decide rules ask for approval:
//                    a call they hold is the run's interruption; the app
//                    persists the RunState, prints INTERRUPTED and waits (the
//                    test kills it); started again, it resumes the persisted
//                    RunState, approving its interruptions if `answer` is
//                    "approve", rejecting them if "reject"
//   turns            the model's script: turn k (k = function calls already
//                    in the input, counted turn by turn) calls these tools;
//                    after the last, the model answers with the outputs it saw
//   stream           run streamed
//   crash            "after-tools": kill -9 itself once the tools ran and
//                    before the app persisted
//   toolsGateway     the gateway the tools call, if not `gateway` (a dead
//                    one: the gateway down)
//   onFailure        the adapter's onFailure option
//   unwrapped        give the agent the model itself, not gw.model(model)
// A run that rejects prints { error: { name, cause } } (the SDK's error and
// the gateway error it wraps) and exits with 3, the app's "stop, resume
// later": it persists nothing more.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

import {
  Agent,
  run,
  RunState,
  setTracingDisabled,
  Usage,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type StreamEvent,
} from "@openai/agents";

import { Client } from "../src/index.js";
import { openaiAgentsGateway } from "../src/openai-agents.js";

interface Config {
  gateway: string;
  token: string;
  state: string;
  conversation: string;
  mode: "history" | "approval" | "gateway";
  answer?: "approve" | "reject";
  turns: { tool: string; args: Record<string, unknown> }[][];
  stream?: boolean;
  crash?: "after-tools";
  /** Take the tool definitions from the gateway's discovery list instead. */
  discover?: boolean;
  toolsGateway?: string;
  onFailure?: "stop" | "tell-model";
  unwrapped?: boolean;
}

const config = JSON.parse(process.argv[2]!) as Config;
setTracingDisabled(true);

function persist(text: string): void {
  writeFileSync(config.state + ".tmp", text);
  renameSync(config.state + ".tmp", config.state);
}

function crashPoint(): void {
  if (config.crash === "after-tools") process.kill(process.pid, "SIGKILL");
}

/** The outputs of the function calls the model saw when it answered. */
let seen: unknown[] = [];

/** The script's answer: the next planned turn's calls (with fresh call ids, as the real API mints them), or the end. */
function respond(request: ModelRequest): ModelResponse {
  const input = Array.isArray(request.input) ? request.input : [];
  let made = input.filter((item) => item.type === "function_call").length;
  let turn = 0;
  while (turn < config.turns.length && made >= config.turns[turn]!.length) made -= config.turns[turn++]!.length;
  const planned = config.turns[turn];
  const usage = new Usage({ requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 });
  if (planned) {
    return {
      usage,
      output: planned.map((call) => ({
        type: "function_call" as const,
        callId: `call_${Math.random().toString(36).slice(2)}`,
        name: call.tool,
        arguments: JSON.stringify(call.args),
        status: "completed" as const,
      })),
    };
  }
  seen = input.filter((item) => item.type === "function_call_result").map((item) => (item as { output: unknown }).output);
  return {
    usage,
    output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }],
  };
}

const scripted: Model = {
  async getResponse(request) {
    return respond(request);
  },
  async *getStreamedResponse(request): AsyncIterable<StreamEvent> {
    const response = respond(request);
    yield {
      type: "response_done",
      response: {
        id: `resp_${Math.random().toString(36).slice(2)}`,
        usage: { requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 },
        output: response.output,
      },
    } as StreamEvent;
  },
};

const client = new Client(config.toolsGateway ?? config.gateway, { token: config.token, initialBackoff: 20 });
const gw = openaiAgentsGateway(
  client,
  config.conversation,
  config.discover
    ? await client.tools() // the gateway's discovery list (GET /api/tools/v1)
    : {
        provision: {
          description: "allocates a resource",
          parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"], additionalProperties: false },
          needsApproval: config.mode === "approval",
        },
      },
  config.onFailure ? { onFailure: config.onFailure } : {},
);
const agent = new Agent({ name: "ops", instructions: "provision what the plan says", model: config.unwrapped ? scripted : gw.model(scripted), tools: gw.tools });

async function runOnce(input: AgentInputItem[] | RunState<any, any>) {
  if (config.stream) {
    const result = await run(agent, input, { maxTurns: 10, stream: true });
    await result.completed;
    return result;
  }
  return run(agent, input, { maxTurns: 10 });
}

const start: AgentInputItem[] = [{ role: "user", content: "provision what the plan says" }];
let output: unknown;
try {
  if (config.mode === "history") {
    const input = existsSync(config.state) ? (JSON.parse(readFileSync(config.state, "utf8")) as AgentInputItem[]) : start;
    const result = await runOnce(input);
    crashPoint();
    persist(JSON.stringify(result.history));
    output = result.finalOutput;
  } else if (config.mode === "gateway") {
    let result;
    if (existsSync(config.state)) {
      const state = gw.resume(await RunState.fromString(agent, readFileSync(config.state, "utf8")));
      for (const interruption of state.getInterruptions()) {
        if (config.answer === "approve") state.approve(interruption);
        if (config.answer === "reject") state.reject(interruption);
      }
      result = await runOnce(state);
    } else {
      result = await runOnce(start);
    }
    if (result.interruptions.length > 0) {
      persist(result.state.toString());
      process.stdout.write(`INTERRUPTED ${result.interruptions.length}\n`);
      await new Promise(() => {}); // paused: the test kills the process here
    }
    output = result.finalOutput;
  } else {
    let result = existsSync(config.state)
      ? await runOnce(gw.resume(await RunState.fromString(agent, readFileSync(config.state, "utf8"))))
      : await runOnce(start);
    while (result.interruptions.length > 0) {
      // The model's turn is durable before its calls run.
      persist(result.state.toString());
      for (const interruption of result.interruptions) result.state.approve(interruption);
      result = await runOnce(result.state);
      if (result.interruptions.length > 0 || result.finalOutput !== undefined) crashPoint();
    }
    persist(result.state.toString());
    output = result.finalOutput;
  }
} catch (err) {
  const cause = (err as { error?: unknown }).error;
  process.stdout.write(JSON.stringify({ error: { name: (err as Error).name, cause: (cause as Error | undefined)?.name } }) + "\n");
  process.exit(3);
}
process.stdout.write(JSON.stringify({ seen, output }) + "\n");
