// Records what LangGraph.js really gives a tool — its config's thread id and
// checkpoint namespace, the thread's messages, the call's id — in real
// runs of the real @langchain/langgraph, and writes them into the shared
// fixture sdk/testdata/runtimes.json as cases both SDKs' tests run
// (histories "langgraph_recorded_*", cases with "recorded": "langgraph").
//
//   npm run build && node dist/test/record-langgraph.js --write
//
// The runs (a scripted model, no network; an in-memory checkpointer):
//   1. a thread: one call (A), then a turn of two parallel calls (B, C);
//   2. a fork of that thread from the checkpoint before the model's second
//      turn, whose regenerated turn makes the same calls under new ids
//      (B2, C2): LangGraph runs its tools node as a new task, with a new
//      checkpoint_ns (tools:<new uuid>);
//   3. the same agent as a subgraph node ("research") of a parent graph:
//      checkpoint_ns research:<uuid>|tools:<uuid>.
// The wanted answers come from the script (the ordinal of each call in
// the order the model emitted them; the session of the thread, and of the
// subgraph's node path), not from the helpers under test.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool, type ToolRunnableConfig } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import { sessionIdFromParts } from "../src/runtimes.js";
import { repoRoot } from "./helpers.js";

/** What a tool saw in one execution. */
export interface Observation {
  toolCallId: string;
  threadId: string;
  checkpointNs: string;
  /** The thread's messages as the tool saw them, in their JSON (LangChain serialisation) form. */
  messages: unknown[];
}

/** One recorded case: a call the tool saw, and the identity it must get. */
export interface RecordedCall {
  name: string;
  observation: Observation;
  want: [sessionId: string, stepIndex: number];
}

type Turn = AIMessage;

function call(id: string, name: string, args: Record<string, unknown>) {
  return { id, name, args, type: "tool_call" as const };
}

/**
 * A graph of a scripted model node and a ToolNode whose tools record what
 * they see. The model answers with script.turns, one per model turn, then
 * with a final answer; a test refills the script between runs.
 */
function agentGraph(script: { turns: Turn[] }, seen: Observation[]) {
  const record = (config: ToolRunnableConfig & { state?: { messages?: BaseMessage[] } }) => {
    seen.push({
      toolCallId: config.toolCall?.id ?? "",
      threadId: String(config.configurable?.["thread_id"]),
      checkpointNs: String(config.configurable?.["checkpoint_ns"]),
      messages: JSON.parse(JSON.stringify(config.state?.messages ?? [])) as unknown[],
    });
  };
  const lookup = tool(async ({ resource_id }, config) => (record(config), `{"resource":"${resource_id}"}`), {
    name: "lookup-resource",
    description: "Look a resource up.",
    schema: z.object({ resource_id: z.string() }),
  });
  const provision = tool(async ({ name }, config) => (record(config), `{"provisioned":"${name}"}`), {
    name: "provision-infra",
    description: "Provision a machine.",
    schema: z.object({ name: z.string(), region: z.string(), cpus: z.number() }),
  });
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", async () => ({ messages: [script.turns.shift() ?? new AIMessage("done")] }))
    .addNode("tools", new ToolNode([lookup, provision]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent");
}

const turn1 = () => new AIMessage({ content: "", tool_calls: [call("call_A", "lookup-resource", { resource_id: "res_1" })] });
const turn2 = (suffix: string) =>
  new AIMessage({
    content: "",
    tool_calls: [
      call(`call_B${suffix}`, "provision-infra", { name: "db", region: "eu-west-1", cpus: 2 }),
      call(`call_C${suffix}`, "provision-infra", { name: "cache", region: "eu-west-1", cpus: 1 }),
    ],
  });

/** Runs the three scenarios and returns what the tools saw, with the identities the calls must get. */
export async function record(): Promise<RecordedCall[]> {
  const thread = "user-7:thread-3";
  const session = sessionIdFromParts(thread);
  const out: RecordedCall[] = [];
  const find = (seen: Observation[], id: string): Observation => {
    const found = seen.find((o) => o.toolCallId === id);
    if (!found) throw new Error(`the tool never saw ${id}`);
    return found;
  };

  // 1. The thread, and 2. its fork with a regenerated second turn.
  const seen: Observation[] = [];
  const checkpointer = new MemorySaver();
  const script = { turns: [turn1(), turn2("")] };
  const graph = agentGraph(script, seen).compile({ checkpointer });
  const config = { configurable: { thread_id: thread } };
  await graph.invoke({ messages: [new HumanMessage("Provision a database and a cache in eu-west-1")] }, config);
  let beforeTurn2: Parameters<typeof graph.invoke>[1] | undefined;
  for await (const snapshot of graph.getStateHistory(config)) {
    const messages = (snapshot.values as { messages?: unknown[] }).messages ?? [];
    if (snapshot.next.includes("agent") && messages.length === 3) beforeTurn2 = snapshot.config;
  }
  if (!beforeTurn2) throw new Error("no checkpoint before the model's second turn");
  script.turns = [turn2("_regenerated")];
  await graph.invoke(null, beforeTurn2);
  out.push({ name: "thread_call_A", observation: find(seen, "call_A"), want: [session, 0] });
  out.push({ name: "thread_call_B", observation: find(seen, "call_B"), want: [session, 1] });
  out.push({ name: "thread_call_C", observation: find(seen, "call_C"), want: [session, 2] });
  out.push({ name: "fork_call_B", observation: find(seen, "call_B_regenerated"), want: [session, 1] });
  out.push({ name: "fork_call_C", observation: find(seen, "call_C_regenerated"), want: [session, 2] });

  // 3. The agent as the subgraph node "research" of a parent graph.
  const subSeen: Observation[] = [];
  const subgraph = agentGraph({ turns: [turn1(), turn2("")] }, subSeen).compile();
  const parent = new StateGraph(MessagesAnnotation)
    .addNode("research", subgraph)
    .addEdge(START, "research")
    .addEdge("research", END)
    .compile({ checkpointer: new MemorySaver() });
  await parent.invoke({ messages: [new HumanMessage("Research, then provision")] }, { configurable: { thread_id: "thread-9" } });
  const subSession = sessionIdFromParts("thread-9", "research");
  out.push({ name: "subgraph_call_A", observation: find(subSeen, "call_A"), want: [subSession, 0] });
  out.push({ name: "subgraph_call_C", observation: find(subSeen, "call_C"), want: [subSession, 2] });
  return out;
}

/** The fixture's histories and cases for the recorded calls. */
export function fixtureEntries(calls: RecordedCall[]): { histories: Record<string, unknown[]>; cases: unknown[] } {
  const histories: Record<string, unknown[]> = {};
  const cases: unknown[] = [];
  for (const { name, observation, want } of calls) {
    const history = `langgraph_recorded_${name}`;
    histories[history] = observation.messages;
    const config = { configurable: { thread_id: observation.threadId, checkpoint_ns: observation.checkpointNs } };
    cases.push({ fn: "langgraph_identity", recorded: "langgraph", args: [config, { $history: history }, observation.toolCallId], want });
    cases.push({ fn: "langgraph_session_id", recorded: "langgraph", args: [observation.threadId, observation.checkpointNs], want: want[0] });
    cases.push({ fn: "langgraph_step", recorded: "langgraph", args: [{ $history: history }, observation.toolCallId], want: want[1] });
  }
  return { histories, cases };
}

const fixturePath = join(repoRoot, "sdk/testdata/runtimes.json");

/** Replaces the recorded LangGraph part of the fixture with a new recording. */
async function write(): Promise<void> {
  const fixture = JSON.parse(readFileSync(fixturePath, "utf8")) as {
    description: string;
    recorded?: Record<string, string>;
    histories: Record<string, unknown[]>;
    cases: Array<{ recorded?: string }>;
  };
  const { histories, cases } = fixtureEntries(await record());
  for (const name of Object.keys(fixture.histories)) if (name.startsWith("langgraph_recorded_")) delete fixture.histories[name];
  Object.assign(fixture.histories, histories);
  fixture.cases = [...fixture.cases.filter((c) => c.recorded !== "langgraph"), ...(cases as Array<{ recorded?: string }>)];
  const pkg = (name: string) => (JSON.parse(readFileSync(join(repoRoot, "sdk/typescript/node_modules", name, "package.json"), "utf8")) as { version: string }).version;
  fixture.recorded = {
    langgraph: `test/record-langgraph.ts with @langchain/langgraph ${pkg("@langchain/langgraph")}, @langchain/core ${pkg("@langchain/core")}`,
  };
  writeFileSync(fixturePath, JSON.stringify(fixture, null, 1) + "\n");
  console.log(`wrote ${cases.length} recorded LangGraph cases to ${fixturePath}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes("--write")) {
  await write();
}
