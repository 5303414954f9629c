// Effect keys through the AI SDK adapter (docs/idempotency.md, "Effect
// keys"): the model regenerates a turn [A] as [B, A] after the app was
// killed -9 once A ran, so A's step moves from 0 to 1. A step's key cannot
// tell that this is the same action; the tool's effect_key (its business
// identity, here the resource name) does: A runs once, and the model reads
// A's first result again. The upstream counts the executions.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { finish, startCrashStack, type CrashStack } from "./agent-crash.js";

const timeout = 60_000;
let stack: CrashStack;
before(async () => {
  stack = await startCrashStack({ effectKey: "provision:{/name}" });
});
after(async () => {
  await stack?.close();
});

const provision = (name: string) => ({ tool: "provision", args: { name } });

test("[A] regenerated as [B, A] after a kill -9: A's effect key replays it, A ran once", { timeout }, async () => {
  const chat = { conversation: "chat:effect-regen", state: join(stack.dir, "ai-sdk-effect.json") };
  const first = await stack.agent("ai-sdk-agent", { ...chat, mode: "tools", turns: [[provision("effect-a")]], crash: "after-tools" }).exited;
  assert.equal(first.signal, "SIGKILL");
  assert.equal(stack.executions.get("effect-a"), 1);

  const outcome = await finish<{ seen: unknown[] }>(
    stack.agent("ai-sdk-agent", { ...chat, mode: "tools", turns: [[provision("effect-b"), provision("effect-a")]] }),
  );
  assert.equal(stack.executions.get("effect-a"), 1);
  assert.equal(outcome.seen.length, 2);
  // B took step 0, where A already ran: step_conflict, not run (the model may make it again).
  assert.equal(stack.executions.get("effect-b"), undefined);
  assert.match(String(outcome.seen[0]), /step_conflict: this call of provision was NOT run\. Step 0/);
  // A, now step 1, is answered with its first execution's response.
  assert.deepEqual(outcome.seen[1], { resource: "effect-a-1", execution: 1 });
});
