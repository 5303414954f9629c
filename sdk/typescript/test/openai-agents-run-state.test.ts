// runStateItems against the real @openai/agents of the lock file: the
// RunState fields it reads exist and hold the interrupted turn's calls
// (which state.history leaves out), in memory and after a round trip
// through toString/fromString; a state without them is refused. The
// version it was checked with must be the lock file's, so updating the
// dependency makes this be looked at again.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Agent, run, RunState, setTracingDisabled, tool, Usage, type AgentInputItem, type Model } from "@openai/agents";

import { runStateCheckedWith, runStateItems } from "../src/openai-agents-run-state.js";
import { openaiAgentsCallIds } from "../src/runtimes.js";

setTracingDisabled(true);

const packageDir = new URL("../../", import.meta.url);

test("runStateCheckedWith is the @openai/agents version of the lock file, and the one installed", () => {
  const lock = JSON.parse(readFileSync(new URL("package-lock.json", packageDir), "utf8")) as {
    packages: Record<string, { version?: string }>;
  };
  for (const name of ["@openai/agents", "@openai/agents-core"]) {
    assert.equal(lock.packages[`node_modules/${name}`]?.version, runStateCheckedWith, `${name} in package-lock.json`);
    const installed = JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, packageDir), "utf8")) as { version: string };
    assert.equal(installed.version, runStateCheckedWith, `${name} in node_modules`);
  }
});

/** A model whose one turn calls provision twice, then answers "done". */
const scripted: Model = {
  async getResponse(request) {
    const usage = new Usage({ requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 });
    const input = Array.isArray(request.input) ? request.input : [];
    if (input.some((item) => item.type === "function_call" && item.callId === "call_new_1")) {
      return { usage, output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }] };
    }
    const call = (callId: string, name: string) => ({
      type: "function_call" as const,
      callId,
      name: "provision",
      arguments: JSON.stringify({ name }),
      status: "completed" as const,
    });
    return { usage, output: [call("call_new_1", "a"), call("call_new_2", "b")] };
  },
  async *getStreamedResponse() {
    throw new Error("not streamed here");
  },
};

test("runStateItems: an interrupted turn's calls are there (state.history leaves them out), also after fromString", async () => {
  const provision = tool({
    name: "provision",
    description: "allocates a resource",
    parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"], additionalProperties: false },
    strict: true,
    needsApproval: true,
    execute: async () => "ran",
  });
  const agent = new Agent({ name: "ops", instructions: "provision", model: scripted, tools: [provision] });
  // An earlier turn's call and its output: the new calls are steps 1 and 2.
  const input: AgentInputItem[] = [
    { role: "user", content: "provision a" },
    { type: "function_call", callId: "call_old", name: "provision", arguments: '{"name":"old"}', status: "completed" },
    { type: "function_call_result", callId: "call_old", name: "provision", status: "completed", output: "ran" },
    { role: "user", content: "and a and b" },
  ];
  const result = await run(agent, input);
  assert.equal(result.interruptions.length, 2);
  const wanted = ["call_old", "call_new_1", "call_new_2"];
  assert.deepEqual(openaiAgentsCallIds(runStateItems(result.state)), wanted);
  // Why the private fields: the public history lacks the calls about to run.
  assert.deepEqual(openaiAgentsCallIds(result.state.history), ["call_old"]);
  const restored = await RunState.fromString(agent, result.state.toString());
  assert.deepEqual(openaiAgentsCallIds(runStateItems(restored)), wanted);
});

test("runStateItems: a state without the fields throws, naming the checked version, instead of falling back", () => {
  const missing = { history: [] } as unknown as RunState<any, any>;
  assert.throws(() => runStateItems(missing), new RegExp(`checked with @openai/agents ${runStateCheckedWith.replaceAll(".", "\\.")}`));
  const renamed = { _originalInput: [], _items: [] } as unknown as RunState<any, any>;
  assert.throws(() => runStateItems(renamed), /no _originalInput or _generatedItems list/);
});
