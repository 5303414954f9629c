// The AI SDK adapter against the real `ai` package (a scripted
// MockLanguageModelV3 of `ai/test`), the real gateway binary and a counting
// upstream tool, with the app killed -9 (ai-sdk-agent.ts in a child process)
// while a tool call is in flight and after the tools ran but before the app
// persisted the conversation. Each case counts executions at the tool.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { generateText, jsonSchema, type ModelMessage } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { aiSdkGateway, aiSdkToolCallCount } from "../src/ai-sdk.js";
import { Client } from "../src/index.js";
import { finish, startCrashStack, token, type CrashStack } from "./agent-crash.js";

/** Generous: a case takes about a second; a hang must fail, not stall CI. */
const timeout = 60_000;

let stack: CrashStack;
before(async () => {
  stack = await startCrashStack();
});
after(async () => {
  await stack?.close();
});

let conversations = 0;
/** A fresh conversation: its id and state file. */
function conversation(): { conversation: string; state: string } {
  conversations++;
  return { conversation: `chat:${conversations}-${Date.now()}`, state: join(stack.dir, `ai-sdk-${conversations}.json`) };
}

const provision = (name: string) => ({ tool: "provision", args: { name } });
interface Outcome {
  seen: unknown[];
  messages: ModelMessage[];
}

for (const stream of [false, true]) {
  const api = stream ? "streamText" : "generateText";

  test(`${api}: kill -9 while the tool runs, restart: the regenerated turn is replayed, the tool ran once`, { timeout }, async () => {
    const chat = conversation();
    const name = `inflight-${api}`;
    const turns = [[provision(name)]];
    stack.hold();
    const first = stack.agent("ai-sdk-agent", { ...chat, mode: "tools", stream, turns });
    await stack.started(name);
    await first.kill();
    stack.release();
    const outcome = await finish<Outcome>(stack.agent("ai-sdk-agent", { ...chat, mode: "tools", stream, turns }));
    assert.equal(stack.executions.get(name), 1);
    assert.equal(outcome.seen.length, 1);
    assert.match((outcome.seen[0] as { resource: string }).resource, new RegExp(`^${name}-[0-9]+$`));
  });

  test(`${api}: kill -9 after the tools ran, before the app persisted: replayed, once`, { timeout }, async () => {
    const chat = conversation();
    const name = `unpersisted-${api}`;
    const turns = [[provision(name)]];
    const first = await stack.agent("ai-sdk-agent", { ...chat, mode: "tools", stream, turns, crash: "after-tools" }).exited;
    assert.equal(first.signal, "SIGKILL");
    assert.equal(stack.executions.get(name), 1);
    const outcome = await finish<Outcome>(stack.agent("ai-sdk-agent", { ...chat, mode: "tools", stream, turns }));
    assert.equal(stack.executions.get(name), 1);
    assert.equal(outcome.seen.length, 1);
  });
}

test("a regenerated turn with other arguments: step_conflict reaches the model as a tool error, the run goes on", { timeout }, async () => {
  const chat = conversation();
  const first = await stack.agent("ai-sdk-agent", {
    ...chat,
    mode: "tools",
    turns: [[provision("regen-original")]],
    crash: "after-tools",
  }).exited;
  assert.equal(first.signal, "SIGKILL");
  // The model, asked again after the restart, makes another call in the same step.
  const outcome = await finish<Outcome>(
    stack.agent("ai-sdk-agent", { ...chat, mode: "tools", turns: [[provision("regen-other")]] }),
  );
  assert.equal(stack.executions.get("regen-original"), 1);
  assert.equal(stack.executions.get("regen-other"), undefined);
  assert.equal(outcome.seen.length, 1);
  assert.match(String(outcome.seen[0]), /step_conflict: this call of provision was NOT run\. Step 0 .* a call of provision \(execution [0-9A-Z]{26}\)/);
  // The conflicting call and its error are in the conversation: a call made again later is a new step.
  const toolResult = outcome.messages.find((m) => m.role === "tool")!;
  assert.equal((toolResult.content[0] as { output: { type: string } }).output.type, "error-text");
});

test("parallel tool calls of one turn get distinct steps: each ran once across a crash", { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("parallel-a"), provision("parallel-b"), provision("parallel-c")], [provision("parallel-d")]];
  const first = await stack.agent("ai-sdk-agent", { ...chat, mode: "tools", turns, crash: "after-tools" }).exited;
  assert.equal(first.signal, "SIGKILL");
  const outcome = await finish<Outcome>(stack.agent("ai-sdk-agent", { ...chat, mode: "tools", turns }));
  for (const name of ["parallel-a", "parallel-b", "parallel-c", "parallel-d"]) assert.equal(stack.executions.get(name), 1, name);
  assert.deepEqual(
    outcome.seen.map((value) => (value as { resource: string }).resource.replace(/-[0-9]+$/, "")),
    ["parallel-a", "parallel-b", "parallel-c", "parallel-d"],
  );
});

test("durable loop: kill -9 while the persisted turn's calls run, restart: runPendingToolCalls replays them, each once", { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("durable-a"), provision("durable-b")], [provision("durable-c")]];
  stack.hold();
  const first = stack.agent("ai-sdk-agent", { ...chat, mode: "durable", turns });
  await Promise.all([stack.started("durable-a"), stack.started("durable-b")]);
  await first.kill();
  stack.release();
  const outcome = await finish<Outcome>(stack.agent("ai-sdk-agent", { ...chat, mode: "durable", turns }));
  for (const name of ["durable-a", "durable-b", "durable-c"]) assert.equal(stack.executions.get(name), 1, name);
  assert.equal(outcome.seen.length, 3);
  // The model was asked for the first turn once: it was persisted before its calls ran.
  assert.equal(outcome.messages.filter((m) => m.role === "assistant").length, 3);
});

test("durable loop: kill -9 after the calls ran, before their results were persisted: replayed, once", { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("durable-late-a"), provision("durable-late-b")]];
  const first = await stack.agent("ai-sdk-agent", { ...chat, mode: "durable", turns, crash: "after-tools" }).exited;
  assert.equal(first.signal, "SIGKILL");
  const outcome = await finish<Outcome>(stack.agent("ai-sdk-agent", { ...chat, mode: "durable", turns }));
  assert.equal(stack.executions.get("durable-late-a"), 1);
  assert.equal(stack.executions.get("durable-late-b"), 1);
  assert.equal(outcome.seen.length, 2);
});

test("runPendingToolCalls: steps are the calls' ordinals in the history; answered and foreign calls are left alone", { timeout }, async () => {
  const client = new Client(stack.gateway.url, { token });
  const gw = aiSdkGateway(client, `pending-${Date.now()}`, {
    provision: { inputSchema: jsonSchema({ type: "object" }) },
  });
  const call = (id: string, toolName: string, name: string) => ({ type: "tool-call" as const, toolCallId: id, toolName, input: { name } });
  const messages: ModelMessage[] = [
    { role: "user", content: "go" },
    { role: "assistant", content: [call("x", "provision", "pending-0")] },
    { role: "tool", content: [{ type: "tool-result", toolCallId: "x", toolName: "provision", output: { type: "json", value: {} } }] },
    // The same tool call id again (models and mocks reuse them): positions, not ids, give the steps.
    { role: "assistant", content: [{ type: "text", text: "and" }, call("x", "provision", "pending-1"), call("y", "search", "q"), call("z", "provision", "pending-3")] },
  ];
  assert.equal(aiSdkToolCallCount(messages), 4);
  const [appended] = await gw.runPendingToolCalls(messages);
  assert.ok(appended);
  assert.deepEqual(
    appended.content.map((part) => (part.type === "tool-result" ? part.toolCallId : part.type)),
    ["x", "z"],
  );
  assert.equal(stack.executions.get("pending-0"), undefined, "an answered call is not run");
  // Step 1 and step 3 (the search call holds step 2): a replay with those steps is the same call.
  const again = await client.session(gw.session.id).call(3, "provision", { name: "pending-3" });
  assert.equal(again.replayed, true);
  assert.equal(stack.executions.get("pending-3"), 1);
  assert.deepEqual(await gw.runPendingToolCalls([...messages, appended]), []);
});

test("tools from the gateway's discovery list: the same identity, the call runs once across a crash", { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("discovered-ai")]];
  const first = await stack.agent("ai-sdk-agent", { ...chat, mode: "tools", discover: true, turns, crash: "after-tools" }).exited;
  assert.equal(first.signal, "SIGKILL");
  const outcome = await finish<Outcome>(stack.agent("ai-sdk-agent", { ...chat, mode: "tools", discover: true, turns }));
  assert.equal(stack.executions.get("discovered-ai"), 1);
  assert.equal(outcome.seen.length, 1);
});

/** A mock model whose one turn calls these tools. */
function oneTurn(calls: { toolCallId: string; toolName: string; input: unknown }[]): MockLanguageModelV3 {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  };
  const content = calls.map((call) => ({ type: "tool-call" as const, ...call, input: JSON.stringify(call.input) }));
  const finishReason = { unified: "tool-calls" as const, raw: undefined };
  return new MockLanguageModelV3({
    doGenerate: { content, finishReason, usage, warnings: [] },
    doStream: {
      stream: new ReadableStream({
        start(controller) {
          for (const part of content) controller.enqueue(part);
          controller.enqueue({ type: "finish", finishReason, usage });
          controller.close();
        },
      }),
    },
  });
}

test("gateway tools with a model that is not wrapped: generateText rejects, naming the fix; the call is not sent", { timeout }, async () => {
  const gw = aiSdkGateway(new Client(stack.gateway.url, { token }), `unwrapped-${Date.now()}`, {
    provision: { inputSchema: jsonSchema({ type: "object" }) },
  });
  const model = oneTurn([{ toolCallId: "c1", toolName: "provision", input: { name: "unwrapped" } }]);
  await assert.rejects(
    generateText({ model, tools: gw.tools, messages: [{ role: "user", content: "go" }] }),
    /not made by a model wrapped with gateway\.model\(\.\.\.\)/,
  );
  assert.equal(stack.executions.get("unwrapped"), undefined);
});

test("gateway tools with a model that is not wrapped, streamText: an uncaught error naming the fix stops the app; the call is not sent", { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("unwrapped-stream")]];
  const exited = await stack.agent("ai-sdk-agent", { ...chat, mode: "tools", stream: true, unwrapped: true, turns }).exited;
  assert.notEqual(exited.code, 0);
  assert.match(exited.stderr, /not made by a model wrapped with gateway\.model\(\.\.\.\)/);
  assert.equal(stack.executions.get("unwrapped-stream"), undefined);
});

test("a read-only tool of the discovery list runs without a step, so even with a model that is not wrapped", { timeout }, async () => {
  const client = new Client(stack.gateway.url, { token });
  const discovered = await client.tools();
  assert.equal(discovered.find((tool) => tool.name === "lookup-resource")?.read_only, true);
  const gw = aiSdkGateway(client, `read-only-${Date.now()}`, discovered);
  const model = oneTurn([{ toolCallId: "c1", toolName: "lookup-resource", input: { resource_id: `res_${"0".repeat(26)}` } }]);
  const result = await generateText({ model, tools: gw.tools, messages: [{ role: "user", content: "go" }] });
  // The gateway ran it: the tool's own 404 for an unknown resource, not the adapter's refusal.
  const error = result.content.find((part) => part.type === "tool-error");
  assert.match(String((error as { error: unknown } | undefined)?.error), /The tool lookup-resource answered 404: .*resource_not_found/);
});
