// The AI SDK adapter keeps a turn's parallel tool calls parallel: the AI SDK
// checks each call's approval (needsApproval) one after another, and the
// adapter's check is the gateway call itself, so it starts the whole turn's
// calls at once. The upstream holds every request until all of the turn's
// calls arrived (or, if they never do, until a bound) and counts how many it
// held at once: all of them, each executed once.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { generateText, jsonSchema } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { aiSdkGateway } from "../src/ai-sdk.js";
import { Client } from "../src/index.js";
import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { provisionConfig } from "./stack.js";

const token = "ai-sdk-parallel-token";
const parallel = 3;
const executions = new Map<string, number>();
let held = 0;
let mostHeldAtOnce = 0;
let release: () => void = () => {};
let allArrived = new Promise<void>((resolve) => (release = resolve));
let gateway: Gateway;
let closeUpstream: () => Promise<void>;

before(async () => {
  const upstream = await localServer(async (_req, body, res) => {
    const args = JSON.parse(body) as { name: string };
    executions.set(args.name, (executions.get(args.name) ?? 0) + 1);
    held++;
    mostHeldAtOnce = Math.max(mostHeldAtOnce, held);
    if (held === parallel) release();
    // Bounded, so that serialized calls end the test with a count instead of hanging it.
    await Promise.race([allArrived, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
    held--;
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ provisioned: args.name }));
  });
  closeUpstream = upstream.close;
  const dir = tempDir("ai-sdk-parallel-");
  gateway = await startGateway(dir, provisionConfig(dir, upstream.url, token));
});

after(async () => {
  await gateway.kill();
  await closeUpstream();
});

test(`a turn's ${parallel} parallel calls overlap at the upstream: all held at once, each executed once`, { timeout: 60_000 }, async () => {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  };
  const content = Array.from({ length: parallel }, (_, i) => ({
    type: "tool-call" as const,
    toolCallId: `c${i}`,
    toolName: "provision",
    input: JSON.stringify({ name: `parallel-${i}` }),
  }));
  const model = new MockLanguageModelV3({ doGenerate: { content, finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] } });
  const gw = aiSdkGateway(new Client(gateway.url, { token }), `parallel-${Date.now()}`, {
    provision: { inputSchema: jsonSchema({ type: "object", properties: { name: { type: "string" } }, required: ["name"] }) },
  });
  allArrived = new Promise<void>((resolve) => (release = resolve));
  const result = await generateText({ model: gw.model(model), tools: gw.tools, messages: [{ role: "user", content: "go" }] });
  const outputs = result.content.filter((part) => part.type === "tool-result").map((part) => (part as { output: unknown }).output);
  assert.equal(outputs.length, parallel, JSON.stringify(result.content));
  assert.equal(mostHeldAtOnce, parallel);
  for (let i = 0; i < parallel; i++) assert.equal(executions.get(`parallel-${i}`), 1);
});
