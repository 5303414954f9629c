// The agent process of the LangGraph crash tests (langgraph.test.ts): a
// real createReactAgent with the real SQLite checkpointer (a file the test
// names) and the gateway's tools from @toolgateway/client/langgraph, driven
// by a scripted chat model (no network). The test kills it with SIGKILL and
// starts it again.
//
// Input: one JSON argument (AgentInput). Output, on stdout, one line each:
//   RESPONSE <tool>       the gateway answered a tool call (only with holdAfterResponse:
//                         the process then never finishes the call, so the runtime never
//                         checkpoints it: the test kills it there)
//   INTERRUPTED <json>    the run paused at interrupts (their values); the process
//                         then waits, paused, for the test to kill it
//   DONE <json>           the run finished: its messages (AgentMessage[])
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { Command } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createReactAgent } from "@langchain/langgraph/prebuilt";

import { Client } from "../src/index.js";
import { gatewayTools } from "../src/langgraph.js";

/** One tool call of a scripted model turn. */
export interface ScriptedCall {
  name: string;
  args: Record<string, unknown>;
}

export interface AgentInput {
  gateway: string;
  token: string;
  /** The SQLite file of the checkpointer. */
  db: string;
  thread: string;
  /**
   * The model's turns: turn i (the model's answer when the thread holds i AI
   * messages) makes these calls; past the end, a final answer.
   */
  turns: ScriptedCall[][];
  /** Tool-call ids get this prefix: a new one per process, as a model's are new per generation. */
  idPrefix: string;
  /** start: a new run; resume: continue the thread from its last checkpoint; fork: see forkBeforeTurn; answer: resume an interrupt with `answer`. */
  mode: "start" | "resume" | "fork" | "answer";
  /** answer: the resume value (the human's answer to the interrupt). */
  answer?: unknown;
  /** The client's preferWait (seconds); the default when absent. */
  preferWait?: number;
  /** fork: run again from the checkpoint before the model's turn of this number (0-based). */
  forkBeforeTurn?: number;
  /** LangGraph's durability mode for the run. */
  durability?: "sync" | "async" | "exit";
  /** Hold every call after the gateway's answer, never returning it to the runtime. */
  holdAfterResponse?: boolean;
}

/** A message of the finished run, as the test reads it. */
export interface AgentMessage {
  type: string;
  content: string;
  toolCallId?: string;
  status?: string;
  toolCalls?: string[];
  artifact?: { executionId: string; replayed: boolean; status: number };
}

/** A chat model that answers from the script, by the number of AI messages it is shown. */
class ScriptedModel extends BaseChatModel {
  constructor(
    private readonly turns: ScriptedCall[][],
    private readonly idPrefix: string,
  ) {
    super({});
  }
  _llmType(): string {
    return "scripted";
  }
  override bindTools(): this {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const turn = messages.filter((m) => m.getType() === "ai").length;
    const calls = this.turns[turn];
    const message = calls
      ? new AIMessage({
          content: "",
          tool_calls: calls.map((c, i) => ({ id: `${this.idPrefix}t${turn}c${i}`, name: c.name, args: c.args, type: "tool_call" })),
        })
      : new AIMessage("done");
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

async function main(): Promise<void> {
  const input = JSON.parse(process.argv[2]!) as AgentInput;
  const fetchThenHold: typeof fetch = async (url, init) => {
    const response = await fetch(url, init);
    if (input.holdAfterResponse && init?.method === "POST") {
      await response.text();
      process.stdout.write(`RESPONSE ${String(url).split("/").pop()}\n`);
      await new Promise(() => {}); // the runtime never hears of it
    }
    return response;
  };
  const client = new Client(input.gateway, {
    token: input.token,
    fetch: fetchThenHold,
    maxRetryTime: 20_000,
    ...(input.preferWait === undefined ? {} : { preferWait: input.preferWait }),
  });

  // The adopter's three lines: the gateway's tools, the agent, the run.
  const tools = await gatewayTools(client);
  const checkpointer = SqliteSaver.fromConnString(input.db);
  const agent = createReactAgent({ llm: new ScriptedModel(input.turns, input.idPrefix), tools, checkpointer });

  const config = { configurable: { thread_id: input.thread }, durability: input.durability ?? "sync" };
  let result: { messages: BaseMessage[] };
  if (input.mode === "start") {
    result = await agent.invoke({ messages: [new HumanMessage("Provision what the script says")] }, config);
  } else if (input.mode === "resume") {
    result = await agent.invoke(null, config);
  } else if (input.mode === "answer") {
    result = await agent.invoke(new Command({ resume: input.answer }), config);
  } else {
    let before: { configurable?: Record<string, unknown> } | undefined;
    for await (const snapshot of agent.getStateHistory({ configurable: { thread_id: input.thread } })) {
      const messages = (snapshot.values as { messages?: BaseMessage[] }).messages ?? [];
      const aiTurns = messages.filter((m) => m.getType() === "ai").length;
      if (snapshot.next.includes("agent") && aiTurns === input.forkBeforeTurn) before = snapshot.config;
    }
    if (!before) throw new Error(`no checkpoint before the model's turn ${input.forkBeforeTurn}`);
    result = await agent.invoke(null, { ...before, durability: input.durability ?? "sync" });
  }
  const paused = (await agent.getState(config)).tasks.flatMap((task) => task.interrupts.map((i) => i.value));
  if (paused.length > 0) {
    process.stdout.write(`INTERRUPTED ${JSON.stringify(paused)}\n`);
    await new Promise(() => {}); // paused: the test kills the process here
  }
  const messages: AgentMessage[] = result.messages.map((m) => {
    const out: AgentMessage = { type: m.getType(), content: typeof m.content === "string" ? m.content : JSON.stringify(m.content) };
    if (m instanceof ToolMessage) {
      out.toolCallId = m.tool_call_id;
      out.status = m.status ?? "success";
      if (m.artifact) out.artifact = m.artifact as AgentMessage["artifact"];
    }
    if (m instanceof AIMessage && m.tool_calls?.length) out.toolCalls = m.tool_calls.map((c) => c.id ?? "");
    return out;
  });
  process.stdout.write(`DONE ${JSON.stringify(messages)}\n`);
}

if (process.argv[1]?.endsWith("langgraph-agent.js")) {
  main().catch((err: unknown) => {
    process.stderr.write(`agent failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
