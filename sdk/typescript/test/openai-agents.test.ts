// The OpenAI Agents adapter against the real `@openai/agents` package (a
// scripted Model, no network), the real gateway binary and a counting
// upstream tool, with the app killed -9 (openai-agents-agent.ts in a child
// process) while a tool call is in flight and after the tools ran but
// before the app persisted. Each case counts executions at the tool.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { finish, startCrashStack, type CrashStack } from "./agent-crash.js";
import { localServer } from "./helpers.js";

/** Generous: a case takes a second or two; a hang must fail, not stall CI. */
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
  return { conversation: `conv:${conversations}-${Date.now()}`, state: join(stack.dir, `openai-agents-${conversations}.json`) };
}

const provision = (name: string) => ({ tool: "provision", args: { name } });
interface Outcome {
  seen: unknown[];
  output: unknown;
}
/** The text of a function call's output as the model saw it. */
function text(output: unknown): string {
  return typeof output === "string" ? output : String((output as { text?: unknown }).text);
}

for (const mode of ["history", "approval"] as const) {
  // Streamed runs take the same path through the adapter's model wrapper; once per mode is enough for approval.
  for (const stream of mode === "history" ? [false, true] : [false]) {
    const label = `${mode}${stream ? ", streamed" : ""}`;

    test(`${label}: kill -9 while the tool runs, restart: the call ran once`, { timeout }, async () => {
      const chat = conversation();
      const name = `inflight-${mode}-${stream}`;
      const turns = [[provision(name)]];
      stack.hold();
      const first = stack.agent("openai-agents-agent", { ...chat, mode, stream, turns });
      await stack.started(name);
      await first.kill();
      stack.release();
      const outcome = await finish<Outcome>(stack.agent("openai-agents-agent", { ...chat, mode, stream, turns }));
      assert.equal(stack.executions.get(name), 1);
      assert.equal(outcome.seen.length, 1);
      assert.match(text(outcome.seen[0]), new RegExp(`"resource":"${name}-[0-9]+"`));
      assert.equal(outcome.output, "done");
    });

    test(`${label}: kill -9 after the tools ran, before the app persisted: replayed, once`, { timeout }, async () => {
      const chat = conversation();
      const name = `unpersisted-${mode}-${stream}`;
      const turns = [[provision(name)]];
      const first = await stack.agent("openai-agents-agent", { ...chat, mode, stream, turns, crash: "after-tools" }).exited;
      assert.equal(first.signal, "SIGKILL");
      assert.equal(stack.executions.get(name), 1);
      const outcome = await finish<Outcome>(stack.agent("openai-agents-agent", { ...chat, mode, stream, turns }));
      assert.equal(stack.executions.get(name), 1);
      assert.equal(outcome.seen.length, 1);
    });
  }

  test(`${mode}: parallel function calls of one turn get distinct steps: each ran once across a crash`, { timeout }, async () => {
    const chat = conversation();
    const names = ["a", "b", "c", "d"].map((letter) => `parallel-${mode}-${letter}`);
    const turns = [[provision(names[0]!), provision(names[1]!), provision(names[2]!)], [provision(names[3]!)]];
    const first = await stack.agent("openai-agents-agent", { ...chat, mode, turns, crash: "after-tools" }).exited;
    assert.equal(first.signal, "SIGKILL");
    const outcome = await finish<Outcome>(stack.agent("openai-agents-agent", { ...chat, mode, turns }));
    for (const name of names) assert.equal(stack.executions.get(name), 1, name);
    assert.deepEqual(
      outcome.seen.map((output) => /"resource":"([a-z-]+)-[0-9]+"/.exec(text(output))?.[1]),
      names,
    );
  });
}

test("a regenerated turn with other arguments: step_conflict reaches the model as the call's output, the run goes on", { timeout }, async () => {
  const chat = conversation();
  const first = await stack.agent("openai-agents-agent", {
    ...chat,
    mode: "history",
    turns: [[provision("regen-original")]],
    crash: "after-tools",
  }).exited;
  assert.equal(first.signal, "SIGKILL");
  // The model, asked again after the restart, makes another call in the same step.
  const outcome = await finish<Outcome>(
    stack.agent("openai-agents-agent", { ...chat, mode: "history", turns: [[provision("regen-other")]] }),
  );
  assert.equal(stack.executions.get("regen-original"), 1);
  assert.equal(stack.executions.get("regen-other"), undefined);
  assert.equal(outcome.output, "done");
  assert.equal(outcome.seen.length, 1);
  assert.match(text(outcome.seen[0]), /^step_conflict: this call of provision was NOT run\. Step 0 .* a call of provision \(execution [0-9A-Z]{26}\)/);
});

test("tools from the gateway's discovery list (non-strict schemas): the call runs once across a crash", { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("discovered-oa")]];
  const first = await stack.agent("openai-agents-agent", { ...chat, mode: "history", discover: true, turns, crash: "after-tools" }).exited;
  assert.equal(first.signal, "SIGKILL");
  const outcome = await finish<Outcome>(stack.agent("openai-agents-agent", { ...chat, mode: "history", discover: true, turns }));
  assert.equal(stack.executions.get("discovered-oa"), 1);
  assert.equal(outcome.seen.length, 1);
});

/** The URL of a gateway that is down: a port nothing listens on any more. */
async function deadGateway(): Promise<string> {
  const server = await localServer(async (_req, _body, res) => void res.end());
  await server.close();
  return server.url;
}

/** The last stdout line of an agent that stopped (exit 3), parsed. */
function stopped(exited: { code: number | null; stdout: string; stderr: string }): { error: { name: string; cause?: string } } {
  assert.equal(exited.code, 3, exited.stderr);
  const lines = exited.stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]!) as { error: { name: string; cause?: string } };
}

for (const mode of ["history", "approval"] as const) {
  test(`${mode}: the gateway down: the run stops with the gateway's error (nothing persisted), resumed later: the call runs once`, { timeout }, async () => {
    const chat = conversation();
    const name = `down-${mode}`;
    const turns = [[provision(name)]];
    const down = await stack.agent("openai-agents-agent", { ...chat, mode, turns, toolsGateway: await deadGateway() }).exited;
    assert.deepEqual(stopped(down).error, { name: "ToolCallError", cause: "NetworkError" });
    assert.equal(stack.executions.get(name), undefined);
    const outcome = await finish<Outcome>(stack.agent("openai-agents-agent", { ...chat, mode, turns }));
    assert.equal(stack.executions.get(name), 1);
    assert.equal(outcome.seen.length, 1);
    assert.match(text(outcome.seen[0]), new RegExp(`"resource":"${name}-[0-9]+"`));
    assert.equal(outcome.output, "done");
  });
}

test('onFailure "tell-model", the gateway down: the model reads that the call may have run and is not to be made again', { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("down-told")]];
  const outcome = await finish<Outcome>(
    stack.agent("openai-agents-agent", { ...chat, mode: "history", turns, onFailure: "tell-model", toolsGateway: await deadGateway() }),
  );
  assert.equal(stack.executions.get("down-told"), undefined);
  assert.equal(outcome.output, "done");
  assert.equal(outcome.seen.length, 1);
  assert.match(
    text(outcome.seen[0]),
    /^This call of provision could not be confirmed \(the gateway could not be reached\): it may or may not have run\. Do not make it again/,
  );
  assert.doesNotMatch(text(outcome.seen[0]), /try again/i);
});

test('onFailure "tell-model", a model that is not wrapped: the app\'s mistake still stops the run, the call is not sent', { timeout }, async () => {
  const chat = conversation();
  const turns = [[provision("unwrapped-told")]];
  const exited = await stack.agent("openai-agents-agent", { ...chat, mode: "history", turns, onFailure: "tell-model", unwrapped: true }).exited;
  assert.deepEqual(stopped(exited).error, { name: "ToolCallError", cause: "Error" });
  assert.equal(stack.executions.get("unwrapped-told"), undefined);
});
