// The step-index recipes on recorded histories in the documented shapes,
// and the cases of sdk/testdata/runtimes.json, which the Python SDK's tests
// run too: the same inputs give the same session ids and step indices in
// both SDKs.
//
// The histories below are written in the shapes the runtimes document
// (LangGraph message lists and LangChain.js message objects, OpenAI Agents
// SDK session items in the JavaScript SDK's and the Responses API's shapes,
// Temporal history events). The fixture's LangGraph cases marked
// "recorded" are what real LangGraph.js runs gave a tool
// (test/record-langgraph.ts), and one test here records them again from
// the installed @langchain/langgraph and compares.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import {
  deriveKey,
  InvalidInputError,
  langgraphIdentity,
  langgraphSessionId,
  langgraphStep,
  openaiAgentsSessionId,
  openaiAgentsStep,
  sessionIdFromParts,
  temporalSessionId,
  temporalStep,
} from "../src/index.js";
import type { ToolRunnableConfig } from "@langchain/core/tools";

import { checkSessionId } from "../src/key.js";
import { repoRoot } from "./helpers.js";
import { fixtureEntries, record } from "./record-langgraph.js";

interface Case {
  fn: string;
  args: unknown[];
  want?: unknown;
  error?: true;
  recorded?: string;
}

const fixture = JSON.parse(readFileSync(join(repoRoot, "sdk/testdata/runtimes.json"), "utf8")) as {
  histories: Record<string, unknown[]>;
  cases: Case[];
};

function resolveArgs(args: unknown[]): unknown[] {
  return args.map((arg) => {
    const name = (arg as { $history?: string } | null)?.["$history"];
    return typeof name === "string" ? fixture.histories[name] : arg;
  });
}

function isInvalid(field: InvalidInputError["field"]) {
  return (err: unknown): boolean => err instanceof InvalidInputError && err.field === field;
}

// --- LangGraph ---------------------------------------------------------------

// A LangGraph thread: one call, then a turn with two parallel calls (LangChain's message dicts).
const langgraphMessages = [
  { type: "human", content: "Provision a database and a cache in eu-west-1" },
  { type: "ai", content: "", tool_calls: [{ name: "lookup-resource", args: { resource_id: "res_1" }, id: "call_A", type: "tool_call" }] },
  { type: "tool", content: "{...}", tool_call_id: "call_A" },
  {
    type: "ai",
    content: "",
    tool_calls: [
      { name: "provision-infra", args: { name: "db", region: "eu-west-1", cpus: 2 }, id: "call_B", type: "tool_call" },
      { name: "provision-infra", args: { name: "cache", region: "eu-west-1", cpus: 1 }, id: "call_C", type: "tool_call" },
    ],
  },
];

// Stand-ins for LangChain.js message classes: what the helper reads of them
// is the tool_calls property of an AIMessage.
class HumanMessage {
  readonly type = "human";
  constructor(readonly content: string) {}
}
class AIMessage {
  readonly type = "ai";
  readonly content = "";
  constructor(readonly tool_calls: Array<{ id: string; name: string; args: Record<string, unknown>; type: "tool_call" }>) {}
}

test("langgraph: the ordinal of the tool call in the thread", () => {
  assert.deepEqual(["call_A", "call_B", "call_C"].map((id) => langgraphStep(langgraphMessages, id)), [0, 1, 2]);
});

test("langgraph: a regenerated turn with new ids keeps the indices", () => {
  const last = langgraphMessages[3]!;
  const regenerated = [
    ...langgraphMessages.slice(0, 3),
    { type: "ai", tool_calls: last.tool_calls!.map((call) => ({ ...call, id: "call_X" + call.id })) },
  ];
  for (const [old, renewed] of [["call_B", "call_Xcall_B"], ["call_C", "call_Xcall_C"]] as const) {
    assert.equal(langgraphStep(langgraphMessages, old), langgraphStep(regenerated, renewed));
  }
});

test("langgraph: message objects and OpenAI-style dicts", () => {
  const messages = [
    new HumanMessage("hi"),
    new AIMessage([
      { id: "c1", name: "a", args: {}, type: "tool_call" },
      { id: "c2", name: "b", args: {}, type: "tool_call" },
    ]),
  ];
  assert.equal(langgraphStep(messages, "c2"), 1);
  const openaiStyle = [
    { role: "assistant", tool_calls: [{ id: "x", type: "function", function: { name: "a" } }] },
    { role: "tool", tool_call_id: "x" },
    { role: "assistant", tool_calls: [{ id: "y", type: "function", function: { name: "b" } }] },
  ];
  assert.equal(langgraphStep(openaiStyle, "y"), 1);
});

test("langgraph: identity from the config", () => {
  const config = { configurable: { thread_id: "user-7:thread-3", checkpoint_ns: "tools:9a2b7c6d-1e2f-5a3b-9c4d-5e6f7a8b9c0d" } };
  const [session, step] = langgraphIdentity(config, langgraphMessages, "call_C");
  assert.deepEqual([session, step], ["user-7%3Athread-3", 2]);
  assert.equal(deriveKey(session, step, "provision-infra", langgraphMessages[3]!.tool_calls![1]!.args).length, 64);
  const sub = langgraphSessionId("user-7:thread-3", "research:6f1c0e4a|tools:9a2b7c6d");
  assert.equal(sub, "user-7%3Athread-3/research");
  assert.notEqual(sub, session);
});

test("langgraph: the task ids of the namespace do not count (each tools-node run is a new task)", () => {
  const first = langgraphSessionId("thread-1", "tools:11111111-1111-5111-8111-111111111111");
  assert.equal(first, "thread-1");
  assert.equal(langgraphSessionId("thread-1", "tools:22222222-2222-5222-8222-222222222222"), first);
  assert.equal(langgraphSessionId("thread-1", "a:1|b:2|tools:3"), "thread-1/a/b");
  assert.throws(() => langgraphSessionId("thread-1", "|tools:3"), isInvalid("sessionId"));
});

// What LangGraph gives a tool is a ToolRunnableConfig: the helper takes it
// as it is (this compiles only if LangGraphConfig accepts it).
export function identityOfATool(config: ToolRunnableConfig, messages: unknown[]): [string, number] {
  return langgraphIdentity(config, messages, config.toolCall?.id ?? "");
}

test("langgraph: a ToolRunnableConfig is a LangGraphConfig", () => {
  const config: ToolRunnableConfig = {
    configurable: { thread_id: "t-1", checkpoint_ns: "tools:0d9c8b7a-6f5e-5d4c-8b3a-2f1e0d9c8b7a" },
    toolCall: { id: "call_B", name: "provision-infra", args: {}, type: "tool_call" },
  };
  assert.deepEqual(identityOfATool(config, langgraphMessages), ["t-1", 1]);
});

test("langgraph: the recorded runs — a fork's regenerated turn gets the original turn's identity", () => {
  const recorded = new Map(
    fixture.cases
      .filter((c) => c.recorded === "langgraph" && c.fn === "langgraph_identity")
      .filter((c) => (c.args[0] as { configurable: { thread_id: string } }).configurable.thread_id === "user-7:thread-3")
      .map((c) => [c.args[2] as string, c] as const),
  );
  const identity = (id: string) => {
    const c = recorded.get(id)!;
    const config = c.args[0] as { configurable: { checkpoint_ns: string } };
    assert.match(config.configurable.checkpoint_ns, /^([a-z]+:[0-9a-f-]{36}\|)?tools:[0-9a-f-]{36}$/);
    return langgraphIdentity(config, resolveArgs([c.args[1]])[0] as unknown[], id);
  };
  assert.notDeepEqual(recorded.get("call_B")!.args[0], recorded.get("call_B_regenerated")!.args[0], "the fork ran its tools under a new task id");
  assert.deepEqual(identity("call_B_regenerated"), identity("call_B"));
  assert.deepEqual(identity("call_C_regenerated"), identity("call_C"));
  assert.deepEqual(identity("call_C"), ["user-7%3Athread-3", 2]);
});

test("langgraph: the installed LangGraph.js still gives tools what the fixture recorded", async () => {
  const fresh = fixtureEntries(await record());
  const recorded = fixture.cases.filter((c) => c.recorded === "langgraph");
  // Ids (task uuids, message ids) differ per run; the shapes, the calls and the answers do not.
  const shape = (c: Case) =>
    JSON.stringify(c).replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>");
  assert.deepEqual((fresh.cases as Case[]).map(shape), recorded.map(shape));
  for (const [name, history] of Object.entries(fresh.histories)) {
    const uuidless = (v: unknown) => JSON.stringify(v).replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>");
    assert.equal(uuidless(history), uuidless(fixture.histories[name]), name);
  }
});

test("langgraph: a missing call or thread is refused", () => {
  assert.throws(() => langgraphStep(langgraphMessages, "call_Z"), isInvalid("stepIndex"));
  assert.throws(() => langgraphStep(langgraphMessages, ""), isInvalid("stepIndex"));
  assert.throws(() => langgraphStep(undefined as unknown as unknown[], "call_A"), isInvalid("stepIndex"));
  assert.throws(() => langgraphIdentity({ configurable: {} }, langgraphMessages, "call_A"), isInvalid("sessionId"));
  assert.throws(() => langgraphIdentity({}, langgraphMessages, "call_A"), isInvalid("sessionId"));
  assert.throws(() => langgraphIdentity({ configurable: { thread_id: 1.5 } }, langgraphMessages, "call_A"), isInvalid("sessionId"));
});

// --- OpenAI Agents SDK ---------------------------------------------------------

// The JavaScript SDK's session items (protocol items, as session.getItems()
// returns them), then the current run's new items.
const agentsItems = [
  { role: "user", content: "Provision a database" },
  { type: "function_call", callId: "call_1", name: "lookup-resource", arguments: '{"resource_id":"res_1"}', id: "fc_1", status: "completed" },
  { type: "function_call_result", callId: "call_1", name: "lookup-resource", status: "completed", output: { type: "text", text: "{...}" } },
  { type: "reasoning", id: "rs_1", content: [] },
  { type: "hosted_tool_call", name: "web_search_call", id: "ws_1", status: "completed" },
  { type: "function_call", callId: "call_2", name: "provision-infra", arguments: '{"name":"db"}', id: "fc_2", status: "completed" },
  { type: "function_call", callId: "call_3", name: "provision-infra", arguments: '{"name":"cache"}', id: "fc_3", status: "completed" },
];

test("openai agents: the ordinal among function calls (callId, the JavaScript SDK's items)", () => {
  assert.deepEqual(["call_1", "call_2", "call_3"].map((id) => openaiAgentsStep(agentsItems, id)), [0, 1, 2]);
});

test("openai agents: call_id items, run items and regenerated ids", () => {
  // The Responses API's (and the Python SDK's) spelling.
  const snake = agentsItems.map(({ callId, ...rest }) => (callId === undefined ? rest : { ...rest, call_id: callId }));
  assert.equal(openaiAgentsStep(snake, "call_3"), 2);
  // A run's newItems wrap the protocol item: RunToolCallItem { type: "tool_call_item", rawItem }.
  const runItems = agentsItems.map((rawItem) =>
    rawItem.type === "function_call" || rawItem.type === "hosted_tool_call" ? { type: "tool_call_item", rawItem } : rawItem,
  );
  assert.equal(openaiAgentsStep(runItems, "call_2"), 1);
  const regenerated = [...agentsItems.slice(0, 5), ...agentsItems.slice(5).map((item) => ({ ...item, callId: item.callId + "-new" }))];
  assert.equal(openaiAgentsStep(regenerated, "call_3-new"), openaiAgentsStep(agentsItems, "call_3"));
});

test("openai agents: session id and a missing call", () => {
  assert.equal(openaiAgentsSessionId("user_123"), "user_123");
  assert.equal(openaiAgentsSessionId("conv:42 a"), "conv%3A42%20a");
  assert.throws(() => openaiAgentsStep(agentsItems, "call_9"), isInvalid("stepIndex"));
  assert.throws(() => openaiAgentsStep(agentsItems, ""), isInvalid("stepIndex"));
});

// --- Temporal ------------------------------------------------------------------

// Temporal history events, in the JSON shape of `temporal workflow show --output json`.
const temporalHistory = [
  { eventId: "1", eventType: "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED", workflowExecutionStartedEventAttributes: {} },
  { eventId: "5", eventType: "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", activityTaskScheduledEventAttributes: { activityId: "1", activityType: { name: "lookup" } } },
  { eventId: "6", eventType: "EVENT_TYPE_ACTIVITY_TASK_STARTED", activityTaskStartedEventAttributes: { attempt: 3 } },
  { eventId: "11", eventType: "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", activityTaskScheduledEventAttributes: { activityId: "charge-order-77", activityType: { name: "charge" } } },
  { eventId: "12", eventType: "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", activityTaskScheduledEventAttributes: { activityId: "3", activityType: { name: "provision" } } },
];

test("temporal: default activity ids are sequence numbers", () => {
  assert.deepEqual(["1", "2", "17"].map((id) => temporalStep(id)), [1, 2, 17]);
  assert.equal(temporalStep("9007199254740991"), Number.MAX_SAFE_INTEGER);
  for (const bad of ["", "01", "-1", "x1", "charge-order-77", "\u0661", "1".repeat(17), "9007199254740992", 3 as unknown as string]) {
    assert.throws(() => temporalStep(bad), isInvalid("stepIndex"), String(bad));
  }
});

test("temporal: the history ordinal for any activity id", () => {
  assert.deepEqual(["1", "charge-order-77", "3"].map((id) => temporalStep(id, temporalHistory)), [0, 1, 2]);
  assert.throws(() => temporalStep("4", temporalHistory), isInvalid("stepIndex"));
  // The TypeScript client's fetchHistory() objects: eventType is the enum's number
  // (EVENT_TYPE_ACTIVITY_TASK_SCHEDULED = 10, ACTIVITY_TASK_STARTED = 11).
  const fetched = temporalHistory.map((event) => ({
    ...event,
    eventId: BigInt(event.eventId),
    eventType: { EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: 1, EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: 10, EVENT_TYPE_ACTIVITY_TASK_STARTED: 11 }[event.eventType],
  }));
  assert.deepEqual(["1", "charge-order-77", "3"].map((id) => temporalStep(id, fetched)), [0, 1, 2]);
});

test("temporal: session ids", () => {
  assert.equal(temporalSessionId("order-77"), "order-77");
  assert.equal(temporalSessionId("order:77", "0190a1b2-run"), "order%3A77/0190a1b2-run");
});

// --- Session ids from parts ----------------------------------------------------

test("sessionIdFromParts: valid and injective", () => {
  const samples = [["a"], ["a/b"], ["a", "b"], ["a:b"], ["a%3Ab"], ["caf\u00e9 \u{1F600}"], ["x".repeat(300)], ["lone \ud800"]];
  const ids = samples.map((parts) => sessionIdFromParts(...parts));
  for (const id of ids) checkSessionId(id);
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(ids[6]!.startsWith("sha256-"));
  // A lone surrogate is written as Python's surrogatepass writes it.
  assert.equal(ids[7], "lone%20%ED%A0%80");
  assert.throws(() => sessionIdFromParts(), isInvalid("sessionId"));
  assert.throws(() => sessionIdFromParts(""), isInvalid("sessionId"));
  assert.throws(() => sessionIdFromParts(7 as unknown as string), isInvalid("sessionId"));
});

// --- The cases both SDKs run -----------------------------------------------------

const functions: Record<string, (...args: never[]) => unknown> = {
  session_id_from_parts: sessionIdFromParts,
  langgraph_session_id: langgraphSessionId,
  langgraph_step: langgraphStep,
  langgraph_identity: langgraphIdentity,
  openai_agents_session_id: openaiAgentsSessionId,
  openai_agents_step: openaiAgentsStep,
  temporal_session_id: temporalSessionId,
  temporal_step: temporalStep,
};


test("sdk/testdata/runtimes.json: every case gives the recorded result", () => {
  assert.ok(fixture.cases.length >= 50, `only ${fixture.cases.length} cases`);
  assert.deepEqual(new Set(fixture.cases.map((c) => c.fn)), new Set(Object.keys(functions)), "every helper has cases");
  for (const c of fixture.cases) {
    const fn = functions[c.fn];
    assert.ok(fn, `unknown function ${c.fn}`);
    const call = () => (fn as (...args: unknown[]) => unknown)(...resolveArgs(c.args));
    const label = `${c.fn}(${JSON.stringify(c.args).slice(0, 120)})`;
    if (c.error) assert.throws(call, InvalidInputError, label);
    else assert.deepEqual(call(), c.want, label);
  }
});

// The fixture holds what the Python helpers answered when it was written;
// this asks them again, now, so the two SDKs are compared directly and a
// change to either one shows here even before the fixture is updated.
test("the Python SDK answers every case as the TypeScript SDK does", (t) => {
  const program = `
import json, sys
from toolgateway import InvalidInputError, runtimes
fixture = json.load(open(sys.argv[1]))
def resolve(a):
    return fixture["histories"][a["$history"]] if isinstance(a, dict) and "$history" in a else a
out = []
for case in fixture["cases"]:
    try:
        got = getattr(runtimes, case["fn"])(*map(resolve, case["args"]))
        out.append({"want": list(got) if isinstance(got, tuple) else got})
    except InvalidInputError:
        out.append({"error": True})
print(json.dumps(out))
`;
  let stdout: string;
  try {
    stdout = execFileSync("python3", ["-c", program, join(repoRoot, "sdk/testdata/runtimes.json")], {
      env: { ...process.env, PYTHONPATH: join(repoRoot, "sdk/python") },
      encoding: "utf8",
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      t.skip("python3 is not on PATH: the Python SDK cannot be asked");
      return;
    }
    throw err;
  }
  const python = JSON.parse(stdout) as Array<{ want?: unknown; error?: true }>;
  assert.equal(python.length, fixture.cases.length);
  fixture.cases.forEach((c, i) => {
    const label = `${c.fn}(${JSON.stringify(c.args).slice(0, 120)})`;
    let typescript: { want?: unknown; error?: true };
    try {
      typescript = { want: (functions[c.fn] as (...args: unknown[]) => unknown)(...resolveArgs(c.args)) };
    } catch (err) {
      assert.ok(err instanceof InvalidInputError, `${label}: ${String(err)}`);
      typescript = { error: true };
    }
    assert.deepEqual(typescript, python[i], label);
  });
});
